//go:build linux

package main

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// int80 makes a system call through the i386 gate (int $0x80), which a 64-bit process may
// use too: the kernel then takes the call's number and arguments from the i386 table, and
// a filter that only knows x86_64 numbers would let it through.
func int80(trap, a1, a2, a3 uintptr) uintptr

// i386Path is where int80's path is written: a pointer the i386 gate takes must fit in 32
// bits, and a static binary's data lies below 4 GiB.
var i386Path [64]byte

// x32 is the bit that marks a call of the x32 ABI on x86_64.
const x32 = 0x40000000

func archAttacks() []attack {
	return []attack{
		{"chmod-legacy", func(n string) unix.Errno {
			return afterCreate(n, func() unix.Errno { return raw(unix.SYS_CHMOD, ptr(n), setuid) })
		}},
		{"open-creat", func(n string) unix.Errno {
			return closeFD(raw(unix.SYS_OPEN, ptr(n), unix.O_CREAT|unix.O_WRONLY, setuid))
		}},
		{"creat", func(n string) unix.Errno { return closeFD(raw(unix.SYS_CREAT, ptr(n), setuid)) }},
		{"mknod", func(n string) unix.Errno { return raw(unix.SYS_MKNOD, ptr(n), unix.S_IFREG|setuid, 0) }},
		{"x32-chmod", func(n string) unix.Errno {
			return afterCreate(n, func() unix.Errno { return raw(x32|unix.SYS_CHMOD, ptr(n), setuid) })
		}},
		{"i386-chmod", func(n string) unix.Errno {
			return afterCreate(n, func() unix.Errno {
				copy(i386Path[:], n+"\x00")
				return i386(int80(15, uintptr(unsafe.Pointer(&i386Path[0])), setuid, 0)) // chmod
			})
		}},
		{"i386-open-creat", func(n string) unix.Errno {
			copy(i386Path[:], n+"\x00")
			r := int80(5, uintptr(unsafe.Pointer(&i386Path[0])), unix.O_CREAT|unix.O_WRONLY, setuid) // open
			if e := i386(r); e != 0 {
				return e
			}
			unix.Close(int(int32(r)))
			return 0
		}},
	}
}

// i386 is the errno of an i386 call's result.
func i386(r uintptr) unix.Errno {
	if v := int32(r); v < 0 && v > -4096 {
		return unix.Errno(-v)
	}
	return 0
}
