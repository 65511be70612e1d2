package daemon_test

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/paddockhq/paddock/daemon/api"
	"github.com/paddockhq/paddock/orchestrator"
)

// law: private_on_create
// Every file the daemon makes for a session is 0600 and every directory 0700, whatever the
// umask: the state directory, the session's state file, a job's artifact, an isolated
// child's directory and its bookkeeping. (The clone's copies of workspace files keep the
// workspace's own modes: they are the user's files, not the daemon's.)
func TestSessionFilesPrivate(t *testing.T) {
	old := syscall.Umask(0)
	defer syscall.Umask(old)
	d := startDaemon(t, daemonOptions{})
	ctx := context.Background()
	ws := t.TempDir()
	os.WriteFile(filepath.Join(ws, "a.txt"), []byte("a\n"), 0o644)
	s, err := d.c.Open(ctx, api.OpenRequest{Workspace: ws, BlockingBudget: "50ms"})
	if err != nil {
		t.Fatal(err)
	}
	r, err := d.c.Bash(ctx, s.ID, api.BashRequest{Script: "echo out; sleep 0.3; echo more"})
	if err != nil || r.End.Kind != orchestrator.Detached {
		t.Fatalf("%+v %v", r, err)
	}
	if _, err := d.c.Wait(ctx, s.ID, r.End.Job, ""); err != nil {
		t.Fatal(err)
	}
	child, err := d.c.Spawn(ctx, s.ID, api.SpawnRequest{Name: "c", Workspace: orchestrator.Isolated})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.c.Bash(ctx, child.ID, api.BashRequest{Script: "echo b > b.txt"}); err != nil {
		t.Fatal(err)
	}
	check := func(when string) (files, dirs int) {
		filepath.WalkDir(d.state, func(p string, e fs.DirEntry, err error) error {
			if err != nil {
				t.Error(err)
				return nil
			}
			rel, _ := filepath.Rel(d.state, p)
			if mirror(rel) {
				if e.IsDir() {
					return filepath.SkipDir
				}
				return nil
			}
			fi, _ := e.Info()
			want := os.FileMode(0o600)
			if e.IsDir() {
				want = 0o700
				dirs++
			} else {
				files++
			}
			if fi.Mode().Perm() != want {
				t.Errorf("%s: %s has mode %04o, want %04o", when, rel, fi.Mode().Perm(), want)
			}
			return nil
		})
		return
	}
	files, dirs := check("open")
	if files < 3 || dirs < 4 { // state files of both, the artifact; sessions/, both session dirs, the child's
		t.Errorf("only %d files and %d directories under the state directory", files, dirs)
	}
	if _, err := d.c.CloseSession(ctx, child.ID); err != nil {
		t.Fatal(err)
	}
	check("handed back")
	if _, err := d.c.CloseSession(ctx, s.ID); err != nil {
		t.Fatal(err)
	}
	left, _ := os.ReadDir(filepath.Join(d.state, "sessions"))
	if len(left) != 0 {
		t.Errorf("closed sessions left %d state directories", len(left))
	}
}

// mirror reports whether a state path is an isolated child's copy of workspace files.
func mirror(rel string) bool {
	for _, part := range strings.Split(rel, string(filepath.Separator)) {
		switch part {
		case "base", "copy", "conflicts":
			return true
		}
	}
	return false
}

