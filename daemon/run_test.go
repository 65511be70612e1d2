package daemon_test

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/paddockhq/paddock/client"
	"github.com/paddockhq/paddock/daemon"
	"github.com/paddockhq/paddock/daemon/api"
	"github.com/paddockhq/paddock/internal/await"
	"github.com/paddockhq/paddock/internal/version"
	"github.com/paddockhq/paddock/orchestrator"
	"github.com/paddockhq/paddock/orchestrator/output"
)

// runDaemon runs a daemon's life (Run) on a new socket until the returned stop is called;
// stop returns what Run returned.
func runDaemon(t *testing.T, state string, drain bool) (c *client.Client, socket string, stop func() error) {
	t.Helper()
	socket = filepath.Join(t.TempDir(), "run", daemon.SocketName)
	srv, err := daemon.New(daemon.Config{Open: opener(kernel(t), output.Default()), StateDir: state, Socket: socket, Drain: drain,
		Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	ran := make(chan struct{})
	go func() { done <- srv.Run(ctx); close(ran) }()
	stopped := false
	stop = func() error {
		if stopped {
			return nil
		}
		stopped = true
		cancel()
		return <-done
	}
	t.Cleanup(func() { stop() })
	if c, err = client.New("unix://" + socket); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	// The daemon answers once its socket accepts (or its Run ended).
	actx, acancel := context.WithTimeout(context.Background(), guard)
	defer acancel()
	go func() {
		select {
		case <-ran:
			acancel()
		case <-actx.Done():
		}
	}()
	if err := await.Socket(actx, socket); err != nil {
		t.Fatalf("the daemon does not listen on its socket: %v", err)
	}
	if _, err := c.Health(context.Background()); err != nil {
		t.Fatalf("the daemon does not answer on its socket: %v", err)
	}
	return c, socket, stop
}

// A daemon told to stop leaves its sessions for the next one on its state directory, and
// its socket goes; told to drain, it closes every session first.
func TestRunLeavesOrDrains(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, drain := range []bool{false, true} {
		state := filepath.Join(t.TempDir(), "state")
		c, socket, stop := runDaemon(t, state, drain)
		s, err := c.Open(ctx, api.OpenRequest{Workspace: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		if err := stop(); err != nil {
			t.Fatalf("drain %v: run: %v", drain, err)
		}
		if _, err := os.Stat(socket); !os.IsNotExist(err) {
			t.Errorf("drain %v: the socket stays: %v", drain, err)
		}
		_, err = os.Stat(filepath.Join(state, "sessions", s.ID, "session.json"))
		if left := err == nil; left == drain {
			t.Errorf("drain %v: the session's state file left: %v", drain, left)
		}
	}
}

// Every session is kept from the daemon's own places, wherever its Config puts them: a
// step naming the state or the socket asks, and with nobody attached is refused. With no
// version given, the daemon reports the binary's.
func TestRunKeepsOwnPlaces(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	state := filepath.Join(t.TempDir(), "state")
	c, socket, _ := runDaemon(t, state, true)
	if h, err := c.Health(ctx); err != nil || h.Version != version.Module() {
		t.Errorf("health %+v, %v: want version %q", h, err, version.Module())
	}
	s, err := c.Open(ctx, api.OpenRequest{Workspace: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	for _, script := range []string{"cat " + filepath.Join(state, "sessions", s.ID, "session.json"), "test -S " + socket} {
		r, err := c.Bash(ctx, s.ID, api.BashRequest{Script: script})
		if err != nil {
			t.Fatal(err)
		}
		if r.End.Kind != orchestrator.Refused || r.End.Code != "unanswered" {
			t.Errorf("%s: %+v, want refused unanswered", script, r.End)
		}
	}
}

// A daemon that cannot listen (a socket directory others may write) says why and leaves its
// sessions, and its state directory's lock, for one that can.
func TestRunCannotListen(t *testing.T) {
	t.Parallel()
	state := filepath.Join(t.TempDir(), "state")
	dir := filepath.Join(t.TempDir(), "open")
	if err := os.Mkdir(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	cfg := daemon.Config{Open: opener(kernel(t), output.Default()), StateDir: state, Socket: filepath.Join(dir, daemon.SocketName)}
	srv, err := daemon.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var de *daemon.DirError
	if err := srv.Run(context.Background()); !errors.As(err, &de) {
		t.Fatalf("run: %v, want a DirError", err)
	}
	again, err := daemon.New(cfg)
	if err != nil {
		t.Fatalf("the state directory stays locked: %v", err)
	}
	again.Close()
}

// CloseAll closes every root (each its children first) and answers for the roots alone;
// nothing is left open.
func TestClientCloseAll(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, daemonOptions{})
	ctx := context.Background()
	roots := map[string]bool{}
	for range 2 {
		s, err := d.c.Open(ctx, api.OpenRequest{Workspace: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		roots[s.ID] = true
		if _, err := d.c.Spawn(ctx, s.ID, api.SpawnRequest{Name: "child"}); err != nil {
			t.Fatal(err)
		}
	}
	closed, err := d.c.CloseAll(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(closed) != 2 || !roots[closed[0].ID] || !roots[closed[1].ID] {
		t.Errorf("closed %+v, want the roots %v", closed, roots)
	}
	if left, err := d.c.Sessions(ctx); err != nil || len(left) != 0 {
		t.Errorf("left %+v, %v", left, err)
	}
}
