package wrapped

import "syscall"

// sysProcAttr puts the wrapper in its own process group and kills it when the host dies.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
