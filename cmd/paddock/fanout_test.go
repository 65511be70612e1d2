package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/paddockhq/paddock/fanout"
	"github.com/paddockhq/paddock/internal/loopfs"
)

// Eight children each write their own file and all change one shared file: the eight own
// files are taken; the shared file is taken from the first child handed back and is a
// conflict for each other child, its version kept under that child's conflicts/.
// law: cow_conflict_reported, cow_takes_child
func TestFanoutEightChildren(t *testing.T) {
	ws := t.TempDir()
	os.WriteFile(filepath.Join(ws, "shared.txt"), []byte("parent\n"), 0o644)
	state := t.TempDir()
	so, se, code := paddock(t, "", "fanout", "-n", "8", "--parallel", "8", "--json", "--workspace", ws, "--state-dir", state, "--",
		`echo own $PADDOCK_CHILD_INDEX > own-$PADDOCK_CHILD_INDEX.txt; echo child $PADDOCK_CHILD_INDEX > shared.txt`)
	if code != exitConflicts {
		t.Fatalf("exit %d, want %d (conflicts)\n%s\n%s", code, exitConflicts, so, se)
	}
	var rep fanout.Report
	if err := json.Unmarshal([]byte(so), &rep); err != nil {
		t.Fatalf("%v\n%s", err, so)
	}
	if len(rep.Children) != 8 || rep.Failed != 0 || rep.Conflicts != 7 {
		t.Fatalf("report: %d children, %d failed, %d conflicts", len(rep.Children), rep.Failed, rep.Conflicts)
	}
	takers := 0
	for _, c := range rep.Children {
		own := fmt.Sprintf("own-%d.txt", c.Index)
		b, err := os.ReadFile(filepath.Join(ws, own))
		if err != nil || string(b) != fmt.Sprintf("own %d\n", c.Index) {
			t.Errorf("%s not taken: %q %v", own, b, err)
		}
		tookShared := false
		for _, ch := range c.Taken {
			if ch.Path == "shared.txt" {
				tookShared = true
			}
		}
		if tookShared {
			takers++
			b, _ := os.ReadFile(filepath.Join(ws, "shared.txt"))
			if string(b) != fmt.Sprintf("child %d\n", c.Index) {
				t.Errorf("shared.txt holds %q, not the taking child's version", b)
			}
			continue
		}
		if len(c.Conflicts) != 1 || c.Conflicts[0].Path != "shared.txt" {
			t.Fatalf("%s: conflicts %+v", c.Name, c.Conflicts)
		}
		saved := filepath.Join(c.Dir, c.Conflicts[0].Saved)
		b, err = os.ReadFile(saved)
		if err != nil || strings.TrimSpace(string(b)) != fmt.Sprintf("child %d", c.Index) {
			t.Errorf("%s: its version under conflicts/ is %q, %v", c.Name, b, err)
		}
	}
	if takers != 1 {
		t.Fatalf("%d children took shared.txt, want 1", takers)
	}
}

