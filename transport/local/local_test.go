package local

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/paddockhq/paddock/images"
	"github.com/paddockhq/paddock/transport"
)

// When PADDOCK_TEST_HOST is set the test binary plays a host: it starts a kernel, prints
// the kernel's pid and waits to be killed.
func TestMain(m *testing.M) {
	if k := os.Getenv("PADDOCK_TEST_HOST"); k != "" {
		kern, err := (&Transport{Stderr: os.Stderr}).Start(context.Background(), transport.Spec{Kernel: k, Cwd: "/", Env: []string{}})
		if err != nil {
			fmt.Println("error", err)
			os.Exit(1)
		}
		fmt.Println(kern.(*kernel).cmd.Process.Pid)
		select {}
	}
	os.Exit(m.Run())
}

func kernelPath(t *testing.T) string {
	k, err := images.Default.Find(context.Background(), runtime.GOARCH)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// gone waits until pid no longer runs (or is a zombie nobody reaps).
func gone(pid int, within time.Duration) bool {
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
		if err != nil {
			return true
		}
		if f := strings.Fields(string(b)); len(f) > 2 && f[2] == "Z" {
			return true
		}
		time.Sleep(10 * time.Millisecond)
	}
	return false
}

// The kernel exits when its host dies, even by SIGKILL.
func TestKernelEndsWithHost(t *testing.T) {
	host := exec.Command(os.Args[0], "-test.run=^$")
	host.Env = append(os.Environ(), "PADDOCK_TEST_HOST="+kernelPath(t))
	out, err := host.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := host.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { host.Process.Kill(); host.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil {
		t.Fatalf("host said %q", line)
	}
	if gone(pid, 0) {
		t.Fatal("the kernel is not running")
	}
	host.Process.Signal(syscall.SIGKILL)
	host.Wait()
	if !gone(pid, 10*time.Second) {
		syscall.Kill(pid, syscall.SIGKILL)
		t.Fatalf("kernel %d outlived its host", pid)
	}
}

// Kill closes stdin; the kernel ends on its own, and Wait returns.
func TestKillEnds(t *testing.T) {
	k, err := (&Transport{}).Start(context.Background(), transport.Spec{Kernel: kernelPath(t), Cwd: t.TempDir(), Env: []string{}})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- k.Wait() }()
	k.Kill()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Wait did not return after Kill")
	}
}
