//go:build !linux

package wrapped

import "syscall"

// sysProcAttr puts the wrapper in its own process group; it ends when its stdin closes.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
