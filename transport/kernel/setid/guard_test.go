//go:build linux

package setid

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/paddockhq/paddock/internal/peer"
)

// childEnv marks the test binary run as a guarded child: TestGuardedChild then makes the
// calls and prints each one's errno instead of being a test.
const childEnv = "PADDOCK_SETID_CHILD"

// guardProgram builds testdata/guard without cgo into a directory of the test's.
func guardProgram(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "guard")
	if err := peer.BuildStatic(".", "./testdata/guard", bin); err != nil {
		t.Fatal(err)
	}
	return bin
}

// guarded runs this test binary's TestGuardedChild under Guard in dir, and returns what it
// printed: NAME RESULT per call.
func guarded(t *testing.T, dir string) map[string]string {
	t.Helper()
	cmd := exec.Command(guardProgram(t), os.Args[0], "-test.run=^TestGuardedChild$", "-test.count=1")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), childEnv+"=1")
	out, err := cmd.Output()
	if err != nil {
		var stderr string
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = string(ee.Stderr)
		}
		t.Fatalf("the guarded child: %v\n%s%s", err, out, stderr)
	}
	got := map[string]string{}
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	for sc.Scan() {
		name, res, ok := strings.Cut(sc.Text(), " ")
		if ok && !strings.HasPrefix(name, "---") && name != "PASS" && name != "ok" {
			got[name] = res
		}
	}
	return got
}

