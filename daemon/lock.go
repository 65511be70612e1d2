package daemon

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/paddockhq/paddock/errdefs"
)

// LockName is the file in the state directory a daemon holds locked for its lifetime: one
// daemon a state directory, so that a second cannot take over (and reap) the first's
// sessions.
const LockName = "daemon.lock"

// LockedError is a state directory another daemon holds.
type LockedError struct {
	Dir string
	PID int // the holder's pid as it wrote it; 0 when unreadable
}

func (e *LockedError) Error() string {
	who := "another daemon"
	if e.PID > 0 {
		who = fmt.Sprintf("the daemon with pid %d", e.PID)
	}
	return fmt.Sprintf("daemon: state directory %s is in use by %s; stop it first, or give this one another --state", e.Dir, who)
}

// Code is the stable code of the error.
func (e *LockedError) Code() string { return "state_locked" }

// Class is the error's class.
func (e *LockedError) Class() errdefs.Class { return errdefs.Conflict }

// lockState takes the state directory's lock, or says who holds it. The lock is an flock
// on an open file: the kernel drops it when the process ends however it ends, so a killed
// daemon leaves no stale lock behind. The holder's pid is written in the file for the
// message of the next one refused.
func lockState(dir string) (*os.File, error) {
	p := filepath.Join(dir, LockName)
	f, err := os.OpenFile(p, os.O_RDWR|os.O_CREATE|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("daemon: state directory lock: %w", err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		defer f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			b := make([]byte, 32)
			n, _ := f.ReadAt(b, 0)
			pid, _ := strconv.Atoi(strings.TrimSpace(string(b[:n])))
			return nil, &LockedError{Dir: dir, PID: pid}
		}
		return nil, fmt.Errorf("daemon: state directory lock: %w", err)
	}
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return f, nil
}
