package workspace

import (
	"time"

	"golang.org/x/sys/unix"
)

// reflink clones src to the new path dst with clonefile (APFS). It returns errNoReflink
// when the filesystem cannot clone.
func reflink(_, _ int, srcPath, dstPath string) error {
	err := unix.Clonefile(srcPath, dstPath, unix.CLONE_NOFOLLOW)
	switch err {
	case nil:
		return nil
	case unix.ENOTSUP, unix.EXDEV, unix.EINVAL, unix.ENOSYS:
		return errNoReflink
	}
	return err
}

// reflinkCreates is whether reflink makes dst itself (clonefile) rather than filling an
// open one.
const reflinkCreates = true

func copyBytes(dst, src int, size int64) error { return copyLoop(dst, src, 0, size) }

func futimens(_ int, name string, ts []unix.Timespec) error { return unix.UtimesNano(name, ts) }

// tickClock lags the wall clock by a margin wider than any filesystem's time stamp
// granularity, as no coarse clock can be read here.
func tickClock() int64 { return time.Now().Add(-10 * time.Millisecond).UnixNano() }
