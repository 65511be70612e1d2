package workspace

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"syscall"
	"testing"
)

// snapshotRepo makes, in a new btrfs subvolume, a git work tree with tracked files, an
// ignored directory and file, and a nested repository.
func snapshotRepo(t *testing.T) (parent, dir string) {
	t.Helper()
	root := onFS(t, "btrfs")
	parent, dir = filepath.Join(root, "parent"), filepath.Join(root, "ws")
	subvolume(t, parent)
	writeTree(t, parent, spec("a.txt=a\n", "src/b.go=package b\n", ".gitignore=node_modules/\n.env\n",
		"node_modules/x/y.js=1", ".env=SECRET=1", "nested/n.txt=n"))
	git(t, parent, "init", "-q")
	git(t, parent, "add", "a.txt", "src", ".gitignore")
	git(t, parent, "commit", "-qm", "init")
	git(t, filepath.Join(parent, "nested"), "init", "-q")
	return parent, dir
}

// On btrfs, a workspace whose parent is a subvolume is two snapshots: the base read-only,
// the copy holding everything the parent holds. The hand-back takes only what the child
// changed of the listed files (and new files git would not ignore), never .git, an ignored
// file or a nested repository's files, and removes both snapshots.
func TestSnapshotWorkspace(t *testing.T) {
	needGit(t)
	parent, dir := snapshotRepo(t)
	rep, err := Clone(context.Background(), parent, dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Snapshot || rep.Cloned != 0 || rep.Copied != 0 || len(rep.Warnings) > 0 {
		t.Fatalf("clone report %+v: want a snapshot", rep)
	}
	base, cp := filepath.Join(dir, BaseDir), filepath.Join(dir, CopyDir)
	for _, d := range []string{base, cp} {
		if !subvolumeRoot(d) {
			t.Errorf("%s is not a subvolume", d)
		}
	}
	if err := os.WriteFile(filepath.Join(base, "a.txt"), []byte("x"), 0o644); !errors.Is(err, syscall.EROFS) {
		t.Errorf("writing the base: %v, want EROFS", err)
	}
	for _, p := range []string{".git/HEAD", "node_modules/x/y.js", ".env", "nested/.git/HEAD"} {
		if _, err := os.Lstat(filepath.Join(cp, p)); err != nil {
			t.Errorf("the copy lacks %s: %v", p, err)
		}
	}
	// The child's changes.
	for p, data := range map[string]string{
		"a.txt": "changed\n", "new.txt": "new\n", "node_modules/x/y.js": "2", "node_modules/z.js": "3",
		".env": "SECRET=2", ".git/config": "[core]\n", "nested/n.txt": "m", "nested/new": "n",
	} {
		if err := os.WriteFile(filepath.Join(cp, p), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	hb, err := Handback(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	var taken []string
	for _, c := range hb.Taken {
		taken = append(taken, c.Path+" "+c.Change)
	}
	sort.Strings(taken)
	if want := []string{"a.txt modified", "new.txt added"}; !reflect.DeepEqual(taken, want) {
		t.Errorf("taken %v, want %v", taken, want)
	}
	if len(hb.Conflicts) > 0 || hb.Counts.Listed != 5 || hb.Counts.Ignored != 1 { // .env; node_modules is not walked
		t.Errorf("report %+v", hb)
	}
	for p, want := range map[string]string{"a.txt": "changed\n", "new.txt": "new\n", "node_modules/x/y.js": "1", ".env": "SECRET=1", "nested/n.txt": "n"} {
		if data, err := os.ReadFile(filepath.Join(parent, p)); err != nil || string(data) != want {
			t.Errorf("parent's %s = %q, %v; want %q", p, data, err, want)
		}
	}
	for _, p := range []string{"node_modules/z.js", "nested/new"} {
		if _, err := os.Lstat(filepath.Join(parent, p)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("parent's %s: %v, want none", p, err)
		}
	}
	for _, d := range []string{base, cp} {
		if _, err := os.Lstat(d); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s left after the hand-back: %v", d, err)
		}
	}
}

// The hand-back of a snapshot workspace reports what the hand-back of file clones of the
// same tree reports, for the same changes on both sides.
func TestSnapshotMatchesClones(t *testing.T) {
	needGit(t)
	parent, dir := snapshotRepo(t)
	other := filepath.Join(filepath.Dir(dir), "ws-clones")
	snap, err := Clone(context.Background(), parent, dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	clones, err := Clone(context.Background(), parent, other, Options{NoSnapshot: true})
	if err != nil {
		t.Fatal(err)
	}
	if !snap.Snapshot || clones.Snapshot || clones.Files != 3 {
		t.Fatalf("reports %+v and %+v", snap, clones)
	}
	for _, d := range []string{dir, other} {
		for p, data := range map[string]string{"a.txt": "a\nchild\n", "src/b.go": "package c\n", "add.txt": "x"} {
			os.WriteFile(filepath.Join(d, CopyDir, p), []byte(data), 0o644)
		}
		os.Remove(filepath.Join(d, CopyDir, ".gitignore"))
	}
	os.WriteFile(filepath.Join(parent, "a.txt"), []byte("parent\na\n"), 0o644)
	os.WriteFile(filepath.Join(parent, "src/b.go"), []byte("package p\n"), 0o644)
	a, err := Merge(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	// Undo what the first hand-back did, so the second meets the same parent.
	os.WriteFile(filepath.Join(parent, "a.txt"), []byte("parent\na\n"), 0o644)
	os.WriteFile(filepath.Join(parent, ".gitignore"), []byte("node_modules/\n.env\n"), 0o644)
	os.Remove(filepath.Join(parent, "add.txt"))
	b, err := Merge(context.Background(), other)
	if err != nil {
		t.Fatal(err)
	}
	a.Dir, b.Dir = "", ""
	if !reflect.DeepEqual(a, b) {
		t.Errorf("snapshots' report\n%+v\nclones'\n%+v", a, b)
	}
	if len(a.Merged) != 1 || len(a.Conflicts) != 1 || len(a.Taken) != 2 {
		t.Errorf("report %+v: want a.txt merged, src/b.go conflicted, add.txt and .gitignore taken", a)
	}
	for _, d := range []string{dir, other} {
		if err := Discard(d); err != nil {
			t.Fatal(err)
		}
	}
}

// Where a snapshot would not be the workspace, file clones are made instead: a parent
// that is a plain directory on btrfs, a subvolume holding another, or NoSnapshot.
func TestSnapshotFallsBack(t *testing.T) {
	needGit(t)
	root := onFS(t, "btrfs")
	plain := filepath.Join(root, "plain")
	writeTree(t, plain, spec("a=1"))
	nested := filepath.Join(root, "nested")
	subvolume(t, nested)
	writeTree(t, nested, spec("a=1"))
	subvolume(t, filepath.Join(nested, "inner"))
	own := filepath.Join(root, "own")
	subvolume(t, own)
	writeTree(t, own, spec("a=1"))
	for _, c := range []struct {
		parent string
		opts   Options
	}{{plain, Options{}}, {nested, Options{}}, {own, Options{NoSnapshot: true}}} {
		dir := c.parent + "-ws"
		rep, err := Clone(context.Background(), c.parent, dir, c.opts)
		if err != nil {
			t.Fatal(err)
		}
		if rep.Snapshot || rep.Cloned != 1 {
			t.Errorf("%s: report %+v, want one file cloned by extents", c.parent, rep)
		}
		if err := Discard(dir); err != nil {
			t.Fatal(err)
		}
	}
}

// A group of snapshot workspaces shares one read-only base, listed once: each copy is a
// snapshot of it, each hands back as a workspace of its own would, and the base and the
// group go with the last.
func TestCloneGroupSnapshots(t *testing.T) {
	needGit(t)
	parent, dir := snapshotRepo(t)
	group := dir + "-group"
	os.Mkdir(group, 0o700)
	dirs := []string{dir + "-0", dir + "-1"}
	reps, err := CloneGroup(context.Background(), parent, group, dirs, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !subvolumeRoot(filepath.Join(group, BaseDir)) {
		t.Fatal("the group has no base snapshot")
	}
	os.WriteFile(filepath.Join(dirs[0], CopyDir, "a.txt"), []byte("zero\n"), 0o644)
	os.WriteFile(filepath.Join(dirs[1], CopyDir, "src/b.go"), []byte("package one\n"), 0o644)
	for i, r := range reps {
		if !r.Snapshot || r.Dir != dirs[i] {
			t.Errorf("report %d: %+v", i, r)
		}
		if _, err := os.Lstat(filepath.Join(dirs[i], BaseDir)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s has a base of its own: %v", dirs[i], err)
		}
		hb, err := Handback(context.Background(), dirs[i])
		if err != nil {
			t.Fatal(err)
		}
		if len(hb.Taken) != 1 || hb.Counts.Listed != 5 {
			t.Errorf("hand-back %d: %+v", i, hb)
		}
	}
	for p, want := range map[string]string{"a.txt": "zero\n", "src/b.go": "package one\n"} {
		if b, _ := os.ReadFile(filepath.Join(parent, p)); string(b) != want {
			t.Errorf("parent's %s = %q", p, b)
		}
	}
	if _, err := os.Lstat(group); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the group's directory: %v", err)
	}
}

// A snapshot workspace is made without a git: the ignore rules of a parent holding its own
// .git directory are read at the hand-back from the base, which holds the repository as
// it was at spawn; they are those a git read of the parent gave then, whatever the parent
// or the child does to .git/info/exclude since. A configuration naming a work tree or an
// include is still read by git at spawn; a subvolume with no .git in a work tree is, as
// git sees it too, in none.
func TestSnapshotIgnoreFactsFromBase(t *testing.T) {
	needGit(t)
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("XDG_CONFIG_HOME", filepath.Join(home, "xdg"))
	t.Setenv("GIT_CONFIG_GLOBAL", filepath.Join(home, ".gitconfig"))
	writeTree(t, home, spec("xdg/git/ignore=*.log\n"))
	parent, dir := snapshotRepo(t)
	exclude := filepath.Join(parent, ".git", "info", "exclude")
	os.MkdirAll(filepath.Dir(exclude), 0o755)
	if err := os.WriteFile(exclude, []byte("secret.txt\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	want, err := ignoreFacts(context.Background(), parent)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := Clone(context.Background(), parent, dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if h, err := readHeader(dir); err != nil || !rep.Snapshot || !h.GitFromBase || h.Git || len(h.Ignore) > 0 {
		t.Fatalf("header %+v, %v; report %+v: want a snapshot with its git facts left to the hand-back", h, err, rep)
	}
	os.WriteFile(exclude, []byte("kept.txt\n"), 0o644)
	os.WriteFile(filepath.Join(dir, CopyDir, ".git", "info", "exclude"), []byte("kept.txt\n"), 0o644)
	writeTree(t, filepath.Join(dir, CopyDir), spec("secret.txt=s", "kept.txt=k", "run.log=l"))
	p, err := Prepare(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	if !p.h.m.Git || !reflect.DeepEqual(p.h.m.Ignore, want.Ignore) || len(want.Ignore) != 2 {
		t.Errorf("facts read from the base: git %v, ignore %+v; at spawn: %+v", p.h.m.Git, p.h.m.Ignore, want)
	}
	hb, err := p.Merge(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(hb.Taken) != 1 || hb.Taken[0].Path != "kept.txt" || hb.Counts.Ignored != 2 {
		t.Errorf("report %+v: want kept.txt taken, secret.txt and run.log ignored", hb)
	}
	if err := Discard(dir); err != nil {
		t.Fatal(err)
	}

	// A configuration that names a work tree or an include: git reads the facts at spawn.
	git(t, parent, "config", "include.path", filepath.Join(home, "none"))
	other := dir + "-include"
	if rep, err = Clone(context.Background(), parent, other, Options{}); err != nil {
		t.Fatal(err)
	}
	if h, err := readHeader(other); err != nil || !rep.Snapshot || h.GitFromBase || !h.Git {
		t.Errorf("header %+v, %v; report %+v: want the git facts read at spawn", h, err, rep)
	}
	if err := Discard(other); err != nil {
		t.Fatal(err)
	}

	// A subvolume with no .git inside a work tree.
	root := onFS(t, "btrfs")
	git(t, root, "init", "-q")
	sub := filepath.Join(root, "sub")
	subvolume(t, sub)
	writeTree(t, sub, spec("a=1"))
	if f, err := ignoreFacts(context.Background(), sub); err != nil || f.Git {
		t.Fatalf("git finds a work tree for a subvolume: %+v, %v", f, err)
	}
	ws := filepath.Join(root, "ws")
	if rep, err = Clone(context.Background(), sub, ws, Options{}); err != nil {
		t.Fatal(err)
	}
	if h, err := readHeader(ws); err != nil || !rep.Snapshot || h.Git || h.GitFromBase {
		t.Errorf("header %+v, %v; report %+v: want a snapshot outside git", h, err, rep)
	}
	if err := Discard(ws); err != nil {
		t.Fatal(err)
	}
}
