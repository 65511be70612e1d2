//go:build linux

package kernel

import (
	"bufio"
	"io"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Join carries both ways between its streams and a socket that appears after it started:
// the socket's side reads every byte sent and the end of the input, and what it writes
// back reaches the output, whose end ends Join.
func TestJoin(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "kernel.sock")
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	joined := make(chan error, 1)
	go func() {
		err := Join(sock, inR, outW, time.Minute)
		outW.CloseWithError(err)
		joined <- err
	}()
	// The input is written before the socket exists: it waits in the pipe.
	go func() {
		io.WriteString(inW, "attach\nframe\n")
		inW.Close()
	}()
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: sock, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	c, err := l.AcceptUnix()
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(c) // up to the input's end, which Join carries as the writing half's
	if err != nil || string(got) != "attach\nframe\n" {
		t.Fatalf("the socket's side read %q %v", got, err)
	}
	io.WriteString(c, "resume\n")
	c.Close()
	line, err := bufio.NewReader(outR).ReadString('\n')
	if err != nil || line != "resume\n" {
		t.Fatalf("the output read %q %v", line, err)
	}
	if err := <-joined; err != nil {
		t.Fatal(err)
	}
}

// A socket that never appears fails Join once its wait has passed, saying which.
func TestJoinNoSocket(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "kernel.sock")
	err := Join(sock, strings.NewReader(""), io.Discard, 50*time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), sock) {
		t.Fatalf("Join to no socket: %v", err)
	}
}
