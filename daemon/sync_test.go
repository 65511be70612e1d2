package daemon_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/paddockhq/paddock/client"
	"github.com/paddockhq/paddock/daemon"
	"github.com/paddockhq/paddock/daemon/api"
	"github.com/paddockhq/paddock/images"
	"github.com/paddockhq/paddock/transport/ssh/sshtest"
)

// synced is a daemon (its own opener, the library's) with a session open on a box through
// ssh, its workspace ws synced there; home is the user's home the box is reached from.
type synced struct {
	d        *testDaemon
	s        api.Session
	ws, home string
}

func openSynced(t *testing.T, files map[string]string) synced {
	t.Helper()
	if _, err := images.Default.Find(context.Background(), runtime.GOARCH); err != nil {
		t.Fatal(err)
	}
	srv := sshtest.Start(t)
	home := srv.Home(t)
	d := startDaemon(t, daemonOptions{open: daemon.OpenRequest})
	ws := t.TempDir()
	for name, text := range files {
		os.WriteFile(filepath.Join(ws, name), []byte(text), 0o644)
	}
	s, err := d.c.Open(context.Background(), api.OpenRequest{Workspace: ws, Transport: "ssh", Settings: map[string]string{
		"kernelTransport.ssh.host": "box", "kernelTransport.ssh.kernelCache": filepath.Join(srv.Dir, "kernel-cache"),
		"kernelTransport.ssh.sync": "true"}})
	if err != nil {
		t.Fatal(err)
	}
	return synced{d: d, s: s, ws: ws, home: home}
}

// A session on a box with a synced workspace, opened by the daemon's own opener (the
// library's), closes with its hand-back as its close result: the changes made on the box
// are in the workspace and counted in the answer.
func TestAPISyncedSessionClosesWithItsHandback(t *testing.T) {
	o := openSynced(t, map[string]string{"a.txt": "one\n"})
	d, s, ws, ctx := o.d, o.s, o.ws, context.Background()
	if s.Transport != "ssh" {
		t.Errorf("transport %q", s.Transport)
	}
	if _, err := d.c.Bash(ctx, s.ID, api.BashRequest{Script: "echo two > a.txt; echo new > n.txt"}); err != nil {
		t.Fatal(err)
	}
	closed, err := d.c.CloseSession(ctx, s.ID)
	if err != nil {
		t.Fatal(err)
	}
	if h := closed.Handback; h == nil || h.Counts.Taken != 2 || h.Counts.Conflicts != 0 {
		t.Fatalf("close answered hand-back %+v; want 2 changes taken", h)
	}
	for name, want := range map[string]string{"a.txt": "two\n", "n.txt": "new\n"} {
		if b, err := os.ReadFile(filepath.Join(ws, name)); err != nil || string(b) != want {
			t.Errorf("%s: %q %v; want %q", name, b, err, want)
		}
	}
}

// A synced workspace that cannot be handed back (its local copy is gone) is named in the
// close answer, which still closes the session.
func TestAPISyncedSessionHandbackFails(t *testing.T) {
	o := openSynced(t, nil)
	d, s, home, ctx := o.d, o.s, o.home, context.Background()
	if _, err := d.c.Bash(ctx, s.ID, api.BashRequest{Script: "echo two > a.txt"}); err != nil {
		t.Fatal(err)
	}
	copies, _ := filepath.Glob(filepath.Join(home, ".cache", "paddock", "sync", "*"))
	if len(copies) != 1 {
		t.Fatalf("local copies %v", copies)
	}
	os.RemoveAll(copies[0])
	closed, err := d.c.CloseSession(ctx, s.ID)
	if err != nil {
		t.Fatal(err)
	}
	if closed.HandbackError == "" || closed.Handback != nil {
		t.Fatalf("close answered %+v; want the hand-back's failure named", closed)
	}
	if _, err := d.c.Session(ctx, s.ID); err == nil {
		t.Error("the session is still there")
	}
}

// client.Run opens a session, runs the script while following its stream, and closes it:
// the output arrives through the stream in order, the answer and the close answer come back,
// and the session is gone.
func TestClientRun(t *testing.T) {
	d := startDaemon(t, daemonOptions{})
	ctx := context.Background()
	ws := t.TempDir()
	var mu sync.Mutex
	var out strings.Builder
	var opened string
	ran, err := d.c.Run(ctx, client.RunOptions{Open: api.OpenRequest{Workspace: ws}, Script: "echo one; echo two >&2; echo three",
		Opened: func(s api.Session) { opened = s.ID },
		Output: func(fd int, data string) { mu.Lock(); fmt.Fprintf(&out, "%d:%s", fd, data); mu.Unlock() }})
	if err != nil {
		t.Fatal(err)
	}
	if got := out.String(); got != "1:one\n2:two\n1:three\n" {
		t.Errorf("streamed %q", got)
	}
	if ran.Bash.End.Status != 0 || ran.Closed.ID != opened || ran.Closed.State != api.Closed {
		t.Errorf("ran %+v", ran)
	}
	if _, err := d.c.Session(ctx, opened); err == nil {
		t.Error("the session is still there")
	}
}
