//go:build linux

package setid

import (
	"encoding/binary"
	"math/rand/v2"
	"runtime"
	"testing"

	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// vmInput is c laid out as the kernel shows seccomp_data to a filter: the program's 32-bit
// loads see each field's native value. x/net/bpf's machine reads words big-endian, so each
// word is written so; an argument's low word comes first, or second for a big-endian
// architecture.
func vmInput(c Call) []byte {
	be := false
	for _, t := range tables {
		if t.arch == c.Arch {
			be = t.bigEndian
		}
	}
	b := make([]byte, 64)
	binary.BigEndian.PutUint32(b[offNr:], c.Nr)
	binary.BigEndian.PutUint32(b[offArch:], c.Arch)
	for i, a := range c.Args {
		lo, hi := argLow(be, i), argLow(be, i)+4
		if be {
			hi = lo - 4
		}
		binary.BigEndian.PutUint32(b[lo:], uint32(a))
		binary.BigEndian.PutUint32(b[hi:], uint32(a>>32))
	}
	return b
}

func newVM(t *testing.T) *bpf.VM {
	t.Helper()
	prog, err := Program()
	if err != nil {
		t.Fatal(err)
	}
	if len(prog) > unix.BPF_MAXINSNS {
		t.Fatalf("the program is %d instructions; the kernel takes %d", len(prog), unix.BPF_MAXINSNS)
	}
	if _, err := assemble(prog); err != nil {
		t.Fatal(err)
	}
	vm, err := bpf.NewVM(prog)
	if err != nil {
		t.Fatal(err)
	}
	return vm
}

func run(t *testing.T, vm *bpf.VM, c Call) Action {
	t.Helper()
	v, err := vm.Run(vmInput(c))
	if err != nil {
		t.Fatalf("%+v: %v", c, err)
	}
	return Action(v)
}

// The compiled filter gives every call the verdict the rules give it: random calls of every
// architecture known and unknown, the numbers of the rules and others, x32 numbers, and
// arguments whose set-id bits, creating flags and high words vary.
//
// law: no_setid_from_sandbox
func TestProgramIsDecide(t *testing.T) {
	vm := newVM(t)
	r := rand.New(rand.NewPCG(1, uint64(len(tables))))
	var nrs []uint32
	for _, tb := range tables {
		for _, ru := range tb.rules {
			nrs = append(nrs, ru.nr)
		}
	}
	arches := []uint32{unix.AUDIT_ARCH_MIPS, unix.AUDIT_ARCH_S390, unix.AUDIT_ARCH_PPC, 0}
	for _, tb := range tables {
		arches = append(arches, tb.arch)
	}
	bits := []uint64{0, unix.S_ISUID, unix.S_ISGID, unix.S_ISUID | unix.S_ISGID, unix.S_ISVTX, 0o777,
		unix.O_CREAT, 0o20000000, unix.O_TMPFILE, unix.O_RDONLY, unix.O_WRONLY | unix.O_TRUNC}
	counts := map[Action]int{}
	for range 200000 {
		c := Call{Arch: arches[r.IntN(len(arches))]}
		switch r.IntN(4) {
		case 0:
			c.Nr = r.Uint32N(500)
		case 1:
			c.Nr = x32Bit | nrs[r.IntN(len(nrs))]
		case 2:
			c.Nr = r.Uint32()
		default:
			c.Nr = nrs[r.IntN(len(nrs))]
		}
		for i := range c.Args {
			a, b := bits[r.IntN(len(bits))], bits[r.IntN(len(bits))] // two bits, perhaps one
			c.Args[i] = a | b
			if r.IntN(4) == 0 {
				c.Args[i] |= r.Uint64() &^ 0xffffffff // a high word the kernel ignores
			}
			if r.IntN(8) == 0 {
				c.Args[i] = r.Uint64()
			}
		}
		want := Decide(c)
		if got := run(t, vm, c); got != want {
			t.Fatalf("%+v: the filter gives %#x, the rules %#x", c, got, want)
		}
		counts[want]++
	}
	for _, a := range []Action{Allow, Refuse(unix.EPERM), Refuse(unix.ENOSYS)} {
		if counts[a] == 0 {
			t.Errorf("no random call got %#x: the inputs do not reach every verdict", a)
		}
	}
}

// The rules, call by call, with each architecture's numbers written out from its table.
//
// law: no_setid_from_sandbox
func TestDecide(t *testing.T) {
	const (
		x86   = unix.AUDIT_ARCH_X86_64
		i386  = unix.AUDIT_ARCH_I386
		arm64 = unix.AUDIT_ARCH_AARCH64
		arm   = unix.AUDIT_ARCH_ARM
	)
	eperm, enosys := Refuse(unix.EPERM), Refuse(unix.ENOSYS)
	creat, tmpfile := uint64(unix.O_CREAT|unix.O_WRONLY), uint64(unix.O_TMPFILE|unix.O_WRONLY)
	vm := newVM(t)
	for _, tc := range []struct {
		name string
		c    Call
		want Action
	}{
		{"chmod 4755", Call{Arch: x86, Nr: 90, Args: [6]uint64{0, 0o4755}}, eperm},
		{"chmod 2755", Call{Arch: x86, Nr: 90, Args: [6]uint64{0, 0o2755}}, eperm},
		{"chmod 755", Call{Arch: x86, Nr: 90, Args: [6]uint64{0, 0o755}}, Allow},
		{"chmod 1777 (sticky)", Call{Arch: x86, Nr: 90, Args: [6]uint64{0, 0o1777}}, Allow},
		{"chmod 755, high word set", Call{Arch: x86, Nr: 90, Args: [6]uint64{0, 1<<40 | 0o755}}, Allow},
		{"fchmod 4755", Call{Arch: x86, Nr: 91, Args: [6]uint64{3, 0o4755}}, eperm},
		{"fchmodat 6755", Call{Arch: x86, Nr: 268, Args: [6]uint64{0, 0, 0o6755}}, eperm},
		{"fchmodat 644", Call{Arch: x86, Nr: 268, Args: [6]uint64{0, 0, 0o644}}, Allow},
		{"fchmodat2 4755", Call{Arch: x86, Nr: 452, Args: [6]uint64{0, 0, 0o4755, 0}}, eperm},
		{"open O_CREAT 4755", Call{Arch: x86, Nr: 2, Args: [6]uint64{0, creat, 0o4755}}, eperm},
		{"open O_CREAT 644", Call{Arch: x86, Nr: 2, Args: [6]uint64{0, creat, 0o644}}, Allow},
		{"open without O_CREAT, stray mode", Call{Arch: x86, Nr: 2, Args: [6]uint64{0, unix.O_RDONLY, 0o4755}}, Allow},
		{"openat O_CREAT 4755", Call{Arch: x86, Nr: 257, Args: [6]uint64{0, 0, creat, 0o4755}}, eperm},
		{"openat O_TMPFILE 2755", Call{Arch: x86, Nr: 257, Args: [6]uint64{0, 0, tmpfile, 0o2755}}, eperm},
		{"openat O_RDWR, stray mode", Call{Arch: x86, Nr: 257, Args: [6]uint64{0, 0, unix.O_RDWR, 0o4755}}, Allow},
		{"creat 4755", Call{Arch: x86, Nr: 85, Args: [6]uint64{0, 0o4755}}, eperm},
		{"creat 644", Call{Arch: x86, Nr: 85, Args: [6]uint64{0, 0o644}}, Allow},
		{"mknod S_IFREG|4755", Call{Arch: x86, Nr: 133, Args: [6]uint64{0, unix.S_IFREG | 0o4755}}, eperm},
		{"mknodat 4755", Call{Arch: x86, Nr: 259, Args: [6]uint64{0, 0, 0o4755}}, eperm},
		{"mknodat fifo", Call{Arch: x86, Nr: 259, Args: [6]uint64{0, 0, unix.S_IFIFO | 0o644}}, Allow},
		{"openat2", Call{Arch: x86, Nr: 437}, enosys},
		{"io_uring_setup", Call{Arch: x86, Nr: 425}, enosys},
		{"read", Call{Arch: x86, Nr: 0, Args: [6]uint64{0, 0o4755, 0o4755}}, Allow},
		{"x32 chmod", Call{Arch: x86, Nr: x32Bit | 90, Args: [6]uint64{0, 0o755}}, enosys},
		{"x32 read", Call{Arch: x86, Nr: x32Bit}, enosys},
		{"i386 chmod 4755", Call{Arch: i386, Nr: 15, Args: [6]uint64{0, 0o4755}}, eperm},
		{"i386 fchmodat 4755", Call{Arch: i386, Nr: 306, Args: [6]uint64{0, 0, 0o4755}}, eperm},
		{"i386 open O_CREAT 4755", Call{Arch: i386, Nr: 5, Args: [6]uint64{0, creat, 0o4755}}, eperm},
		{"i386 openat O_CREAT 4755", Call{Arch: i386, Nr: 295, Args: [6]uint64{0, 0, creat, 0o4755}}, eperm},
		{"i386 x86_64's chmod number (90: readdir)", Call{Arch: i386, Nr: 90, Args: [6]uint64{0, 0o4755}}, Allow},
		{"arm64 fchmodat 4755", Call{Arch: arm64, Nr: 53, Args: [6]uint64{0, 0, 0o4755}}, eperm},
		{"arm64 fchmod 4755", Call{Arch: arm64, Nr: 52, Args: [6]uint64{0, 0o4755}}, eperm},
		{"arm64 openat O_CREAT 4755", Call{Arch: arm64, Nr: 56, Args: [6]uint64{0, 0, creat, 0o4755}}, eperm},
		{"arm64 mknodat 4755", Call{Arch: arm64, Nr: 33, Args: [6]uint64{0, 0, 0o4755}}, eperm},
		{"arm64 openat2", Call{Arch: arm64, Nr: 437}, enosys},
		{"arm64 x86_64's chmod number (90: capget)", Call{Arch: arm64, Nr: 90, Args: [6]uint64{0, 0o4755}}, Allow},
		{"arm chmod 4755", Call{Arch: arm, Nr: 15, Args: [6]uint64{0, 0o4755}}, eperm},
		{"arm fchmodat 4755", Call{Arch: arm, Nr: 333, Args: [6]uint64{0, 0, 0o4755}}, eperm},
		{"arm openat O_CREAT 4755", Call{Arch: arm, Nr: 322, Args: [6]uint64{0, 0, creat, 0o4755}}, eperm},
		{"riscv64 fchmodat 4755", Call{Arch: unix.AUDIT_ARCH_RISCV64, Nr: 53, Args: [6]uint64{0, 0, 0o4755}}, eperm},
		{"loongarch64 openat O_CREAT 4755", Call{Arch: unix.AUDIT_ARCH_LOONGARCH64, Nr: 56, Args: [6]uint64{0, 0, creat, 0o4755}}, eperm},
		{"ppc64le chmod 4755", Call{Arch: unix.AUDIT_ARCH_PPC64LE, Nr: 15, Args: [6]uint64{0, 0o4755}}, eperm},
		{"ppc64le fchmodat 755", Call{Arch: unix.AUDIT_ARCH_PPC64LE, Nr: 297, Args: [6]uint64{0, 0, 0o755}}, Allow},
		{"s390x fchmodat 4755", Call{Arch: unix.AUDIT_ARCH_S390X, Nr: 299, Args: [6]uint64{0, 0, 0o4755}}, eperm},
		{"s390x openat O_CREAT 2755", Call{Arch: unix.AUDIT_ARCH_S390X, Nr: 288, Args: [6]uint64{0, 0, creat, 0o2755}}, eperm},
		{"s390x chmod 755, high word set", Call{Arch: unix.AUDIT_ARCH_S390X, Nr: 15, Args: [6]uint64{0, 1<<40 | 0o755}}, Allow},
		{"unknown architecture (31-bit s390)", Call{Arch: unix.AUDIT_ARCH_S390, Nr: 15, Args: [6]uint64{0, 0o755}}, enosys},
		{"unknown architecture (mips)", Call{Arch: unix.AUDIT_ARCH_MIPS, Nr: 0}, enosys},
	} {
		if got := Decide(tc.c); got != tc.want {
			t.Errorf("%s: the rules give %#x, want %#x", tc.name, got, tc.want)
		}
		if got := run(t, vm, tc.c); got != tc.want {
			t.Errorf("%s: the filter gives %#x, want %#x", tc.name, got, tc.want)
		}
	}
}

// Every architecture Guard installs the filter on has a table, so the filter never refuses
// the kernel's own calls as unknown.
func TestNativeArchHasTable(t *testing.T) {
	for goarch, arch := range nativeArch {
		found := false
		for _, tb := range tables {
			found = found || tb.arch == arch
		}
		if !found {
			t.Errorf("%s: no table for AUDIT_ARCH %#x", goarch, arch)
		}
	}
	if _, ok := nativeArch[runtime.GOARCH]; !ok {
		t.Errorf("this machine's architecture %s has no rules", runtime.GOARCH)
	}
}
