package orchestrator

import (
	"errors"
	"strings"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// Opening beneath a directory. Every host file an fs request touches is reached through a
// descriptor of its mount's real directory and never through a symlink: in one openat2 call
// (RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS|RESOLVE_NO_MAGICLINKS), or where openat2 is missing
// one component at a time with O_NOFOLLOW|O_DIRECTORY. What is opened is then what the path
// named at that instant, beneath the mount, and an entry the sandbox swaps for a link
// afterwards changes nothing about the descriptor held. Each function takes one name or a
// clean relative path: no "..", no absolute path.

// noOpenat2 is set once openat2 proves missing (a kernel before 5.6, a seccomp filter), or
// by a test that takes the component walk.
var noOpenat2 atomic.Bool

// errLinked is a symlink met where the path had none when it was resolved: the entry was
// swapped since.
var errLinked = errors.New("a symlink where none was")

const beneath = unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS

// openRoot opens the directory at the absolute path root (O_PATH), following no link on
// the way: the mount's real directory, where the fs requests open their files beneath.
func openRoot(root string) (int, error) {
	fs, err := unix.Open("/", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	defer unix.Close(fs)
	return openDir(fs, strings.TrimPrefix(root, "/"))
}

// openDir opens the directory rel beneath dirfd (O_PATH), following no link: errLinked when
// a component is one now, ENOENT or ENOTDIR when one is missing or no directory.
func openDir(dirfd int, rel string) (int, error) {
	if rel == "" || rel == "." {
		return unix.Openat(dirfd, ".", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	}
	if !noOpenat2.Load() {
		how := unix.OpenHow{Flags: unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC, Resolve: beneath}
		fd, err := unix.Openat2(dirfd, rel, &how)
		switch {
		case err == nil:
			return fd, nil
		case errors.Is(err, unix.ENOSYS), errors.Is(err, unix.EPERM):
			noOpenat2.Store(true)
		case errors.Is(err, unix.ELOOP), errors.Is(err, unix.EXDEV), errors.Is(err, unix.EAGAIN):
			// ELOOP: a link on the way; EXDEV: a way out of dirfd; EAGAIN: a rename
			// raced the lookup. Each is a change since the path was resolved.
			return -1, errLinked
		default:
			return -1, err
		}
	}
	return walkDir(dirfd, rel)
}

// walkDir is openDir one component at a time, for kernels without openat2.
func walkDir(dirfd int, rel string) (int, error) {
	cur := -1 // -1: dirfd itself, which is not ours to close
	at := func() int {
		if cur < 0 {
			return dirfd
		}
		return cur
	}
	for _, c := range strings.Split(rel, "/") {
		if c == "" || c == "." || c == ".." {
			if cur >= 0 {
				unix.Close(cur)
			}
			return -1, unix.EXDEV // never produced by Locate: refused, not walked
		}
		// O_PATH|O_NOFOLLOW opens a symlink itself; O_DIRECTORY then refuses it (ENOTDIR).
		fd, err := unix.Openat(at(), c, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if errors.Is(err, unix.ENOTDIR) && isLink(at(), c) {
			err = errLinked
		}
		if cur >= 0 {
			unix.Close(cur)
		}
		if err != nil {
			return -1, err
		}
		cur = fd
	}
	return cur, nil
}

// isLink reports whether the entry name in dirfd is a symlink (to tell one from a file met
// where a directory was needed).
func isLink(dirfd int, name string) bool {
	var st unix.Stat_t
	return unix.Fstatat(dirfd, name, &st, unix.AT_SYMLINK_NOFOLLOW) == nil && st.Mode&unix.S_IFMT == unix.S_IFLNK
}

// lstatAt is fstatat of one name in dirfd, not following it.
func lstatAt(dirfd int, name string) (unix.Stat_t, error) {
	var st unix.Stat_t
	err := unix.Fstatat(dirfd, name, &st, unix.AT_SYMLINK_NOFOLLOW)
	return st, err
}
