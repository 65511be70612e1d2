package local

import "syscall"

// sysProcAttr puts the kernel in its own process group and ends it when the host dies: with
// SIGTERM, which the kernel takes to end every process group it started before it exits (a
// SIGKILL left them running, orphaned).
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
}
