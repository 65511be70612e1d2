//go:build linux

package setid

import (
	"errors"
	"fmt"
	"runtime"
	"syscall"
	"unsafe"

	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// Guard puts the filter on this process, on all its threads, and so on every process it
// starts from now on, for good (a filter is inherited by every child and across exec, and
// nothing lifts it). It also drops CAP_SETFCAP, the one capability that writes file
// capabilities, which a filter cannot tell apart from other extended attributes.
//
// The kernel calls it on itself, early, rather than in each child between fork and exec:
// the kernel's own work (the Go runtime, listing and stat-ing files, its sockets) never sets
// a set-id bit, so the filter costs it nothing; a filter on the kernel too means a sandbox
// process that ptraces or otherwise drives the kernel finds it under the same filter; and
// os/exec has no hook between fork and exec to install one per child without a second exec.
//
// Guard sets no_new_privs first: the kernel takes a filter from a process without
// CAP_SYS_ADMIN only then (so a filter cannot fool a setuid program it starts). A sandbox
// then gains no privilege through a setuid program or file capabilities, as a container
// sandbox is already told (no-new-privileges) by default.
func Guard() error {
	if _, ok := nativeArch[runtime.GOARCH]; !ok {
		return fmt.Errorf("setid: no system-call rules for %s", runtime.GOARCH)
	}
	if err := dropSetFCap(); err != nil {
		return fmt.Errorf("setid: drop CAP_SETFCAP: %w", err)
	}
	prog, err := Program()
	if err != nil {
		return err
	}
	raw, err := assemble(prog)
	if err != nil {
		return err
	}
	// no_new_privs and the filter are set on one thread; TSYNC then gives both to every
	// other thread of the process, so a child forked from any of them has the filter.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("setid: no_new_privs: %w", err)
	}
	fprog := unix.SockFprog{Len: uint16(len(raw)), Filter: &raw[0]}
	r, _, e := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, unix.SECCOMP_FILTER_FLAG_TSYNC, uintptr(unsafe.Pointer(&fprog)))
	if e != 0 {
		return fmt.Errorf("setid: install the system-call filter: %w", e)
	}
	if r != 0 { // TSYNC names a thread it could not give the filter to, and installs none
		return fmt.Errorf("setid: install the system-call filter: thread %d cannot take it", r)
	}
	runtime.KeepAlive(raw)
	return nil
}

// dropSetFCap removes CAP_SETFCAP from the effective, permitted and inheritable sets of
// every thread (and so from the ambient set, which cannot hold what those lack). With
// no_new_privs, no program the process starts gains it back, root or not. The bounding set
// is left: changing it needs CAP_SETPCAP, which a sandbox seldom has, and no_new_privs
// already keeps an exec from raising the permitted set.
//
// Capabilities are per thread, so the change is made on all of the runtime's threads at
// once (AllThreadsSyscall, which a cgo build lacks). A process that does not hold the
// capability has nothing to drop.
func dropSetFCap() error {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return err
	}
	const bit = uint32(1) << unix.CAP_SETFCAP // CAP_SETFCAP is 31: in the first word
	d := &data[0]
	if (d.Effective|d.Permitted|d.Inheritable)&bit == 0 {
		return nil
	}
	d.Effective &^= bit
	d.Permitted &^= bit
	d.Inheritable &^= bit
	_, _, e := syscall.AllThreadsSyscall(unix.SYS_CAPSET, uintptr(unsafe.Pointer(&hdr)), uintptr(unsafe.Pointer(&data[0])), 0)
	if e != 0 {
		if errors.Is(e, unix.ENOTSUP) {
			return fmt.Errorf("not on every thread of a cgo build: %w", e)
		}
		return e
	}
	return nil
}

// assemble is prog in the kernel's sock_filter form.
func assemble(prog []bpf.Instruction) ([]unix.SockFilter, error) {
	raw, err := bpf.Assemble(prog)
	if err != nil {
		return nil, fmt.Errorf("setid: assemble the filter: %w", err)
	}
	out := make([]unix.SockFilter, len(raw))
	for i, r := range raw {
		out[i] = unix.SockFilter{Code: r.Op, Jt: r.Jt, Jf: r.Jf, K: r.K}
	}
	return out, nil
}
