package local

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
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
	"github.com/paddockhq/paddock/internal/await"
	"github.com/paddockhq/paddock/internal/peer"
	"github.com/paddockhq/paddock/transport"
	"github.com/paddockhq/paddock/transport/wire"
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
		// With PADDOCK_TEST_CHILD set, the kernel first runs a program that writes its pid
		// there and sleeps: a child of the kernel in a process group of its own.
		if f := os.Getenv("PADDOCK_TEST_CHILD"); f != "" {
			x, _ := json.Marshal(wire.Exec{Cwd: "/", Env: []string{"PATH=/usr/bin:/bin"},
				Commands: []wire.Command{{Argv: []string{"sh", "-c", "echo $$ > " + f + "; exec sleep 1000"}}}})
			w := wire.NewWriter(kern.Stdin())
			if err := w.Write(&wire.Frame{Event: wire.EventRequest, ID: "1", Type: wire.TypeExec, Body: x}); err != nil {
				fmt.Println("error", err)
				os.Exit(1)
			}
			go io.Copy(io.Discard, kern.Stdout())
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

// running reports whether pid runs (is there and no zombie).
func running(pid int) bool {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return false
	}
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	return len(f) > 0 && f[0] != "Z"
}

// gone waits until pid no longer runs (or is a zombie nobody reaps).
func gone(pid int) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	return await.Exit(ctx, pid) == nil
}

// The kernel exits when its host dies, even by SIGKILL, and so does every process it
// started: a kernel killed outright by its host's death could not end them.
func TestKernelEndsWithHost(t *testing.T) {
	childFile := filepath.Join(t.TempDir(), "child.pid")
	// A named pipe: the read of the child's pid waits for the child to write it.
	if err := syscall.Mkfifo(childFile, 0o600); err != nil {
		t.Fatal(err)
	}
	host := exec.Command(os.Args[0], "-test.run=^$")
	host.Env = append(os.Environ(), "PADDOCK_TEST_HOST="+kernelPath(t), "PADDOCK_TEST_CHILD="+childFile)
	line := peer.StartHost(t, host)
	pid, err := strconv.Atoi(line)
	if err != nil {
		t.Fatalf("host said %q", line)
	}
	if !running(pid) {
		t.Fatal("the kernel is not running")
	}
	said := make(chan []byte, 1)
	go func() {
		b, _ := os.ReadFile(childFile)
		said <- b
	}()
	var child int
	select {
	case b := <-said:
		if child, err = strconv.Atoi(strings.TrimSpace(string(b))); err != nil {
			t.Fatalf("the kernel's child said %q", b)
		}
	case <-time.After(2 * time.Minute):
		t.Fatal("the kernel's child never started")
	}
	host.Process.Signal(syscall.SIGKILL)
	host.Wait()
	if !gone(pid) {
		syscall.Kill(pid, syscall.SIGKILL)
		t.Fatalf("kernel %d outlived its host", pid)
	}
	if !gone(child) {
		syscall.Kill(child, syscall.SIGKILL)
		t.Fatalf("the kernel's child %d outlived the host", child)
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
