package orchestrator

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/paddockhq/paddock/transport/local"
	"github.com/paddockhq/paddock/transport/wire"
)

// guard is how long a test waits for an event before it fails: never part of what is tested,
// and generous (a race-built test on a busy machine takes seconds over a line of the limit's
// size).
const guard = 2 * time.Minute

// pipeKernel is a kernel made of two pipes: the test writes its stdout; its stdin is read by
// nobody, as a kernel that stopped reading.
type pipeKernel struct {
	inR  *io.PipeReader
	inW  *io.PipeWriter
	outR *io.PipeReader
	outW *io.PipeWriter
	once sync.Once
	dead chan struct{}
}

func newPipeKernel() *pipeKernel {
	k := &pipeKernel{dead: make(chan struct{})}
	k.inR, k.inW = io.Pipe()
	k.outR, k.outW = io.Pipe()
	return k
}

func (k *pipeKernel) Stdin() io.WriteCloser { return k.inW }
func (k *pipeKernel) Stdout() io.Reader     { return k.outR }
func (k *pipeKernel) Wait() error           { <-k.dead; return nil }
func (k *pipeKernel) Kill() error {
	k.once.Do(func() {
		k.inW.Close()
		k.outW.Close()
		close(k.dead)
	})
	return nil
}

// withWriteWait shortens the write bound for one test.
func withWriteWait(t *testing.T, d time.Duration) {
	old := writeWait
	writeWait = d
	t.Cleanup(func() { writeWait = old })
}

// A kernel that never reads its input does not wedge the host: a write that does not finish
// within the bound ends the connection with a typed fault, the call fails with it, and
// closing finishes. Whether the write is the host's own request or a reply to the kernel.
func TestConnWriteStalls(t *testing.T) {
	withWriteWait(t, 100*time.Millisecond)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))

	t.Run("request", func(t *testing.T) {
		k := newPipeKernel()
		c := startConn(context.Background(), k, nil, log, nil)
		done := make(chan error, 1)
		go func() {
			_, err := c.request(context.Background(), wire.TypePing, struct{}{}, nil)
			done <- err
		}()
		var err error
		select {
		case err = <-done:
		case <-time.After(guard):
			t.Fatal("a write to a kernel that does not read never ended")
		}
		var se *StalledError
		if !errors.As(err, &se) || !errors.As(c.fault(), &se) || c.alive() {
			t.Fatalf("call: %v; conn's fault %v, alive %v; want a StalledError", err, c.fault(), c.alive())
		}
		closeWithin(t, c)
	})

	t.Run("reply", func(t *testing.T) {
		k := newPipeKernel()
		big := func(context.Context, HostRequest) (any, error) { return strings.Repeat("x", 1<<20), nil }
		c := startConn(context.Background(), k, map[string]Handler{"big": big}, log, nil)
		// A call in flight, only registered: on a pipe with no buffer its own request's
		// write would stall first.
		p := &call{reply: make(chan wire.Frame, 1)}
		_, err := c.register(p)
		if err != nil {
			t.Fatal(err)
		}
		go io.WriteString(k.outW, `{"event":"host_request","id":"h1","type":"big","body":{}}`+"\n")
		var f wire.Frame
		select {
		case f = <-p.reply:
		case <-time.After(guard):
			t.Fatal("a reply to a kernel that does not read never ended")
		}
		_, err = replyBody(f)
		var se *StalledError
		if !errors.Is(err, ErrKernelGone) || !errors.As(c.fault(), &se) {
			t.Fatalf("call in flight: %v; conn's fault %v", err, c.fault())
		}
		closeWithin(t, c)
	})
}

func closeWithin(t *testing.T, c *conn) {
	t.Helper()
	closed := make(chan struct{})
	go func() { c.close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(guard):
		t.Fatal("close did not finish")
	}
}

// The same on a real process on the local transport: a kernel that answers ping, asks the
// host a question whose answer is large, and never reads again. The session's call fails
// with the typed fault, and the session closes.
func TestKernelStoppedReading(t *testing.T) {
	withWriteWait(t, 200*time.Millisecond)
	dir := t.TempDir()
	kernel := filepath.Join(dir, "deaf-kernel")
	script := `#!/bin/sh
read line
echo '{"event":"reply","id":"1","status":"ok","body":{}}'
read line
echo '{"event":"host_request","id":"h1","type":"test.big","body":{}}'
exec sleep 1000
`
	if err := os.WriteFile(kernel, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	s, err := Open(context.Background(), Config{
		Workspace: dir, Transport: &local.Transport{}, Kernel: kernel,
		Env: []string{"PATH=/usr/bin:/bin"}, Log: slog.New(slog.NewTextHandler(&logs, nil)),
		Handlers: map[string]Handler{"test.big": func(context.Context, HostRequest) (any, error) {
			return strings.Repeat("x", 4<<20), nil // well over a pipe's buffer
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { _, err := s.Bash(context.Background(), "true"); done <- err }()
	select {
	case err = <-done:
	case <-time.After(guard):
		t.Fatal("the call on a kernel that stopped reading never ended")
	}
	var se *StalledError
	if !errors.As(err, &se) {
		t.Fatalf("the call failed with %v, want a StalledError", err)
	}
	closed := make(chan error, 1)
	go func() { closed <- s.Close() }()
	select {
	case <-closed:
	case <-time.After(guard):
		t.Fatal("Close did not finish")
	}
	if !strings.Contains(logs.String(), "level=ERROR") || !strings.Contains(logs.String(), "stopped reading") {
		t.Fatalf("the stall was not logged as an error:\n%s", logs.String())
	}
}
