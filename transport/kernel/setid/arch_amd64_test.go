//go:build linux

package setid

import "golang.org/x/sys/unix"

// archCalls are x86_64's calls of its own: the legacy path calls, and one of the x32 ABI.
// (The i386 gate, int $0x80, is tried by the integration suite's attack program.)
var archCalls = []archCall{
	{"chmod-legacy-4755", "EPERM", func() unix.Errno { return sys(unix.SYS_CHMOD, str(newFile("m")), 0o4755) }},
	{"open-creat-4755", "EPERM", func() unix.Errno {
		return closing(sys(unix.SYS_OPEN, str("n"), unix.O_CREAT|unix.O_WRONLY, 0o4755))
	}},
	{"creat-4755", "EPERM", func() unix.Errno { return closing(sys(unix.SYS_CREAT, str("o"), 0o4755)) }},
	{"creat-644", "ok", func() unix.Errno { return closing(sys(unix.SYS_CREAT, str("p"), 0o644)) }},
	{"mknod-4755", "EPERM", func() unix.Errno { return sys(unix.SYS_MKNOD, str("q"), unix.S_IFREG|0o4755, 0) }},
	{"x32-chmod-755", "ENOSYS", func() unix.Errno { return sys(x32Bit|unix.SYS_CHMOD, str(newFile("r")), 0o755) }},
}
