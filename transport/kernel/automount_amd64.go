//go:build linux

package kernel

import "golang.org/x/sys/unix"

// The tracer's architecture: its calls' numbers, the flags argument of each, and how a
// stopped task's flags are cleared.
const (
	automountMendable = true
	automountArch     = unix.AUDIT_ARCH_X86_64
	sysStatx          = unix.SYS_STATX
	sysNewfstatat     = unix.SYS_NEWFSTATAT
	statxFlags        = 2 // statx(dirfd, path, flags, mask, buf)
	newfstatatFlags   = 3 // newfstatat(dirfd, path, buf, flags)
)

// clearAutomount clears AT_NO_AUTOMOUNT from the flags of the call task tid is stopped in
// (the filter stops statx and newfstatat alone): rdx holds the third argument, r10 the
// fourth.
func clearAutomount(tid int) error {
	var regs unix.PtraceRegs
	if err := unix.PtraceGetRegs(tid, &regs); err != nil {
		return err
	}
	switch regs.Orig_rax {
	case sysStatx:
		regs.Rdx &^= unix.AT_NO_AUTOMOUNT
	case sysNewfstatat:
		regs.R10 &^= unix.AT_NO_AUTOMOUNT
	default:
		return nil
	}
	return unix.PtraceSetRegs(tid, &regs)
}
