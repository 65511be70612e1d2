//go:build linux

// Package setid keeps setuid and setgid bits off every file a sandbox makes. A sandbox's
// files land in the host's workspace; a setuid-root program left there (`cp /bin/sh x;
// chmod 4755 x` in a container running as root) is one any host user could run as root.
// The kernel installs, before it starts anything, a system-call filter that refuses every
// call that would set such a bit: it holds the kernel and every process it starts, on every
// transport, and cannot be lifted.
//
// This file is the decision: which calls of which architecture are refused, and why. The
// filter program (program.go) is compiled from it; Decide reads it directly, so a test can
// hold the compiled program to it.
package setid

import "golang.org/x/sys/unix"

// Action is a filter's verdict on one system call: Allow, or a SECCOMP_RET_ERRNO value.
type Action uint32

// Allow lets a call run.
const Allow Action = unix.SECCOMP_RET_ALLOW

// Refuse is the verdict that fails a call with errno e.
func Refuse(e unix.Errno) Action {
	return Action(unix.SECCOMP_RET_ERRNO | uint32(e)&unix.SECCOMP_RET_DATA)
}

// The set-id bits of a mode, and the open flags that make a file (O_CREAT, or __O_TMPFILE:
// a nameless file that linkat can then name). Both are the same on every architecture
// below.
const (
	setIDBits = unix.S_ISUID | unix.S_ISGID
	creating  = unix.O_CREAT | 0o20000000
)

// check is what a rule looks at.
type check int

const (
	// always refuses the call whatever its arguments.
	always check = iota
	// modeHasSetID refuses the call when its mode argument holds a set-id bit: chmod and
	// its kin, and the calls that always make a file with the mode given (creat, mknod:
	// a regular file made by mknod takes its mode's set-id bits).
	modeHasSetID
	// createsWithSetID refuses the call when its flags make a file and its mode holds a
	// set-id bit: open and openat. Without O_CREAT or O_TMPFILE the mode is ignored and
	// may be anything a caller left in the register, so it is not looked at.
	createsWithSetID
)

// rule is one system call a filter looks at.
type rule struct {
	name  string
	nr    uint32
	check check
	flags int        // the flags argument's index (createsWithSetID)
	mode  int        // the mode argument's index (modeHasSetID, createsWithSetID)
	errno unix.Errno // the refusal's errno
}

// table is one architecture's rules. Its numbers are that architecture's own: a process
// may call through more than one table (a 64-bit x86 process can use int $0x80, which
// takes i386 numbers), so each architecture the machine can run is listed.
type table struct {
	name      string
	arch      uint32 // AUDIT_ARCH_*
	bigEndian bool   // an argument's low 32-bit word is its second (s390x)
	x32       bool   // refuse every call of the x32 ABI (numbers with bit 30 set)
	rules     []rule
}

// x32Bit marks a call of the x32 ABI, which shares AUDIT_ARCH_X86_64 with x86_64 and has
// numbers of its own: every such call is refused (ENOSYS, as on a kernel built without
// it), rather than a second table kept for an ABI nothing here uses.
const x32Bit = 0x40000000

// The rules of one architecture from its call numbers (0: the architecture lacks the call).
//
//   - chmod, fchmod, fchmodat, fchmodat2 (452, the one with flags): EPERM when the mode
//     sets a bit. cp -p/-a, tar x, install -m and rsync -p all end here or in open.
//   - open, openat, creat: EPERM when a file is made with a set-id mode; umask never clears
//     those bits, so the new file would carry them.
//   - mknod, mknodat: EPERM when the mode sets a bit (S_IFREG or a zero type makes a
//     regular file any user may make).
//   - openat2: ENOSYS. Its mode is in a struct behind a pointer, which a filter cannot
//     read; refused as missing, libc and Go fall back to openat, which is looked at.
//   - io_uring_setup: ENOSYS. IORING_OP_OPENAT carries a mode in shared memory no filter
//     sees; with no ring there is no such call, and programs fall back to plain calls.
//
// Not filtered, and why:
//   - link/linkat of an existing setuid file: in a container the system directories are
//     other mounts, so linking one into the workspace fails with EXDEV; on the local
//     transport the sandbox is the host user, who could make the same link (and
//     fs.protected_hardlinks refuses linking another's setuid file).
//   - setxattr of security.capability (file capabilities): the name is behind a pointer.
//     Writing it needs CAP_SETFCAP, which Guard drops from the kernel for good (no new
//     privileges: no descendant regains it), whatever the container's settings kept.
//   - mkdir: Linux ignores set-id bits in its mode; only chmod makes a setgid directory.
//   - what the kernel does by itself, past any filter: an overlay mount's copy-up keeps a
//     lower file's mode. Mounting one needs a user namespace, which the container
//     engines' own profiles refuse a sandbox; on the local transport a user namespace maps
//     the user's own uid alone, so nothing it copies up is root's.
func rules(chmod, fchmod, fchmodat, open, openat, creat, mknod, mknodat uint32) []rule {
	const fchmodat2, openat2, ioUringSetup = 452, 437, 425 // the same number everywhere
	all := []rule{
		{name: "chmod", nr: chmod, check: modeHasSetID, mode: 1, errno: unix.EPERM},
		{name: "fchmod", nr: fchmod, check: modeHasSetID, mode: 1, errno: unix.EPERM},
		{name: "fchmodat", nr: fchmodat, check: modeHasSetID, mode: 2, errno: unix.EPERM},
		{name: "fchmodat2", nr: fchmodat2, check: modeHasSetID, mode: 2, errno: unix.EPERM},
		{name: "open", nr: open, check: createsWithSetID, flags: 1, mode: 2, errno: unix.EPERM},
		{name: "openat", nr: openat, check: createsWithSetID, flags: 2, mode: 3, errno: unix.EPERM},
		{name: "creat", nr: creat, check: modeHasSetID, mode: 1, errno: unix.EPERM},
		{name: "mknod", nr: mknod, check: modeHasSetID, mode: 1, errno: unix.EPERM},
		{name: "mknodat", nr: mknodat, check: modeHasSetID, mode: 2, errno: unix.EPERM},
		{name: "openat2", nr: openat2, check: always, errno: unix.ENOSYS},
		{name: "io_uring_setup", nr: ioUringSetup, check: always, errno: unix.ENOSYS},
	}
	var out []rule
	for _, r := range all {
		if r.nr != 0 {
			out = append(out, r)
		}
	}
	return out
}

