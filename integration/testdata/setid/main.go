//go:build linux

// Command setid tries every system call that can put a setuid or setgid bit (or a file
// capability) on a file, each
// on a file of its own in the working directory, and prints one line per attempt:
// "NAME ok" when the call succeeded, else "NAME ERRNO-NAME". The tests that run it in a
// sandbox then look at the files from the host.
package main

import (
	"fmt"
	"os"
	"strconv"
	"unsafe"

	"golang.org/x/sys/unix"
)

const setuid = 0o4755

// attack is one attempt; it returns the call's errno (0: succeeded).
type attack struct {
	name string
	run  func(name string) unix.Errno
}

func main() {
	attacks := []attack{
		{"chmod", func(n string) unix.Errno {
			return afterCreate(n, func() unix.Errno { return errno(unix.Fchmodat(unix.AT_FDCWD, n, setuid, 0)) })
		}},
		{"chmod-setgid", func(n string) unix.Errno {
			return afterCreate(n, func() unix.Errno { return errno(unix.Fchmodat(unix.AT_FDCWD, n, 0o2755, 0)) })
		}},
		{"fchmod", func(n string) unix.Errno {
			fd, err := unix.Open(n, unix.O_CREAT|unix.O_WRONLY, 0o644)
			if err != nil {
				return errno(err)
			}
			defer unix.Close(fd)
			return errno(unix.Fchmod(fd, setuid))
		}},
		{"fchmodat2", func(n string) unix.Errno {
			return afterCreate(n, func() unix.Errno { return raw(unix.SYS_FCHMODAT2, atFDCWD(), ptr(n), setuid, 0) })
		}},
		{"openat-creat", func(n string) unix.Errno {
			return closeFD(raw(unix.SYS_OPENAT, atFDCWD(), ptr(n), unix.O_CREAT|unix.O_WRONLY, setuid))
		}},
		{"openat2", func(n string) unix.Errno {
			how := unix.OpenHow{Flags: unix.O_CREAT | unix.O_WRONLY, Mode: setuid}
			return closeFD(raw(unix.SYS_OPENAT2, atFDCWD(), ptr(n), uintptr(unsafe.Pointer(&how)), unsafe.Sizeof(how)))
		}},
		{"tmpfile", func(n string) unix.Errno {
			fd, _, e := unix.Syscall6(unix.SYS_OPENAT, atFDCWD(), ptr("."), unix.O_TMPFILE|unix.O_WRONLY, setuid, 0, 0)
			if e != 0 {
				return e
			}
			defer unix.Close(int(fd))
			return errno(unix.Linkat(unix.AT_FDCWD, "/proc/self/fd/"+strconv.Itoa(int(fd)), unix.AT_FDCWD, n, unix.AT_SYMLINK_FOLLOW))
		}},
		{"mknodat", func(n string) unix.Errno {
			return raw(unix.SYS_MKNODAT, atFDCWD(), ptr(n), unix.S_IFREG|setuid, 0)
		}},
		{"setcap", func(n string) unix.Errno {
			// cap_setuid, effective, as setcap writes it (version 2): a program any user
			// runs could then make itself root.
			capability := []byte{0x01, 0x00, 0x00, 0x02, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}
			return afterCreate(n, func() unix.Errno { return errno(unix.Setxattr(n, "security.capability", capability, 0)) })
		}},
		{"io_uring_setup", func(string) unix.Errno {
			var params [120]byte // struct io_uring_params
			return closeFD(raw(unix.SYS_IO_URING_SETUP, 4, uintptr(unsafe.Pointer(&params[0]))))
		}},
	}
	attacks = append(attacks, archAttacks()...)
	for _, a := range attacks {
		e := a.run(a.name)
		if e == 0 {
			fmt.Println(a.name, "ok")
		} else {
			fmt.Println(a.name, unix.ErrnoName(e))
		}
	}
}

// afterCreate makes the file n (mode 0644), then runs call.
func afterCreate(n string, call func() unix.Errno) unix.Errno {
	if err := os.WriteFile(n, []byte("#!/bin/sh\n"), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	return call()
}

func errno(err error) unix.Errno {
	if err == nil {
		return 0
	}
	if e, ok := err.(unix.Errno); ok {
		return e
	}
	return unix.EINVAL
}

// raw is a system call by number; only its errno counts (a descriptor it opens is leaked
// to the process's end unless closeFD takes it).
func raw(nr uintptr, args ...uintptr) unix.Errno {
	var a [6]uintptr
	copy(a[:], args)
	r, _, e := unix.Syscall6(nr, a[0], a[1], a[2], a[3], a[4], a[5])
	lastFD = int(r)
	return e
}

var lastFD int

// closeFD closes the descriptor the last raw call opened when it succeeded.
func closeFD(e unix.Errno) unix.Errno {
	if e == 0 {
		unix.Close(lastFD)
	}
	return e
}

func atFDCWD() uintptr { fd := unix.AT_FDCWD; return uintptr(fd) }

// ptr is a NUL-ended copy of s, kept alive by the leak (the program is short).
func ptr(s string) uintptr {
	b, err := unix.BytePtrFromString(s)
	if err != nil {
		panic(err)
	}
	keep = append(keep, b)
	return uintptr(unsafe.Pointer(b))
}

var keep []*byte
