package workspace

import (
	"errors"
	"fmt"
	"os"
	"path"
	"strings"

	"golang.org/x/sys/unix"
)

// The hand-back writes the parent while the parent's program may run, often as root: that
// program can swap a directory of the parent for a symlink to one outside at any moment,
// between two system calls of the hand-back. So nothing of the parent is written by path:
// the directory a path is in is opened beneath the parent's root, one element at a time and
// following no symlink (missing ones made on the way), and every create, rename, exchange,
// removal and change of times is made relative to it. A directory swapped away after it
// was opened is still the one written: it is inside the parent, wherever it now is.

// errNotDirectory is a directory on the way to a path that is now something else: a
// symlink there is never followed, and the path is refused.
var errNotDirectory = errors.New("not a directory (a symlink there is never followed)")

// openDirOf opens the directory that holds rel (slash-separated, relative, with no "." or
// ".." elements) beneath root, following no symlink; with create, missing directories on
// the way are made (mode 0o777 less the umask, as os.MkdirAll makes them). A missing
// directory without create is unix.ENOENT.
func openDirOf(root, rel string, create bool) (int, error) {
	const flags = unix.O_RDONLY | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC
	fd, err := unix.Open(root, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, &pathError{op: "open", path: root, err: err}
	}
	d := path.Dir(rel)
	if d == "." {
		return fd, nil
	}
	walked := root
	for elem := range strings.SplitSeq(d, "/") {
		walked += "/" + elem
		if elem == "" || elem == "." || elem == ".." {
			unix.Close(fd)
			return -1, fmt.Errorf("%s: not a path beneath %s", rel, root)
		}
		next, err := unix.Openat(fd, elem, flags, 0)
		if err == unix.ENOENT && create {
			if err = unix.Mkdirat(fd, elem, 0o777); err == nil || err == unix.EEXIST {
				next, err = unix.Openat(fd, elem, flags, 0)
			}
		}
		unix.Close(fd)
		switch {
		case err == unix.ELOOP || err == unix.ENOTDIR:
			return -1, &pathError{op: "open", path: walked, err: errNotDirectory}
		case err != nil:
			return -1, &pathError{op: "open", path: walked, err: err}
		}
		fd = next
	}
	return fd, nil
}

// kindAt gives the kind of the entry name in the directory dirfd (Absent: none), not
// following a symlink.
func kindAt(dirfd int, name, display string) (Kind, error) {
	var st unix.Stat_t
	if err := unix.Fstatat(dirfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		if err == unix.ENOENT {
			return Absent, nil
		}
		return Absent, &pathError{op: "lstat", path: display, err: err}
	}
	return kindOfMode(factsOf(&st).Mode), nil
}

// removeAllAt removes the entry name of the directory dirfd and all it holds, each
// directory opened beneath the one above it with no symlink followed; a directory that
// its owner cannot write or read is first made 0o700, through its open descriptor.
func removeAllAt(dirfd int, name, display string) error {
	err := unix.Unlinkat(dirfd, name, 0)
	switch {
	case err == nil || err == unix.ENOENT:
		return nil
	case err != unix.EISDIR && err != unix.EPERM:
		return &pathError{op: "remove", path: display, err: err}
	}
	const flags = unix.O_RDONLY | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC
	fd, err := unix.Openat(dirfd, name, flags, 0)
	if err == unix.EACCES {
		if err = chmodDirAt(dirfd, name); err == nil {
			fd, err = unix.Openat(dirfd, name, flags, 0)
		}
	}
	if err != nil {
		return &pathError{op: "open", path: display, err: err}
	}
	d := os.NewFile(uintptr(fd), display)
	defer d.Close()
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return &pathError{op: "fstat", path: display, err: err}
	}
	if st.Mode&0o700 != 0o700 {
		if err := unix.Fchmod(fd, 0o700); err != nil {
			return &pathError{op: "chmod", path: display, err: err}
		}
	}
	names, err := d.Readdirnames(-1)
	if err != nil {
		return err
	}
	for _, n := range names {
		if err := removeAllAt(fd, n, display+"/"+n); err != nil {
			return err
		}
	}
	if err := unix.Unlinkat(dirfd, name, unix.AT_REMOVEDIR); err != nil && err != unix.ENOENT {
		return &pathError{op: "remove", path: display, err: err}
	}
	return nil
}
