package session

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/paddockhq/paddock/images"
	"github.com/paddockhq/paddock/orchestrator"
	"github.com/paddockhq/paddock/transport/ssh/sshtest"
)

// boxHome starts an sshd and makes a home whose ~/.ssh/config reaches it as "box" (sshtest.Server.Home).
func boxHome(t *testing.T) (cache string) {
	t.Helper()
	if _, err := images.Default.Find(context.Background(), runtime.GOARCH); err != nil {
		t.Fatal(err)
	}
	srv := sshtest.Start(t)
	srv.Home(t)
	return filepath.Join(srv.Dir, "kernel-cache")
}

// A synced workspace is handed back when what was prepared is finished, after the session
// closed: the report is Finish's (and so every front end's close result), the changes are
// in the workspace, and a second Finish does nothing.
func TestSyncHandbackIsTheCloseResult(t *testing.T) {
	cache := boxHome(t)
	ws := t.TempDir()
	os.WriteFile(filepath.Join(ws, "a.txt"), []byte("one\n"), 0o644)
	l := loaded(t, map[string]any{"kernelTransport.kind": "ssh", "kernelTransport.ssh.host": "box",
		"kernelTransport.ssh.kernelCache": cache, "kernelTransport.ssh.sync": "true"})
	ctx := context.Background()
	s, p, err := Open(ctx, Options{Workspace: ws, Settings: l})
	if err != nil {
		t.Fatal(err)
	}
	if p.Kind != "ssh" || s.Workspace() == ws {
		t.Fatalf("kind %q, workspace %s: a synced session works in the box's copy", p.Kind, s.Workspace())
	}
	res, err := s.Run(ctx, orchestrator.Call{Script: "echo two > a.txt; echo new > n.txt"})
	if err != nil || res.End.Status != 0 {
		t.Fatalf("%v %v", res, err)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "a.txt")); string(b) != "one\n" {
		t.Fatalf("a.txt changed before the hand-back: %q", b)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	rep, err := p.Finish(ctx)
	if err != nil || rep == nil || rep.Counts.Taken != 2 || rep.Counts.Conflicts != 0 {
		t.Fatalf("Finish = %+v, %v; want 2 changes taken", rep, err)
	}
	for name, want := range map[string]string{"a.txt": "two\n", "n.txt": "new\n"} {
		if b, err := os.ReadFile(filepath.Join(ws, name)); err != nil || string(b) != want {
			t.Errorf("%s: %q %v; want %q", name, b, err, want)
		}
	}
	if rep, err := p.Finish(ctx); rep != nil || err != nil {
		t.Errorf("a second Finish: %v, %v", rep, err)
	}
}
