package workspace

import "golang.org/x/sys/unix"

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
