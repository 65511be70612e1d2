//go:build linux

package kernel

import (
	"encoding/binary"
	"testing"

	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// The tracer's filter stops statx and newfstatat of its architecture when, and only when,
// their flags carry AT_NO_AUTOMOUNT (a bit of the low word), and lets every other call run.
func TestAutomountFilter(t *testing.T) {
	if !automountMendable {
		t.Skip("no tracer on this architecture")
	}
	vm, err := bpf.NewVM(automountFilter())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bpf.Assemble(automountFilter()); err != nil {
		t.Fatal(err)
	}
	// seccomp_data as a filter's 32-bit loads see it: x/net/bpf's machine reads words
	// big-endian, so each is written so; an argument's low word comes first.
	call := func(arch, nr uint32, args [6]uint64) uint32 {
		b := make([]byte, 64)
		binary.BigEndian.PutUint32(b[0:], nr)
		binary.BigEndian.PutUint32(b[4:], arch)
		for i, a := range args {
			binary.BigEndian.PutUint32(b[16+8*i:], uint32(a))
			binary.BigEndian.PutUint32(b[20+8*i:], uint32(a>>32))
		}
		v, err := vm.Run(b)
		if err != nil {
			t.Fatal(err)
		}
		return uint32(v)
	}
	const (
		flag   = unix.AT_NO_AUTOMOUNT
		others = unix.AT_SYMLINK_NOFOLLOW | unix.AT_EMPTY_PATH
		trace  = unix.SECCOMP_RET_TRACE
		allow  = unix.SECCOMP_RET_ALLOW
	)
	for _, tc := range []struct {
		name     string
		arch, nr uint32
		args     [6]uint64
		want     uint32
	}{
		{"statx with the flag", automountArch, sysStatx, argAt(statxFlags, flag|others), trace},
		{"statx with it alone", automountArch, sysStatx, argAt(statxFlags, flag), trace},
		{"statx without", automountArch, sysStatx, argAt(statxFlags, others), allow},
		{"statx: the bit in another argument", automountArch, sysStatx, argAt(statxFlags+1, flag), allow},
		{"statx: the bit in the high word", automountArch, sysStatx, argAt(statxFlags, flag<<32), allow},
		{"newfstatat with the flag", automountArch, sysNewfstatat, argAt(newfstatatFlags, flag|others), trace},
		{"newfstatat without", automountArch, sysNewfstatat, argAt(newfstatatFlags, others), allow},
		{"newfstatat: the bit in another argument", automountArch, sysNewfstatat, argAt(newfstatatFlags-1, flag), allow},
		{"another call with the bit", automountArch, unix.SYS_OPENAT, argAt(2, flag), allow},
		{"another architecture's statx number", unix.AUDIT_ARCH_I386, sysStatx, argAt(statxFlags, flag), allow},
	} {
		if got := call(tc.arch, tc.nr, tc.args); got != tc.want {
			t.Errorf("%s: %#x, want %#x", tc.name, got, tc.want)
		}
	}
}

// argAt is six arguments, all zero but argument i.
func argAt(i int, v uint64) (a [6]uint64) {
	a[i] = v
	return a
}
