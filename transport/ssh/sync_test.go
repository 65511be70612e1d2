package ssh_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/paddockhq/paddock/orchestrator"
	"github.com/paddockhq/paddock/transport/ssh"
)

// A workspace synced to a box with no shared filesystem: changes made on the box come
// back; a path changed on both sides differently is a conflict, the parent's version kept
// and the box's saved under conflicts/. The same over SFTP and, on a box without it, over
// exec channels.
func TestWorkspaceSync(t *testing.T) {
	for _, w := range ways {
		t.Run(w.name, func(t *testing.T) { testWorkspaceSync(t, newBoxWith(t, w.opts)) })
	}
}

func testWorkspaceSync(t *testing.T, b *box) {
	ctx := context.Background()
	parent := t.TempDir()
	write := func(rel, s string) {
		t.Helper()
		p := filepath.Join(parent, rel)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("a.txt", "one\n")
	write("b.txt", "base\n")
	write("c.txt", "gone soon\n")
	write("old.txt", "old1\n")
	write("same.txt", "kept\n")
	write("sub/d.txt", "deep\n")
	os.Symlink("a.txt", filepath.Join(parent, "link"))
	past := time.Now().Add(-48 * time.Hour)
	os.Chtimes(filepath.Join(parent, "old.txt"), past, past)

	dir := filepath.Join(t.TempDir(), "ws")
	remote := filepath.Join(b.srv.Dir, "work", "ws") // on the box: not the parent, not the copy
	s, err := ssh.StartSync(ctx, ssh.SyncOptions{Host: b.tr.Host, Pool: b.pool, Parent: parent, Dir: dir, Remote: remote})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(filepath.Join(remote, "sub", "d.txt")); err != nil || string(got) != "deep\n" {
		t.Fatalf("the box's copy: %q %v", got, err)
	}
	if tgt, err := os.Readlink(filepath.Join(remote, "link")); err != nil || tgt != "a.txt" {
		t.Fatalf("the box's symlink: %q %v", tgt, err)
	}

	// A session on the box works in its copy.
	m, err := s.PathMap()
	if err != nil {
		t.Fatal(err)
	}
	sess, err := orchestrator.Open(ctx, orchestrator.Config{
		Workspace: s.Copy(), Transport: b.tr, PathMap: m,
		Env: []string{"PATH=/usr/bin:/bin", "LC_ALL=C"},
	})
	if err != nil {
		t.Fatal(err)
	}
	res, err := sess.Bash(ctx, "pwd; echo two > a.txt; echo box > b.txt; rm c.txt; echo old2 > old.txt; echo new > n.txt; mkdir -p sub/e; echo e > sub/e/f.txt; ln -s sub l2")
	if err != nil || res.End.Status != 0 {
		t.Fatal(err, res)
	}
	if got := res.Steps[0].Stdout.Text; got != remote+"\n" {
		t.Fatalf("the session ran in %q; want the box's copy %q", got, remote)
	}
	sess.Close()
	// Meanwhile the parent changed b.txt too.
	write("b.txt", "parent\n")

	rep, err := s.Handback(ctx)
	if err != nil {
		t.Fatal(err)
	}
	read := func(rel string) string {
		b, err := os.ReadFile(filepath.Join(parent, rel))
		if err != nil {
			return "<" + err.Error() + ">"
		}
		return string(b)
	}
	for rel, want := range map[string]string{
		"a.txt": "two\n", "b.txt": "parent\n", "old.txt": "old2\n", "same.txt": "kept\n",
		"n.txt": "new\n", "sub/d.txt": "deep\n", "sub/e/f.txt": "e\n",
	} {
		if got := read(rel); got != want {
			t.Errorf("%s: %q; want %q", rel, got, want)
		}
	}
	if _, err := os.Lstat(filepath.Join(parent, "c.txt")); !os.IsNotExist(err) {
		t.Errorf("c.txt, removed on the box, is still in the parent: %v", err)
	}
	if tgt, err := os.Readlink(filepath.Join(parent, "l2")); err != nil || tgt != "sub" {
		t.Errorf("l2: %q %v", tgt, err)
	}
	if len(rep.Conflicts) != 1 || rep.Conflicts[0].Path != "b.txt" {
		t.Fatalf("conflicts %+v; want b.txt alone", rep.Conflicts)
	}
	saved, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(rep.Conflicts[0].Saved)))
	if err != nil || string(saved) != "box\n" || filepath.Dir(rep.Conflicts[0].Saved) != "conflicts" {
		t.Fatalf("the box's version of b.txt: %q at %q %v", saved, rep.Conflicts[0].Saved, err)
	}
	if _, err := os.Lstat(remote); !os.IsNotExist(err) {
		t.Fatalf("the box's copy is left after the hand-back: %v", err)
	}
	if _, err := s.Handback(ctx); err != ssh.ErrSyncEnded {
		t.Fatalf("second hand-back: %v", err)
	}
}