// A new daemon on the same state directory lists the sessions of one that was killed;
// those whose kernel ended with it are listed as ended, with the reason, and can be
// removed.
func TestRestartListsSessionsAsEnded(t *testing.T) {
	state := filepath.Join(t.TempDir(), "state")
	d := startDaemon(t, daemonOptions{state: state})
	ctx := context.Background()
	a, err := d.c.Open(ctx, api.OpenRequest{Workspace: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	b, err := d.c.Open(ctx, api.OpenRequest{Workspace: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	// What a killed daemon leaves: the state files, no Close.
	saved, _ := os.ReadDir(filepath.Join(state, "sessions"))
	copyDir := filepath.Join(t.TempDir(), "state")
	for _, e := range saved {
		os.MkdirAll(filepath.Join(copyDir, "sessions", e.Name()), 0o700)
		data, _ := os.ReadFile(filepath.Join(state, "sessions", e.Name(), "session.json"))
		os.WriteFile(filepath.Join(copyDir, "sessions", e.Name(), "session.json"), data, 0o600)
	}
	d2 := startDaemon(t, daemonOptions{state: copyDir})
	list, err := d2.c.Sessions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]api.Session{}
	for _, s := range list {
		got[s.ID] = s
	}
	for _, id := range []string{a.ID, b.ID} {
		s, ok := got[id]
		if !ok {
			t.Errorf("session %s dropped", id)
			continue
		}
		if s.State != api.Ended || s.Reason == "" {
			t.Errorf("session %s: %+v", id, s)
		}
	}
	if _, err := d2.c.Bash(ctx, a.ID, api.BashRequest{Script: "true"}); err == nil {
		t.Error("a step ran in an ended session")
	}
	if _, err := d2.c.CloseSession(ctx, a.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(copyDir, "sessions", a.ID)); !os.IsNotExist(err) {
		t.Errorf("a removed session's state stays: %v", err)
	}
}

// law: cow_conflict_reported
// A daemon's isolated child that conflicts keeps its version after its parent closes: the
// report names where it is, and it is there. A child whose every change was taken leaves
// nothing behind.
func TestConflictsOutliveTheParent(t *testing.T) {
	d := startDaemon(t, daemonOptions{})
	ctx := context.Background()
	ws := t.TempDir()
	os.WriteFile(filepath.Join(ws, "a.txt"), []byte("base\n"), 0o644)
	s, err := d.c.Open(ctx, api.OpenRequest{Workspace: ws})
	if err != nil {
		t.Fatal(err)
	}
	clean, err := d.c.Spawn(ctx, s.ID, api.SpawnRequest{Name: "clean", Workspace: orchestrator.Isolated})
	if err != nil {
		t.Fatal(err)
	}
	kid, err := d.c.Spawn(ctx, s.ID, api.SpawnRequest{Name: "kid", Workspace: orchestrator.Isolated})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.c.Bash(ctx, kid.ID, api.BashRequest{Script: "echo child > a.txt"}); err != nil {
		t.Fatal(err)
	}
	if _, err := d.c.Bash(ctx, clean.ID, api.BashRequest{Script: "echo new > b.txt"}); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(ws, "a.txt"), []byte("parent\n"), 0o644)
	cl, err := d.c.CloseSession(ctx, clean.ID)
	if err != nil || cl.Handback == nil || len(cl.Handback.Taken) != 1 {
		t.Fatalf("%v %+v", err, cl.Handback)
	}
	if _, err := os.Stat(cl.Handback.Dir); !os.IsNotExist(err) {
		t.Errorf("a clean hand-back left %s: %v", cl.Handback.Dir, err)
	}
	k, err := d.c.CloseSession(ctx, kid.ID)
	if err != nil || k.Handback == nil || len(k.Handback.Conflicts) != 1 {
		t.Fatalf("%v %+v", err, k.Handback)
	}
	if _, err := d.c.CloseSession(ctx, s.ID); err != nil {
		t.Fatal(err)
	}
	saved := filepath.Join(k.Handback.Dir, k.Handback.Conflicts[0].Saved)
	if b, err := os.ReadFile(saved); err != nil || string(b) != "child\n" {
		t.Errorf("the child's version after its parent closed: %q %v", b, err)
	}
}

// Children started with a script leave nothing in the state directory once handed back:
// one collected, one closed with its parent (its changes taken all the same).
func TestScriptedChildrenLeaveNothing(t *testing.T) {
	d := startDaemon(t, daemonOptions{})
	ctx := context.Background()
	ws := t.TempDir()
	s, err := d.c.Open(ctx, api.OpenRequest{Workspace: ws})
	if err != nil {
		t.Fatal(err)
	}
	var kids []string
	for _, name := range []string{"a", "b"} {
		k, err := d.c.Spawn(ctx, s.ID, api.SpawnRequest{Name: name, Workspace: orchestrator.Isolated, Script: "echo " + name + " > " + name + ".txt"})
		if err != nil {
			t.Fatal(err)
		}
		kids = append(kids, k.ID)
	}
	if c, err := d.c.Collect(ctx, s.ID, kids[0], ""); err != nil || c.Handback == nil || len(c.Handback.Taken) != 1 {
		t.Fatalf("%v %+v", err, c)
	}
	// b's script has ended, uncollected.
	select {
	case <-d.srv.ChildDone(s.ID, kids[1]):
	case <-time.After(guard):
		t.Fatal("b's script did not end")
	}
	info, err := d.c.Session(ctx, s.ID)
	if err != nil {
		t.Fatal(err)
	}
	if i := slices.IndexFunc(info.Spawned, func(sp api.SpawnedChild) bool { return sp.ID == kids[1] }); i < 0 || !info.Spawned[i].Done {
		t.Fatalf("b after its script ended: %+v", info.Spawned)
	}
	if _, err := d.c.CloseSession(ctx, s.ID); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"a.txt", "b.txt"} {
		if _, err := os.Stat(filepath.Join(ws, f)); err != nil {
			t.Errorf("%s not handed back: %v", f, err)
		}
	}
	if left, _ := os.ReadDir(filepath.Join(d.state, "handbacks")); len(left) != 0 {
		t.Errorf("left in handbacks/: %v", left)
	}
}

// A job lost with a daemon that was killed while its output was past its artifact's cap (the
// file's tail a ring not yet put in order): the next daemon puts the file in order, head then
// tail, and the job's listing says what it holds and what it dropped.
//
// law: job_no_silent_loss
func TestLostJobArtifactSettled(t *testing.T) {
	state := filepath.Join(t.TempDir(), "state")
	d := startDaemon(t, daemonOptions{state: state})
	ctx := context.Background()
	ws := t.TempDir()
	s, err := d.c.Open(ctx, api.OpenRequest{Workspace: ws, BlockingBudget: "50ms"})
	if err != nil {
		t.Fatal(err)
	}
	r, err := d.c.Bash(ctx, s.ID, api.BashRequest{Script: "echo start; while [ ! -e go ]; do sleep 0.01; done"})
	if err != nil || r.End.Kind != orchestrator.Detached {
		t.Fatalf("%+v %v", r.Result, err)
	}
	defer os.WriteFile(filepath.Join(ws, "go"), nil, 0o644)
	// What a killed daemon leaves: the session's state file, which lists the job, and the
	// job's artifact as it stood: 27 bytes written under a cap of 10, the first 5 in place
	// and the last 5 in a ring turned by 2.
	copyDir := filepath.Join(t.TempDir(), "state")
	dir := filepath.Join(copyDir, "sessions", s.ID)
	os.MkdirAll(dir, 0o700)
	data, err := os.ReadFile(filepath.Join(state, "sessions", s.ID, "session.json"))
	if err != nil {
		t.Fatal(err)
	}
	art := filepath.Join(dir, "call-1.out")
	data = []byte(strings.ReplaceAll(string(data), filepath.Join(state, "sessions", s.ID, "call-1.out"), art))
	os.WriteFile(filepath.Join(dir, "session.json"), data, 0o600)
	os.WriteFile(art, []byte("01234pqmno"), 0o600)
	os.WriteFile(art+".mark", []byte("00000000000000000027 00000000000000000010 0\n"), 0o600)

	d2 := startDaemon(t, daemonOptions{state: copyDir})
	jobs, err := d2.c.Jobs(ctx, s.ID)
	if err != nil || len(jobs) != 1 || !jobs[0].Lost {
		t.Fatalf("the jobs: %+v %v", jobs, err)
	}
	want := api.ArtifactReport{Written: 27, Kept: 10, Dropped: 17, Head: 5, Tail: 5, Cap: 10}
	if sv := jobs[0].Saved; sv == nil || *sv != want {
		t.Errorf("the lost job's saved: %+v", sv)
	}
	if b, _ := os.ReadFile(art); string(b) != "01234mnopq" {
		t.Errorf("the artifact: %q", b)
	}
	if _, err := os.Stat(art + ".mark"); !os.IsNotExist(err) {
		t.Errorf("the mark is left: %v", err)
	}
}
