//go:build linux

package policy

import (
	"errors"
	"io/fs"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// noOpenat2 is set once openat2 proves missing (a kernel before 5.6, a seccomp filter).
var noOpenat2 atomic.Bool

// LinkFree reports, in one openat2 call, whether every component of the clean absolute path
// name exists and none is a symlink: nil when so; an error that is fs.ErrNotExist when a
// component is missing; another error otherwise (a symlink, no openat2). Real then knows
// the path is its own real path without an lstat per component.
func (OSFS) LinkFree(name string) error {
	if noOpenat2.Load() {
		return errors.ErrUnsupported
	}
	how := unix.OpenHow{Flags: unix.O_PATH | unix.O_CLOEXEC, Resolve: unix.RESOLVE_NO_SYMLINKS}
	fd, err := unix.Openat2(unix.AT_FDCWD, name, &how)
	if err != nil {
		if errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.EPERM) {
			noOpenat2.Store(true)
		}
		return &fs.PathError{Op: "openat2", Path: name, Err: err}
	}
	unix.Close(fd)
	return nil
}

// NotLink reports, in one fstatat call that builds nothing, whether the entry name exists
// and is not a symlink: nil when so; an error that is fs.ErrNotExist when it is missing.
func (OSFS) NotLink(name string) error {
	var st unix.Stat_t
	if err := unix.Fstatat(unix.AT_FDCWD, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return &fs.PathError{Op: "lstat", Path: name, Err: err}
	}
	if st.Mode&unix.S_IFMT == unix.S_IFLNK {
		return &fs.PathError{Op: "lstat", Path: name, Err: errors.New("a symlink")}
	}
	return nil
}
