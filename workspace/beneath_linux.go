package workspace

import (
	"strconv"

	"golang.org/x/sys/unix"
)

// openat2Beneath opens rel beneath the directory root, resolving no symlink (magic links
// of /proc included) and nothing outside root. The kernel asks for a retry (EAGAIN) when
// a rename elsewhere raced the lookup; a few are tried.
func openat2Beneath(root int, rel string, flags int) (int, error) {
	for range 16 {
		fd, err := unix.Openat2(root, rel, &unix.OpenHow{
			Flags:   uint64(flags),
			Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
		})
		if err != unix.EAGAIN && err != unix.EINTR {
			return fd, err
		}
	}
	return -1, unix.EAGAIN
}

// chmodDirAt makes the directory name of dirfd 0o700 when it cannot be opened for reading:
// it is opened as a path only (O_PATH, following no symlink) and changed through its
// descriptor's /proc link, which names that directory and nothing else.
func chmodDirAt(dirfd int, name string) error {
	fd, err := unix.Openat(dirfd, name, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	return unix.Fchmodat(unix.AT_FDCWD, "/proc/self/fd/"+strconv.Itoa(fd), 0o700, 0)
}
