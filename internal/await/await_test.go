package await

import (
	"context"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// Exit returns once a process ends, and not before: here the end of a child that waits for
// its standard input to close.
func TestExit(t *testing.T) {
	cmd := exec.Command("cat")
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := Exit(ctx, cmd.Process.Pid); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a live process: %v", err)
	}
	in.Close()
	if err := Exit(context.Background(), cmd.Process.Pid); err != nil {
		t.Fatalf("an ended process (a zombie): %v", err)
	}
	cmd.Wait()
	if err := Exit(context.Background(), cmd.Process.Pid); err != nil {
		t.Fatalf("a reaped process: %v", err)
	}
}

// Dir sees a file made in a directory made after the wait began; Socket, a unix socket that
// accepts.
func TestDir(t *testing.T) {
	root := t.TempDir()
	file := filepath.Join(root, "a", "b", "f")
	done := make(chan error, 1)
	go func() { done <- File(context.Background(), file) }()
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := File(ctx, file); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a missing file: %v", err)
	}
	if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}

	sock := filepath.Join(root, "run", "s.sock")
	go func() { done <- Socket(context.Background(), sock) }()
	os.Mkdir(filepath.Dir(sock), 0o700)
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	os.Chmod(sock, 0o600)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
