//go:build !linux

package local

import "syscall"

// sysProcAttr puts the kernel in its own process group; it ends when its stdin closes.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
