package ssh

import (
	"strings"
)

// Quote returns s as one word of a POSIX shell command line: in single quotes, each single
// quote in it written as '\”. No character of s keeps a meaning to the shell.
func Quote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// kernelCommand is the command line the box's login shell runs to start a kernel: into cwd,
// then the kernel alone with exactly env (env -i), so the login shell's own variables do not
// leak in. Entries that env(1) would take for an option or for the command (no NAME=, or a
// name starting with '-') are left out; the environment package never makes them.
func kernelCommand(cwd string, env []string, kernel string, args []string) string {
	var b strings.Builder
	if cwd != "" {
		b.WriteString("cd ")
		b.WriteString(Quote(cwd))
		b.WriteString(" && ")
	}
	b.WriteString("exec env -i")
	for _, e := range env {
		name, _, ok := strings.Cut(e, "=")
		if !ok || name == "" || strings.HasPrefix(name, "-") {
			continue
		}
		b.WriteByte(' ')
		b.WriteString(Quote(e))
	}
	b.WriteByte(' ')
	b.WriteString(Quote(kernel))
	for _, a := range args {
		b.WriteByte(' ')
		b.WriteString(Quote(a))
	}
	return b.String()
}

// goArch maps `uname -m` to a Go architecture; "" for one Paddock has no kernel for.
func goArch(machine string) string {
	switch strings.TrimSpace(machine) {
	case "x86_64", "amd64":
		return "amd64"
	case "aarch64", "arm64":
		return "arm64"
	case "i386", "i486", "i586", "i686":
		return "386"
	case "armv6l", "armv7l", "armv8l", "arm":
		return "arm"
	case "riscv64":
		return "riscv64"
	case "ppc64le":
		return "ppc64le"
	case "s390x":
		return "s390x"
	case "loongarch64":
		return "loong64"
	}
	return ""
}
