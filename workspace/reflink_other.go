//go:build !linux && !darwin

package workspace

import (
	"time"

	"golang.org/x/sys/unix"
)

func reflink(_, _ int, _, _ string) error { return errNoReflink }

const reflinkCreates = false

func copyBytes(dst, src int, size int64) error { return copyLoop(dst, src, 0, size) }

func futimens(_ int, name string, ts []unix.Timespec) error { return unix.UtimesNano(name, ts) }

// tickClock lags the wall clock by a margin wider than any filesystem's time stamp
// granularity, as no coarse clock can be read here.
func tickClock() int64 { return time.Now().Add(-10 * time.Millisecond).UnixNano() }