// tables are the architectures a filter knows: those Paddock builds kernels for, and the
// 32-bit ABIs their kernels also run (i386 on x86_64, arm on aarch64). The numbers are
// those of each architecture's syscall table; riscv64 and loongarch64 use the generic
// table, as aarch64 does. A compat ABI not listed (s390's 31-bit, 32-bit powerpc) meets
// unknownArch.
var tables = []table{
	{name: "x86_64", arch: unix.AUDIT_ARCH_X86_64, x32: true,
		rules: rules(90, 91, 268, 2, 257, 85, 133, 259)},
	{name: "i386", arch: unix.AUDIT_ARCH_I386,
		rules: rules(15, 94, 306, 5, 295, 8, 14, 297)},
	{name: "aarch64", arch: unix.AUDIT_ARCH_AARCH64,
		rules: rules(0, 52, 53, 0, 56, 0, 0, 33)},
	{name: "arm", arch: unix.AUDIT_ARCH_ARM,
		rules: rules(15, 94, 333, 5, 322, 8, 14, 324)},
	{name: "riscv64", arch: unix.AUDIT_ARCH_RISCV64,
		rules: rules(0, 52, 53, 0, 56, 0, 0, 33)},
	{name: "loongarch64", arch: unix.AUDIT_ARCH_LOONGARCH64,
		rules: rules(0, 52, 53, 0, 56, 0, 0, 33)},
	{name: "ppc64le", arch: unix.AUDIT_ARCH_PPC64LE,
		rules: rules(15, 94, 297, 5, 286, 8, 14, 288)},
	{name: "s390x", arch: unix.AUDIT_ARCH_S390X, bigEndian: true,
		rules: rules(15, 94, 299, 5, 288, 8, 14, 290)},
}

// nativeArch is the AUDIT_ARCH of each Go architecture a table covers: Guard installs the
// filter only where its own calls meet a table (elsewhere every call would be refused as
// unknown, the kernel's own first).
var nativeArch = map[string]uint32{
	"amd64": unix.AUDIT_ARCH_X86_64, "386": unix.AUDIT_ARCH_I386,
	"arm64": unix.AUDIT_ARCH_AARCH64, "arm": unix.AUDIT_ARCH_ARM,
	"riscv64": unix.AUDIT_ARCH_RISCV64, "loong64": unix.AUDIT_ARCH_LOONGARCH64,
	"ppc64le": unix.AUDIT_ARCH_PPC64LE, "s390x": unix.AUDIT_ARCH_S390X,
}

// unknownArch is the verdict on a call of an architecture no table lists: none the
// machines Guard runs on can make, so it is refused as missing rather than guessed at.
var unknownArch = Refuse(unix.ENOSYS)

// x32Refusal is the verdict on every call of the x32 ABI.
var x32Refusal = Refuse(unix.ENOSYS)

// Call is what a filter sees of one system call: seccomp_data's number, architecture and
// arguments.
type Call struct {
	Nr   uint32
	Arch uint32
	Args [6]uint64
}

// Decide is the verdict on c. A mode or flags argument is read in its low 32 bits, as the
// kernel reads an int or a mode_t.
func Decide(c Call) Action {
	for _, t := range tables {
		if t.arch != c.Arch {
			continue
		}
		if t.x32 && c.Nr >= x32Bit {
			return x32Refusal
		}
		for _, r := range t.rules {
			if r.nr == c.Nr {
				return r.decide(c.Args)
			}
		}
		return Allow
	}
	return unknownArch
}

func (r rule) decide(args [6]uint64) Action {
	low := func(i int) uint32 { return uint32(args[i]) }
	switch r.check {
	case modeHasSetID:
		if low(r.mode)&setIDBits != 0 {
			return Refuse(r.errno)
		}
	case createsWithSetID:
		if low(r.flags)&creating != 0 && low(r.mode)&setIDBits != 0 {
			return Refuse(r.errno)
		}
	default:
		return Refuse(r.errno)
	}
	return Allow
}