// A process under Guard, and every program it starts, cannot put a set-id bit on a file
// by any call the kernel offers for it, while ordinary modes still work; openat2 and
// io_uring are missing to it; it holds no CAP_SETFCAP and cannot gain privileges.
//
// law: no_setid_from_sandbox
func TestGuard(t *testing.T) {
	dir := t.TempDir()
	got := guarded(t, dir)
	want := map[string]string{
		"chmod-4755":          "EPERM",
		"chmod-2755":          "EPERM",
		"chmod-755":           "ok",
		"chmod-1777":          "ok",
		"fchmod-4755":         "EPERM",
		"fchmod-640":          "ok",
		"fchmodat2-4755":      "EPERM",
		"fchmodat2-700":       "ok",
		"openat-creat-4755":   "EPERM",
		"openat-creat-644":    "ok",
		"openat-tmpfile-2755": "EPERM",
		"openat-read":         "ok",
		"mknodat-4755":        "EPERM",
		"mknodat-fifo":        "ok",
		"openat2":             "ENOSYS",
		"io_uring_setup":      "ENOSYS",
		"setcap":              "EPERM",
		"child-chmod":         "refused",
		"child-chmod-755":     "ok",
		"NoNewPrivs":          "1",
		"Seccomp":             "2",
		"CapEff-SETFCAP":      "no",
	}
	for _, a := range archCalls {
		want[a.name] = a.want
	}
	for name, w := range want {
		if g, ok := got[name]; !ok {
			t.Errorf("%s: not tried", name)
		} else if g != w {
			t.Errorf("%s: %s, want %s", name, g, w)
		}
	}
	err := filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		if fi.Mode()&(os.ModeSetuid|os.ModeSetgid) != 0 {
			t.Errorf("%s carries %v", p, fi.Mode())
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// archCall is a call only some architectures have.
type archCall struct {
	name string
	want string
	run  func() unix.Errno
}

// TestGuardedChild is the guarded child's body; as a plain test it does nothing.
func TestGuardedChild(t *testing.T) {
	if os.Getenv(childEnv) != "1" {
		t.Skip("the body of TestGuard's guarded child")
	}
	say := func(name string, e unix.Errno) {
		if e == 0 {
			fmt.Println(name, "ok")
		} else {
			fmt.Println(name, unix.ErrnoName(e))
		}
	}
	file := func(name string) string {
		if err := os.WriteFile(name, []byte("#!/bin/sh\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		return name
	}
	say("chmod-4755", errno(unix.Chmod(file("a"), 0o4755)))
	say("chmod-2755", errno(unix.Chmod(file("b"), 0o2755)))
	say("chmod-755", errno(unix.Chmod(file("c"), 0o755)))
	say("chmod-1777", errno(unix.Chmod(file("d"), 0o1777)))
	fd, err := unix.Open(file("e"), unix.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	say("fchmod-4755", errno(unix.Fchmod(fd, 0o4755)))
	say("fchmod-640", errno(unix.Fchmod(fd, 0o640)))
	unix.Close(fd)
	say("fchmodat2-4755", sys(unix.SYS_FCHMODAT2, atCwd(), str(file("f")), 0o4755, 0))
	say("fchmodat2-700", sys(unix.SYS_FCHMODAT2, atCwd(), str("f"), 0o700, 0))
	say("openat-creat-4755", closing(sys(unix.SYS_OPENAT, atCwd(), str("g"), unix.O_CREAT|unix.O_WRONLY, 0o4755)))
	say("openat-creat-644", closing(sys(unix.SYS_OPENAT, atCwd(), str("h"), unix.O_CREAT|unix.O_WRONLY, 0o644)))
	say("openat-tmpfile-2755", closing(sys(unix.SYS_OPENAT, atCwd(), str("."), unix.O_TMPFILE|unix.O_WRONLY, 0o2755)))
	say("openat-read", closing(sys(unix.SYS_OPENAT, atCwd(), str("h"), unix.O_RDONLY, 0o4755)))
	say("mknodat-4755", sys(unix.SYS_MKNODAT, atCwd(), str("i"), unix.S_IFREG|0o4755, 0))
	say("mknodat-fifo", sys(unix.SYS_MKNODAT, atCwd(), str("j"), unix.S_IFIFO|0o644, 0))
	how := unix.OpenHow{Flags: unix.O_RDONLY}
	say("openat2", closing(sys(unix.SYS_OPENAT2, atCwd(), str("h"), uintptr(unsafe.Pointer(&how)), unsafe.Sizeof(how))))
	var params [120]byte
	say("io_uring_setup", closing(sys(unix.SYS_IO_URING_SETUP, 4, uintptr(unsafe.Pointer(&params[0])))))
	// A file capability (cap_setuid, effective), as setcap writes it: version 2.
	capability := []byte{0x01, 0x00, 0x00, 0x02, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}
	say("setcap", errno(unix.Setxattr(file("k"), "security.capability", capability, 0)))
	for _, a := range archCalls {
		say(a.name, a.run())
	}

	// A program the child starts inherits the filter.
	file("l")
	if exec.Command("chmod", "4755", "l").Run() == nil {
		fmt.Println("child-chmod ok")
	} else {
		fmt.Println("child-chmod refused")
	}
	say("child-chmod-755", exitErrno(exec.Command("chmod", "755", "l").Run()))

	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(status), "\n") {
		k, v, _ := strings.Cut(line, ":")
		v = strings.TrimSpace(v)
		switch k {
		case "NoNewPrivs", "Seccomp":
			fmt.Println(k, v)
		case "CapEff":
			caps, err := strconv.ParseUint(v, 16, 64)
			if err != nil {
				t.Fatal(err)
			}
			if caps&(1<<unix.CAP_SETFCAP) != 0 {
				fmt.Println("CapEff-SETFCAP yes")
			} else {
				fmt.Println("CapEff-SETFCAP no")
			}
		}
	}
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

func exitErrno(err error) unix.Errno {
	if err == nil {
		return 0
	}
	return unix.EPERM
}

// lastFD is the descriptor the last sys call returned, for closing to close.
var lastFD int

func sys(nr uintptr, args ...uintptr) unix.Errno {
	var a [6]uintptr
	copy(a[:], args)
	r, _, e := unix.Syscall6(nr, a[0], a[1], a[2], a[3], a[4], a[5])
	lastFD = int(r)
	return e
}

func closing(e unix.Errno) unix.Errno {
	if e == 0 {
		unix.Close(lastFD)
	}
	return e
}

func atCwd() uintptr { fd := unix.AT_FDCWD; return uintptr(fd) }

var kept []*byte

// str is a NUL-ended copy of s that outlives the call (kept to the process's end).
func str(s string) uintptr {
	b, err := unix.BytePtrFromString(s)
	if err != nil {
		panic(err)
	}
	kept = append(kept, b)
	return uintptr(unsafe.Pointer(b))
}

// newFile makes the file name (mode 0644) and returns its name.
func newFile(name string) string {
	if err := os.WriteFile(name, []byte("#!/bin/sh\n"), 0o644); err != nil {
		panic(err)
	}
	return name
}
