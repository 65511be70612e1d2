package workspace

import (
	"errors"
	"fmt"
	"strings"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// A program that writes the parent can swap any of its directories for a symlink, or for
// another directory, at any moment, even between two system calls of a clone. So the
// parent is never read by path: each directory is opened beneath the parent's root,
// following no symlink in any element of its path, and checked to be the directory it was
// when listed (its device and inode); files and symlinks are then read relative to it.

// dirID is what a directory is, whatever its path: its device and inode.
type dirID struct{ dev, ino uint64 }

func dirIDOf(st *unix.Stat_t) dirID { return dirID{dev: uint64(st.Dev), ino: st.Ino} }

// errChanged is a directory that is no longer the one listed at its path.
var errChanged = errors.New("changed while cloning")

// noOpenat2 is set once the kernel refused openat2 (before Linux 5.6).
var noOpenat2 atomic.Bool

// openDir opens the directory rel (slash-separated, relative, with no "." or ".."
// elements; "." is root itself) beneath the open directory root, following no symlink, and
// returns it with its stat facts. When want is set, a directory other than want is
// errChanged. A path that no longer leads to a directory is errChanged too.
func openDir(root int, rel string, want *dirID) (int, *unix.Stat_t, error) {
	fd, err := openBeneath(root, rel)
	if err != nil {
		if err == unix.ENOENT || err == unix.ENOTDIR || err == unix.ELOOP || err == unix.EXDEV {
			return -1, nil, fmt.Errorf("%s: %w", rel, errChanged)
		}
		return -1, nil, &pathError{op: "open", path: rel, err: err}
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return -1, nil, &pathError{op: "fstat", path: rel, err: err}
	}
	if want != nil && dirIDOf(&st) != *want {
		unix.Close(fd)
		return -1, nil, fmt.Errorf("%s: %w", rel, errChanged)
	}
	return fd, &st, nil
}

// openBeneath opens rel beneath root as a directory: with openat2 where the kernel has it
// (one call, resolving no symlink and nothing outside root), else one element at a time,
// each opened beneath the last with O_NOFOLLOW.
func openBeneath(root int, rel string) (int, error) {
	const flags = unix.O_RDONLY | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC
	if rel == "" || rel == "." {
		return unix.Openat(root, ".", flags, 0)
	}
	if !noOpenat2.Load() {
		fd, err := openat2Beneath(root, rel, flags)
		if err != unix.ENOSYS {
			return fd, err
		}
		noOpenat2.Store(true)
	}
	fd := root
	for elem := range strings.SplitSeq(rel, "/") {
		next, err := unix.Openat(fd, elem, flags, 0)
		if fd != root {
			unix.Close(fd)
		}
		if err != nil {
			return -1, err
		}
		fd = next
	}
	return fd, nil
}
