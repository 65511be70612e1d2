package daemon_test

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/paddockhq/paddock/client"
	"github.com/paddockhq/paddock/daemon"
	"github.com/paddockhq/paddock/daemon/api"
	"github.com/paddockhq/paddock/images"
	"github.com/paddockhq/paddock/internal/await"
	"github.com/paddockhq/paddock/orchestrator"
	"github.com/paddockhq/paddock/orchestrator/output"
	"github.com/paddockhq/paddock/policy"
	"github.com/paddockhq/paddock/transport/local"
)

// testDaemon is a daemon serving on a real unix socket, with local kernels: steps whose
// command is touch ask.
type testDaemon struct {
	srv    *daemon.Server
	socket string
	state  string
	c      *client.Client
	logs   *logBuffer
	done   chan error
}

type logBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

type daemonOptions struct {
	state string       // "": a new one
	limit output.Limit // zero: the default
	// more sets the rest of each session's configuration (limits, an artifact cap).
	more func(*orchestrator.Config)
	// open, when set, opens the sessions in place of the test's local opener.
	open func(context.Context, api.OpenRequest, daemon.Where) (daemon.Opened, error)
}

func kernel(t testing.TB) string {
	t.Helper()
	k, err := images.Default.Find(context.Background(), runtime.GOARCH)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// opener opens local sessions as the CLI's would, with an ask rule for touch.
func opener(kernelPath string, limit output.Limit, more ...func(*orchestrator.Config)) func(context.Context, api.OpenRequest, daemon.Where) (daemon.Opened, error) {
	return func(ctx context.Context, req api.OpenRequest, _ daemon.Where) (daemon.Opened, error) {
		var budget, noOT time.Duration
		var err error
		if req.BlockingBudget != "" {
			if budget, err = daemon.ParseDuration(req.BlockingBudget); err != nil {
				return daemon.Opened{}, err
			}
		}
		if req.NoOutputTimeout != "" {
			if noOT, err = daemon.ParseDuration(req.NoOutputTimeout); err != nil {
				return daemon.Opened{}, err
			}
		}
		cfg := orchestrator.Config{
			Workspace: req.Workspace,
			Transport: &local.Transport{Stderr: os.Stderr},
			Kernel:    kernelPath,
			Env:       []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + req.Workspace, "LC_ALL=C"},
			Limit:     limit,
			Budget:    budget,
			Policy:    orchestrator.Policy{Rules: []policy.ShellRule{{Action: policy.AskRule, Prefix: []string{"touch"}, Source: "test"}}},
		}
		for _, m := range more {
			if m != nil {
				m(&cfg)
			}
		}
		return daemon.Opened{Config: cfg, Transport: "local", NoOutputTimeout: noOT}, nil
	}
}

func startDaemon(t testing.TB, o daemonOptions) *testDaemon {
	t.Helper()
	if o.state == "" {
		o.state = filepath.Join(t.TempDir(), "state")
	}
	if o.limit == (output.Limit{}) {
		o.limit = output.Default()
	}
	logs := &logBuffer{}
	open := o.open
	if open == nil {
		open = opener(kernel(t), o.limit, o.more)
	}
	srv, err := daemon.New(daemon.Config{
		Open:     open,
		StateDir: o.state,
		Version:  "test",
		Log:      slog.New(slog.NewTextHandler(logs, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(t.TempDir(), "run", daemon.SocketName)
	l, err := daemon.Listen(sock, srv.Log())
	if err != nil {
		t.Fatal(err)
	}
	d := &testDaemon{srv: srv, socket: sock, state: o.state, logs: logs, done: make(chan error, 1)}
	go func() { d.done <- srv.Serve(l) }()
	t.Cleanup(func() { d.stop(t) })
	c, err := client.New("unix://" + sock)
	if err != nil {
		t.Fatal(err)
	}
	d.c = c
	return d
}

// stop closes every session and waits for the server to stop serving.
func (d *testDaemon) stop(t testing.TB) {
	if d.srv == nil {
		return
	}
	if err := d.srv.Close(); err != nil {
		t.Errorf("close: %v", err)
	}
	if err := <-d.done; err != nil {
		t.Errorf("serve: %v", err)
	}
	d.c.Close()
	d.srv = nil
}

// guard bounds a wait for what must come: it only turns a hang into a failure.
const guard = 2 * time.Minute

// fifo makes a named pipe in dir: a program that opens it to write waits there until the
// test reads it (hear).
func fifo(t testing.TB, dir, name string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := syscall.Mkfifo(p, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// hear reads a named pipe to its end: it waits for a program to open it, write and close it.
func hear(t testing.TB, p string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), guard)
	defer cancel()
	s, err := await.Hear(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// gone waits for process pid to end.
func gone(t testing.TB, pid int, what string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), guard)
	defer cancel()
	if err := await.Exit(ctx, pid); err != nil {
		t.Fatalf("%s (%d) still runs: %v", what, pid, err)
	}
}

// settled waits for the process's goroutines and descriptors to fall to at most g and fd.
// Nothing announces their end: this is a bounded poll.
func settled(t testing.TB, g, fd int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), guard)
	defer cancel()
	var g2, fd2 int
	if err := await.Poll(ctx, 10*time.Millisecond, func() bool {
		g2, fd2 = runtime.NumGoroutine(), openFDs(t)
		return g2 <= g && fd2 <= fd
	}); err != nil {
		buf := make([]byte, 1<<20)
		t.Fatalf("leak: goroutines %d (was %d), descriptors %d (was %d)\n%s", g2, g, fd2, fd, buf[:runtime.Stack(buf, true)])
	}
}
