//go:build !linux

package workspace

import "golang.org/x/sys/unix"

// openat2Beneath is openat2, which only Linux has.
func openat2Beneath(int, string, int) (int, error) { return -1, unix.ENOSYS }
