//go:build !linux

package workspace

import "golang.org/x/sys/unix"

// openat2Beneath is openat2, which only Linux has.
func openat2Beneath(int, string, int) (int, error) { return -1, unix.ENOSYS }

// chmodDirAt is not done here: with no descriptor that names a directory without reading
// it, a directory its owner cannot read is left as it is.
func chmodDirAt(int, string) error { return unix.EACCES }
