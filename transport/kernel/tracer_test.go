//go:build linux

package kernel_test

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// automount runs `paddock-kernel automount` on argv (its program found on the PATH) in dir,
// with extra descriptors from 3 on, and returns its standard output and how it ended.
func automount(t *testing.T, dir string, extra []*os.File, argv ...string) (string, *os.ProcessState) {
	t.Helper()
	if runtime.GOARCH != "amd64" {
		t.Skip("no tracer on this architecture")
	}
	path, err := exec.LookPath(argv[0])
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(kernelBin, append([]string{"automount", path}, argv...)...)
	cmd.Dir = dir
	cmd.ExtraFiles = extra
	var out, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &stderr
	err = cmd.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatal(err)
	}
	if stderr.Len() > 0 {
		t.Logf("stderr: %s", stderr.String())
	}
	return out.String(), cmd.ProcessState
}

// The program the tracer starts ends as it would alone: its exit code, its death by a
// signal, its output, its directory, environment and descriptors beyond the standard
// three; and it runs traced, each process it starts too.
func TestAutomountTracer(t *testing.T) {
	dir := t.TempDir()
	if out, st := automount(t, dir, nil, "sh", "-c", "echo out; exit 7"); out != "out\n" || st.ExitCode() != 7 {
		t.Errorf("exit 7: %q, %v", out, st)
	}
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGPIPE, syscall.SIGINT} {
		_, st := automount(t, dir, nil, "sh", "-c", "kill -"+strings.TrimPrefix(unix.SignalName(sig), "SIG")+" $$")
		if ws := st.Sys().(syscall.WaitStatus); !ws.Signaled() || ws.Signal() != sig {
			t.Errorf("kill -%v $$: %v, want a death by it", sig, st)
		}
	}
	t.Setenv("AUTOMOUNT_TEST", "carried")
	if out, st := automount(t, dir, nil, "sh", "-c", `pwd; echo "$AUTOMOUNT_TEST"`); out != dir+"\n"+"carried\n" || !st.Success() {
		t.Errorf("pwd, the environment: %q, %v", out, st)
	}
	f, err := os.Create(filepath.Join(dir, "fd3"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, st := automount(t, dir, []*os.File{f}, "sh", "-c", "echo three >&3"); !st.Success() {
		t.Errorf("echo three >&3: %v", st)
	}
	if b, _ := os.ReadFile(f.Name()); string(b) != "three\n" {
		t.Errorf("descriptor 3 got %q", b)
	}
	// The program holds the descriptors the tracer was given (0 to 3, and what this test
	// holds open across exec, which a child inherits) and none of the tracer's own (its
	// runtime's poller, eventfd and cgroup files): ls's own directory is the lowest free.
	if out, st := automount(t, dir, []*os.File{f}, "ls", "/proc/self/fd"); !st.Success() || out != givenFDs(t, 4) {
		t.Errorf("ls /proc/self/fd with descriptor 3 given: %q, %v, want %q", out, st, givenFDs(t, 4))
	}
	// Every process of the program's is traced by the tracer, a grandchild too.
	// The grandchild prints its tracer's process (the tracer's thread's group), then the
	// program prints its parent: the tracer, both.
	os.WriteFile(filepath.Join(dir, "tracer"), []byte("t=$(sed -n 's/^TracerPid:[[:space:]]*//p' /proc/$$/status)\n"+
		"[ \"$t\" != 0 ] && sed -n 's/^Tgid:[[:space:]]*//p' /proc/$t/status\n"), 0o644)
	out, st := automount(t, dir, nil, "sh", "-c", `sh tracer; echo $PPID`)
	lines := strings.Fields(out)
	if !st.Success() || len(lines) != 2 || lines[0] != lines[1] {
		t.Errorf("a grandchild's tracer and the program's parent: %q, %v", out, st)
	}
	// A program that cannot run is reported as a shell reports it.
	bad := filepath.Join(dir, "not-executable")
	os.WriteFile(bad, []byte("#!/bin/sh\n"), 0o644)
	cmd := exec.Command(kernelBin, "automount", bad, "not-executable")
	if err := cmd.Run(); cmd.ProcessState.ExitCode() != 126 {
		t.Errorf("a file that is not executable: %v, want status 126", err)
	}
}

// A stop signal does not stop a traced program (its tracer cannot hold it stopped and hear
// SIGCONT), and the tracer does not spin on it: the program goes on to its end.
func TestAutomountStopSignal(t *testing.T) {
	out, st := automount(t, t.TempDir(), nil, "sh", "-c", "kill -STOP $$; echo went on")
	if out != "went on\n" || !st.Success() {
		t.Errorf("kill -STOP $$; echo went on: %q, %v", out, st)
	}
}

// givenFDs is what ls /proc/self/fd prints in a child of this process given descriptors 0
// to n-1: those, the ones this process holds open across exec, and ls's directory at the
// lowest number free.
func givenFDs(t *testing.T, n int) string {
	t.Helper()
	names, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	held := map[int]bool{}
	for i := range n {
		held[i] = true
	}
	for _, e := range names {
		fd, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); err == nil && flags&unix.FD_CLOEXEC == 0 {
			held[fd] = true
		}
	}
	for i := 0; ; i++ {
		if !held[i] {
			held[i] = true
			break
		}
	}
	var fds []string
	for fd := range held {
		fds = append(fds, strconv.Itoa(fd))
	}
	slices.Sort(fds) // ls's order: by name
	return strings.Join(fds, "\n") + "\n"
}

// The tracer, which holds every traced process (the kernel's shell, undumpable, among them),
// is undumpable itself, so that no process of the sandbox attaches to it: its /proc files
// are root's, not its user's (here, as root, run with a group of its own).
func TestAutomountTracerUndumpable(t *testing.T) {
	if runtime.GOARCH != "amd64" {
		t.Skip("no tracer on this architecture")
	}
	cmd := exec.Command(kernelBin, "automount", "/bin/sh", "sh", "-c", `stat -c %u:%g /proc/$PPID/status`)
	if os.Getuid() == 0 {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 0, Gid: 12345}}
	}
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(string(out)); got != "0:0" {
		t.Errorf("the tracer's /proc files are %s's, want 0:0 (undumpable)", got)
	}
}
