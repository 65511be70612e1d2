package workspace

import (
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// ws makes a parent holding base, clones it, then changes the parent to hold parent and
// the child's copy to hold child. It returns the parent and workspace directories.
func ws(t testing.TB, base, parent, child tree) (string, string) {
	t.Helper()
	return wsOn(t, "", base, parent, child)
}

// wsOn is ws on the named test filesystem (see onFS). On btrfs the parent is a subvolume,
// so the workspace is a pair of snapshots.
func wsOn(t testing.TB, fs string, base, parent, child tree) (string, string) {
	t.Helper()
	tmp := onFS(t, fs)
	pdir, dir := filepath.Join(tmp, "parent"), filepath.Join(tmp, "ws")
	if fs == "btrfs" {
		subvolume(t, pdir)
	}
	writeTree(t, pdir, base)
	rep, err := Clone(context.Background(), pdir, dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Snapshot != (fs == "btrfs") {
		t.Fatalf("on %q the clone is a snapshot: %v", fs, rep.Snapshot)
	}
	for _, d := range []string{BaseDir, CopyDir} {
		if diff := diffTrees(base, readTree(t, filepath.Join(dir, d))); diff != "" {
			t.Fatalf("%s differs from the parent:\n%s", d, diff)
		}
	}
	syncTree(t, pdir, base, parent)
	syncTree(t, filepath.Join(dir, CopyDir), base, child)
	return pdir, dir
}

type row struct {
	name                string
	base, parent, child tree
	want                tree              // the parent after the hand-back
	saved               tree              // dir/conflicts after the hand-back
	taken               map[string]string // path -> change
	conflicts           map[string]string // path -> reason
}

// The hand-back table, row by row, on files, directories and symlinks.
//
// law: cow_plan
// law: cow_keeps_parent
// law: cow_takes_child
// law: cow_conflict_reported
var rows = []row{
	{name: "child unchanged, parent unchanged",
		base: spec("a=1", "d/", "l->a"), parent: spec("a=1", "d/", "l->a"), child: spec("a=1", "d/", "l->a"),
		want: spec("a=1", "d/", "l->a")},
	{name: "child unchanged, parent changed",
		base: spec("a=1", "b=1", "l->a", "d/"), parent: spec("a=2", "l->b", "n=3"), child: spec("a=1", "b=1", "l->a", "d/"),
		want: spec("a=2", "l->b", "n=3")},
	{name: "only child changed a file",
		base: spec("a=1", "b=1"), parent: spec("a=1", "b=1"), child: spec("a=2", "b=1"),
		want: spec("a=2", "b=1"), taken: map[string]string{"a": "modified"}},
	{name: "only child changed exec bits",
		base: spec("a=1"), parent: spec("a=1"), child: spec("a*=1"),
		want: spec("a*=1"), taken: map[string]string{"a": "modified"}},
	{name: "only child removed a file",
		base: spec("a=1", "b=1"), parent: spec("a=1", "b=1"), child: spec("b=1"),
		want: spec("b=1"), taken: map[string]string{"a": "removed"}},
	{name: "only child added a file in a new directory",
		base: spec("a=1"), parent: spec("a=1"), child: spec("a=1", "n/m/f=x"),
		want: spec("a=1", "n/m/f=x"), taken: map[string]string{"n": "added", "n/m": "added", "n/m/f": "added"}},
	{name: "only child added an empty directory",
		base: spec("a=1"), parent: spec("a=1"), child: spec("a=1", "e/"),
		want: spec("a=1", "e/"), taken: map[string]string{"e": "added"}},
	{name: "only child removed an empty directory",
		base: spec("a=1", "e/"), parent: spec("a=1", "e/"), child: spec("a=1"),
		want: spec("a=1"), taken: map[string]string{"e": "removed"}},
	{name: "only child removed a directory with files",
		base: spec("d/x=1", "d/s/y=2", "k=3"), parent: spec("d/x=1", "d/s/y=2", "k=3"), child: spec("k=3"),
		want: spec("k=3"), taken: map[string]string{"d": "removed", "d/x": "removed", "d/s": "removed", "d/s/y": "removed"}},
	{name: "only child changed a symlink",
		base: spec("a=1", "l->a"), parent: spec("a=1", "l->a"), child: spec("a=1", "l->b"),
		want: spec("a=1", "l->b"), taken: map[string]string{"l": "modified"}},
	{name: "only child replaced a file by a symlink",
		base: spec("a=1", "b=2"), parent: spec("a=1", "b=2"), child: spec("a->b", "b=2"),
		want: spec("a->b", "b=2"), taken: map[string]string{"a": "modified"}},
	{name: "only child replaced a file by a directory",
		base: spec("a=1"), parent: spec("a=1"), child: spec("a/x=2"),
		want: spec("a/x=2"), taken: map[string]string{"a": "modified", "a/x": "added"}},
	{name: "only child replaced a directory by a file",
		base: spec("a/x=1", "a/y/"), parent: spec("a/x=1", "a/y/"), child: spec("a=2"),
		want: spec("a=2"), taken: map[string]string{"a": "modified", "a/x": "removed", "a/y": "removed"}},
	{name: "both changed to the same content",
		base: spec("a=1", "b=1", "l->a"), parent: spec("a=2", "l->b", "n=3"), child: spec("a=2", "l->b", "n=3"),
		want: spec("a=2", "l->b", "n=3"), taken: map[string]string{"a": "modified", "b": "removed", "l": "modified", "n": "added"}},
	{name: "both changed differently",
		base: spec("a=1", "l->a"), parent: spec("a=2", "l->p"), child: spec("a=3", "l->c"),
		want: spec("a=2", "l->p"), saved: spec("a=3", "l->c", "a.merge=<<<<<<< parent\n2\n=======\n3\n>>>>>>> child\n"),
		conflicts: map[string]string{"a": ReasonBothChanged, "l": ReasonBothChanged}},
	{name: "both added differently",
		base: spec("k=0"), parent: spec("k=0", "n=p"), child: spec("k=0", "n=c"),
		want: spec("k=0", "n=p"), saved: spec("n=c"), conflicts: map[string]string{"n": ReasonBothChanged}},
	{name: "parent changed, child removed",
		base: spec("a=1", "k=0"), parent: spec("a=2", "k=0"), child: spec("k=0"),
		want: spec("a=2", "k=0"), conflicts: map[string]string{"a": ReasonBothChanged}},
	{name: "parent removed, child changed",
		base: spec("a=1", "k=0"), parent: spec("k=0"), child: spec("a=2", "k=0"),
		want: spec("k=0"), saved: spec("a=2"), conflicts: map[string]string{"a": ReasonBothChanged}},
	{name: "parent made a directory where the child changed the file",
		base: spec("a=1"), parent: spec("a/x=p"), child: spec("a=2"),
		want: spec("a/x=p"), saved: spec("a=2"), conflicts: map[string]string{"a": ReasonBothChanged}},
	{name: "parent holds a directory with entries where the child put a file",
		base: spec("d/x=1"), parent: spec("d/x=1", "d/p=2"), child: spec("d=file"),
		want: spec("d/p=2"), saved: spec("d=file"),
		taken: map[string]string{"d/x": "removed"}, conflicts: map[string]string{"d": ReasonParentDirectory}},
	{name: "parent holds a file where the child's directory goes",
		base: spec("a/x=1"), parent: spec("a=p"), child: spec("a/x=1", "a/n=c"),
		want: spec("a=p"), saved: spec("a/n=c"), conflicts: map[string]string{"a/n": ReasonParentFileAbove}},
	{name: "parent holds a symlink where the child's directory goes",
		base: spec("a/x=1", "t/"), parent: spec("a->t", "t/"), child: spec("a/x=1", "a/s/n=c", "t/"),
		want: spec("a->t", "t/"), saved: spec("a/s/", "a/s/n=c"),
		conflicts: map[string]string{"a/s": ReasonParentFileAbove, "a/s/n": ReasonParentFileAbove}},
	{name: "child removed a directory the parent added to",
		base: spec("d/x=1", "d/y=1"), parent: spec("d/x=1", "d/y=1", "d/p=2"), child: spec(),
		want: spec("d/p=2"), taken: map[string]string{"d/x": "removed", "d/y": "removed"},
		conflicts: map[string]string{"d": ReasonNotEmpty}},
	{name: "parent removed a directory the child added to",
		base: spec("d/x=1", "k=0"), parent: spec("k=0"), child: spec("d/x=1", "d/n=2", "k=0"),
		want: spec("d/n=2", "k=0"), taken: map[string]string{"d/n": "added"}},
}

func TestHandbackTable(t *testing.T) {
	for _, fs := range []string{"", "btrfs"} {
		for _, r := range rows {
			t.Run(fs+"/"+r.name, func(t *testing.T) { handbackRow(t, fs, r) })
		}
	}
}

func handbackRow(t *testing.T, fs string, r row) {
	{
		{
			parent, dir := wsOn(t, fs, r.base, r.parent, r.child)
			rep, err := Handback(context.Background(), dir)
			if err != nil {
				t.Fatal(err)
			}
			if diff := diffTrees(r.want, readTree(t, parent)); diff != "" {
				t.Errorf("parent after the hand-back:\n%s", diff)
			}
			if r.saved == nil {
				r.saved = tree{}
			}
			// law: private_on_create
			for name, perm := range map[string]os.FileMode{ConflictsDir: 0o700, ReportName: 0o600} {
				if fi, err := os.Stat(filepath.Join(dir, name)); err == nil && fi.Mode().Perm() != perm {
					t.Errorf("%s is %v, want %v", name, fi.Mode().Perm(), perm)
				} else if err != nil && (name == ReportName || len(r.saved) > 0) {
					t.Error(err)
				}
			}
			if diff := diffTrees(r.saved, readTree(t, filepath.Join(dir, ConflictsDir))); diff != "" {
				t.Errorf("conflicts saved:\n%s", diff)
			}
			taken, conflicts := map[string]string{}, map[string]string{}
			for _, c := range rep.Taken {
				taken[c.Path] = c.Change
			}
			for _, c := range rep.Conflicts {
				conflicts[c.Path] = c.Reason
				if c.Saved != "" {
					if _, err := os.Lstat(filepath.Join(dir, c.Saved)); err != nil {
						t.Errorf("conflict %s: saved version: %v", c.Path, err)
					}
				}
			}
			if r.taken == nil {
				r.taken = map[string]string{}
			}
			if r.conflicts == nil {
				r.conflicts = map[string]string{}
			}
			if !reflect.DeepEqual(taken, r.taken) {
				t.Errorf("taken = %v, want %v", taken, r.taken)
			}
			if !reflect.DeepEqual(conflicts, r.conflicts) {
				t.Errorf("conflicts = %v, want %v", conflicts, r.conflicts)
			}
			for _, d := range []string{BaseDir, CopyDir} {
				if _, err := os.Lstat(filepath.Join(dir, d)); !errors.Is(err, os.ErrNotExist) {
					t.Errorf("%s left after the hand-back: %v", d, err)
				}
			}
			// A repeat changes nothing and returns the same report.
			again, err := Handback(context.Background(), dir)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(again, rep) {
				t.Errorf("repeat report = %+v, want %+v", again, rep)
			}
			if diff := diffTrees(r.want, readTree(t, parent)); diff != "" {
				t.Errorf("parent after a repeat:\n%s", diff)
			}
		}
	}
}

// A symlink in the parent where the child's directory goes is never written through.
func TestHandbackNeverFollowsParentSymlink(t *testing.T) {
	parent, dir := ws(t, spec("a/x=1", "t/"), spec("a->t", "t/"), spec("a/x=2", "a/n=c", "t/"))
	if _, err := Handback(context.Background(), dir); err != nil {
		t.Fatal(err)
	}
	if got := readTree(t, filepath.Join(parent, "t")); len(got) != 0 {
		t.Errorf("the symlink's target got %v", got)
	}
}

// A change is found without reading unchanged files: contents are compared only where the
// stat facts differ from the manifest's.
func TestHandbackReadsOnlyChanged(t *testing.T) {
	var items []string
	for i := range 200 {
		items = append(items, "f"+string(rune('a'+i%26))+"/"+string(rune('a'+i/26))+"=content")
	}
	base := spec(items...)
	tmp := t.TempDir()
	parent, dir := filepath.Join(tmp, "parent"), filepath.Join(tmp, "ws")
	writeTree(t, parent, base)
	// Past the clock tick the parent was written in, so no entry of it reads as racy.
	if _, err := waitPast(context.Background(), tickClock()); err != nil {
		t.Fatal(err)
	}
	if _, err := Clone(context.Background(), parent, dir, Options{}); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, CopyDir, "fa/a"), []byte("chang3d"), 0o644); err != nil { // the same size: read to be sure
		t.Fatal(err)
	}
	before := compared.Load()
	rep, err := Handback(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	// One comparison: the changed file against the base (the parent's own facts match).
	if n := compared.Load() - before; n != 1 {
		t.Errorf("compared %d entries, want 1", n)
	}
	if !slices.EqualFunc(rep.Taken, []Change{{Path: "fa/a", Change: "modified", Kind: "file"}}, func(a, b Change) bool { return a == b }) {
		t.Errorf("taken = %v", rep.Taken)
	}
}

// Over random base, parent and child trees on disk, the hand-back keeps every law: a path
// the child did not change keeps the parent's content, a path only the child changed gets
// the child's, a conflict only where both changed differently, and nothing either side
// wrote is lost.
//
// law: cow_keeps_parent
// law: cow_takes_child
// law: cow_conflict_reported
// law: cow_conflict_is_real
// law: cow_plan_is_merge
// law: cow_merge_clean
// law: cow_merge_marked
func TestHandbackProperty(t *testing.T) {
	needGit(t)
	for _, fs := range []struct {
		name string
		n    int
	}{{"", 300}, {"btrfs", 100}} {
		t.Run(fs.name, func(t *testing.T) { handbackProperty(t, fs.name, fs.n) })
	}
}

func handbackProperty(t *testing.T, fs string, n int) {
	if testing.Short() {
		n = 40
	}
	rng := rand.New(rand.NewPCG(3, 4))
	for i := range n {
		b := randomTree(rng)
		p, c := edit(rng, b), edit(rng, b)
		parent, dir := wsOn(t, fs, b, p, c)
		rep, err := Handback(context.Background(), dir)
		if err != nil {
			t.Fatalf("case %d: %v\nbase %v\nparent %v\nchild %v", i, err, b, p, c)
		}
		r := readTree(t, parent)
		k := readTree(t, filepath.Join(dir, ConflictsDir))
		o := outcomeOfReport(rep)
		if bad := checkLaws(b, p, c, r, k, o, gitMerge(t)); len(bad) > 0 {
			t.Fatalf("case %d:\nbase %v\nparent %v\nchild %v\nresult %v\n%s", i, b, p, c, r, strings.Join(bad, "\n"))
		}
		// The model of the plan agrees with the disk.
		steps := Plan(factsOfModels(b, p, c, gitMerge(t)))
		mr, mk := applyPlan(t, b, p, c, steps, gitMerge(t))
		if diff := diffTrees(mr, r); diff != "" {
			t.Fatalf("case %d: the disk differs from the plan's model:\n%s", i, diff)
		}
		if diff := diffTrees(mk, k); diff != "" {
			t.Fatalf("case %d: saved conflicts differ from the plan's model:\n%s", i, diff)
		}
	}
}

// outcomeOfReport is what a hand-back's report says, for the laws.
func outcomeOfReport(rep *Report) outcome {
	o := outcome{conflicts: map[string]string{}, taken: map[string]bool{}, merged: map[string]bool{}, marked: map[string]string{}}
	for _, x := range rep.Conflicts {
		o.conflicts[x.Path] = x.Reason
		if x.Marked != "" {
			o.marked[x.Path] = strings.TrimPrefix(x.Marked, ConflictsDir+"/")
		}
	}
	for _, x := range rep.Taken {
		o.taken[x.Path] = true
	}
	for _, x := range rep.Merged {
		o.merged[x.Path] = true
	}
	return o
}