// With no --state-dir, a fan-out of an XFS workspace clones beside it, on XFS: reflinks,
// no copy warning. Nothing is left when no child conflicted; when one did, only its
// directory stays, and the progress line says where its versions are. On a filesystem
// without reflinks (the temporary directory here), the copy warning is printed once, without
// --json too.
func TestFanoutScratchBesideTheWorkspace(t *testing.T) {
	xfs := loopfs.ForTest(t, "xfs", 300<<20)
	ws := filepath.Join(xfs, "project")
	os.MkdirAll(ws, 0o755)
	os.WriteFile(filepath.Join(ws, "shared.txt"), []byte("parent\n"), 0o644)
	left := func(dir string) []string {
		var names []string
		ents, _ := os.ReadDir(dir)
		for _, e := range ents {
			if strings.HasPrefix(e.Name(), ".paddock-fanout-") || strings.HasPrefix(e.Name(), "paddock-fanout-") || strings.HasPrefix(e.Name(), "child-") {
				names = append(names, e.Name())
			}
		}
		return names
	}
	tmpBefore := left(os.TempDir())

	so, se, code := paddock(t, "", "fanout", "-n", "3", "--transport", "local", "--json", "--workspace", ws, "--", `echo $PADDOCK_CHILD_INDEX > own-$PADDOCK_CHILD_INDEX.txt`)
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, so, se)
	}
	var rep fanout.Report
	if err := json.Unmarshal([]byte(so), &rep); err != nil {
		t.Fatal(err)
	}
	for _, c := range rep.Children {
		if c.Clone == nil || c.Clone.Copied != 0 || c.Clone.Cloned == 0 || !strings.HasPrefix(c.Clone.Dir, xfs) {
			t.Errorf("%s was not reflinked on the workspace's filesystem: %+v", c.Name, c.Clone)
		}
	}
	if strings.Contains(se, "no reflinks") {
		t.Errorf("a copy warning on XFS: %s", se)
	}
	if l := left(xfs); len(l) != 0 {
		t.Errorf("left beside the workspace: %v", l)
	}

	// Two children change the shared file: one conflicts, its directory stays and is named.
	so, se, code = paddock(t, "", "fanout", "-n", "2", "--parallel", "2", "--transport", "local", "--workspace", ws, "--", `echo $PADDOCK_CHILD_INDEX > shared.txt`)
	if code != exitConflicts {
		t.Fatalf("exit %d\n%s\n%s", code, so, se)
	}
	l := left(xfs)
	if len(l) != 1 {
		t.Fatalf("left beside the workspace: %v", l)
	}
	kids, _ := filepath.Glob(filepath.Join(xfs, l[0], "child-*"))
	if len(kids) != 1 || !strings.Contains(se, "versions of the conflicted paths are in "+filepath.Join(kids[0], "conflicts")) {
		t.Errorf("the conflicted child's directory %v is not named:\n%s", kids, se)
	}
	if b, err := os.ReadFile(filepath.Join(kids[0], "conflicts", "shared.txt")); err != nil || len(b) == 0 {
		t.Errorf("its version: %q %v", b, err)
	}
	if after := left(os.TempDir()); fmt.Sprint(after) != fmt.Sprint(tmpBefore) {
		t.Errorf("left in %s: %v, before %v", os.TempDir(), after, tmpBefore)
	}

	// A workspace on a filesystem with no reflinks: the warning, once, without --json.
	plain := t.TempDir()
	os.WriteFile(filepath.Join(plain, "a.txt"), []byte("a\n"), 0o644)
	_, se, code = paddock(t, "", "fanout", "-n", "2", "--transport", "local", "--workspace", plain, "--", `true`)
	if code != 0 || strings.Count(se, "warning: no reflinks") != 1 {
		t.Errorf("exit %d; the copy warning, once:\n%s", code, se)
	}
}

// Children that change different lines of one file are merged as git merges them: the
// first to end is taken, the others merged. Where their lines meet, each later child's
// conflict names where each version was kept: the workspace's in place, the child's and
// the marked merge under its directory.
// law: cow_merge_clean, cow_merge_marked
func TestFanoutMergesLines(t *testing.T) {
	ws := t.TempDir()
	os.WriteFile(filepath.Join(ws, "lines.txt"), []byte("0\n1\n2\n3\n4\n5\n6\n"), 0o644)
	os.WriteFile(filepath.Join(ws, "same.txt"), []byte("x\n"), 0o644)
	state := t.TempDir()
	so, se, code := paddock(t, "", "fanout", "-n", "3", "--parallel", "3", "--json", "--workspace", ws, "--state-dir", state, "--",
		`sed -i "$((2*PADDOCK_CHILD_INDEX+1))s/.*/child $PADDOCK_CHILD_INDEX/" lines.txt; echo child $PADDOCK_CHILD_INDEX > same.txt`)
	if code != exitConflicts {
		t.Fatalf("exit %d, want %d (conflicts)\n%s\n%s", code, exitConflicts, so, se)
	}
	var rep fanout.Report
	if err := json.Unmarshal([]byte(so), &rep); err != nil {
		t.Fatalf("%v\n%s", err, so)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "lines.txt")); string(b) != "child 0\n1\nchild 1\n3\nchild 2\n5\n6\n" {
		t.Errorf("lines.txt = %q, want every child's line", b)
	}
	if rep.Merged != 2 || rep.Conflicts != 2 {
		t.Fatalf("report: %d merged, %d conflicts; want 2 and 2\n%s", rep.Merged, rep.Conflicts, so)
	}
	for _, c := range rep.Children {
		for _, x := range c.Conflicts {
			if x.Path != "same.txt" || x.Kept.Workspace != filepath.Join(ws, "same.txt") {
				t.Errorf("%s: conflict %+v", c.Name, x)
			}
			if b, err := os.ReadFile(x.Kept.Child); err != nil || string(b) != fmt.Sprintf("child %d\n", c.Index) {
				t.Errorf("%s: its version at %q: %q %v", c.Name, x.Kept.Child, b, err)
			}
			if b, err := os.ReadFile(x.Kept.Marked); err != nil || !strings.Contains(string(b), "<<<<<<< parent\n") {
				t.Errorf("%s: the marked merge at %q: %q %v", c.Name, x.Kept.Marked, b, err)
			}
		}
	}
}
