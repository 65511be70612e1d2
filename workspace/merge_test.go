package workspace

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// gitMerge is the oracle of line merges: git merge-file itself, run by the test on its own
// files, with neither the system's nor the user's configuration.
func gitMerge(t testing.TB) merger {
	dir := t.TempDir()
	var mu sync.Mutex
	n := 0
	return func(base, parent, child string) (string, bool, bool) {
		mu.Lock()
		n++
		d := filepath.Join(dir, fmt.Sprint(n))
		mu.Unlock()
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
		for name, data := range map[string]string{"b": base, "p": parent, "c": child} {
			if err := os.WriteFile(filepath.Join(d, name), []byte(data), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		cmd := exec.Command("git", "merge-file", "-p", "-L", "parent", "-L", "base", "-L", "child", "p", "b", "c")
		cmd.Dir = d
		cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", "HOME="+d)
		out, err := cmd.Output()
		var ee *exec.ExitError
		switch {
		case err == nil:
			return string(out), true, true
		case errors.As(err, &ee) && ee.ExitCode() > 0 && ee.ExitCode() < 128:
			return string(out), false, true
		case errors.As(err, &ee) && ee.ExitCode() == 255:
			return "", false, false // binary
		}
		t.Fatalf("git merge-file: %v", err)
		return "", false, false
	}
}

// randomText is a file of a few short lines from a small alphabet, so that random edits
// often meet on the same lines and often do not.
func randomText(rng *rand.Rand) []string {
	lines := make([]string, 2+rng.IntN(12))
	for i := range lines {
		lines[i] = string(rune('a' + rng.IntN(6)))
	}
	return lines
}

// editLines changes, inserts or removes a few lines of a text.
func editLines(rng *rand.Rand, lines []string) []string {
	out := append([]string(nil), lines...)
	for range 1 + rng.IntN(3) {
		i := rng.IntN(len(out) + 1)
		switch rng.IntN(3) {
		case 0: // insert
			out = append(out[:i], append([]string{string(rune('p' + rng.IntN(6)))}, out[i:]...)...)
		case 1: // remove
			if i < len(out) {
				out = append(out[:i], out[i+1:]...)
			}
		default: // change
			if i < len(out) {
				out[i] = string(rune('p' + rng.IntN(6)))
			}
		}
	}
	return out
}

func text(lines []string, final bool) string {
	s := strings.Join(lines, "\n")
	if final {
		s += "\n"
	}
	return s
}

// Over random line edits of text files by the parent and the child, the hand-back merges
// exactly as git merge-file does: a clean merge is the parent's new content and is
// reported merged; a conflicting one leaves the parent's content, keeps the child's
// version and git's marked merge under conflicts/, and is reported a conflict naming both.
//
// law: cow_merge_clean
// law: cow_merge_marked
func TestHandbackLineMergeOracle(t *testing.T) {
	needGit(t)
	oracle := gitMerge(t)
	rng := rand.New(rand.NewPCG(20, 3))
	n := 60
	if testing.Short() {
		n = 20
	}
	var clean, marked int
	for i := range n {
		// Several files per workspace, each edited on both sides.
		b, p, c := tree{}, tree{}, tree{}
		for f := range 4 {
			name := fmt.Sprintf("f%d.txt", f)
			base := randomText(rng)
			final := rng.IntN(4) > 0
			b[name] = node{Kind: File, Data: text(base, final)}
			p[name] = node{Kind: File, Data: text(editLines(rng, base), final)}
			c[name] = node{Kind: File, Data: text(editLines(rng, base), final)}
		}
		parent, dir := ws(t, b, p, c)
		rep, err := Handback(context.Background(), dir)
		if err != nil {
			t.Fatal(err)
		}
		r, k := readTree(t, parent), readTree(t, filepath.Join(dir, ConflictsDir))
		o := outcomeOfReport(rep)
		if bad := checkLaws(b, p, c, r, k, o, oracle); len(bad) > 0 {
			t.Fatalf("case %d:\nbase %v\nparent %v\nchild %v\nresult %v\n%s", i, b, p, c, r, strings.Join(bad, "\n"))
		}
		for name := range b {
			want, ok, _ := lineMergeOf(oracle, b, p, c, name)
			switch {
			case !mergeable(b, p, c, name):
			case ok:
				clean++
				if r[name] != want {
					t.Fatalf("case %d: %s = %q, git merge-file gives %q", i, name, r[name].Data, want.Data)
				}
			default:
				marked++
			}
		}
		for _, x := range rep.Conflicts {
			if x.Saved != ConflictsDir+"/"+x.Path || x.Marked != ConflictsDir+"/"+x.Path+".merge" {
				t.Errorf("case %d: conflict %+v: the child's version and the marked merge not where the report says", i, x)
			}
		}
	}
	if clean < n/2 || marked < n/2 {
		t.Fatalf("the edits made %d clean merges and %d conflicting ones: too few of one", clean, marked)
	}
	t.Logf("%d clean merges and %d conflicting ones, each as git merge-file makes it", clean, marked)
}

// Rows of the table with line merges: lines both changed merge; a conflict keeps the
// child's version and the marked merge; a binary file, a mode changed on one side, or a
// symlink keep today's rows.
func TestHandbackLineMergeRows(t *testing.T) {
	needGit(t)
	base := "one\ntwo\nthree\nfour\nfive\n"
	for _, c := range []struct {
		name                string
		base, parent, child tree
		want                tree
		merged              []string
		conflicts           []string
		marked              map[string]string // path -> where its marked merge is
	}{
		{name: "different lines merge",
			base:   tree{"a": {Kind: File, Data: base}},
			parent: tree{"a": {Kind: File, Data: "ONE\ntwo\nthree\nfour\nfive\n"}},
			child:  tree{"a": {Kind: File, Data: "one\ntwo\nthree\nfour\nFIVE\n"}},
			want:   tree{"a": {Kind: File, Data: "ONE\ntwo\nthree\nfour\nFIVE\n"}},
			merged: []string{"a"}},
		{name: "an executable merges and stays executable",
			base:   tree{"a": {Kind: File, Data: base, Exec: true}},
			parent: tree{"a": {Kind: File, Data: "ONE\ntwo\nthree\nfour\nfive\n", Exec: true}},
			child:  tree{"a": {Kind: File, Data: "one\ntwo\nthree\nfour\nFIVE\n", Exec: true}},
			want:   tree{"a": {Kind: File, Data: "ONE\ntwo\nthree\nfour\nFIVE\n", Exec: true}},
			merged: []string{"a"}},
		{name: "the same line conflicts",
			base:      tree{"a": {Kind: File, Data: base}},
			parent:    tree{"a": {Kind: File, Data: "one\nTWO\nthree\nfour\nfive\n"}},
			child:     tree{"a": {Kind: File, Data: "one\n2\nthree\nfour\nfive\n"}},
			want:      tree{"a": {Kind: File, Data: "one\nTWO\nthree\nfour\nfive\n"}},
			conflicts: []string{"a"}, marked: map[string]string{"a": "a.merge"}},
		{name: "a marked merge's name taken by a saved path",
			base: tree{"a": {Kind: File, Data: base}, "a.merge": {Kind: File, Data: "x\x00"}},
			parent: tree{"a": {Kind: File, Data: "one\nTWO\nthree\nfour\nfive\n"},
				"a.merge": {Kind: File, Data: "y\x00"}},
			child: tree{"a": {Kind: File, Data: "one\n2\nthree\nfour\nfive\n"},
				"a.merge": {Kind: File, Data: "z\x00"}},
			want: tree{"a": {Kind: File, Data: "one\nTWO\nthree\nfour\nfive\n"},
				"a.merge": {Kind: File, Data: "y\x00"}},
			conflicts: []string{"a", "a.merge"}, marked: map[string]string{"a": "a.merge.merge"}},
		{name: "a binary file conflicts",
			base:      tree{"a": {Kind: File, Data: "one\x00\ntwo\nthree\n"}},
			parent:    tree{"a": {Kind: File, Data: "ONE\x00\ntwo\nthree\n"}},
			child:     tree{"a": {Kind: File, Data: "one\x00\ntwo\nTHREE\n"}},
			want:      tree{"a": {Kind: File, Data: "ONE\x00\ntwo\nthree\n"}},
			conflicts: []string{"a"}},
		{name: "a mode changed by one side conflicts",
			base:      tree{"a": {Kind: File, Data: base}},
			parent:    tree{"a": {Kind: File, Data: "ONE\ntwo\nthree\nfour\nfive\n"}},
			child:     tree{"a": {Kind: File, Data: "one\ntwo\nthree\nfour\nFIVE\n", Exec: true}},
			want:      tree{"a": {Kind: File, Data: "ONE\ntwo\nthree\nfour\nfive\n"}},
			conflicts: []string{"a"}},
		{name: "a symlink's target conflicts",
			base: tree{"l": {Kind: Symlink, Data: "a"}}, parent: tree{"l": {Kind: Symlink, Data: "b"}},
			child: tree{"l": {Kind: Symlink, Data: "c"}}, want: tree{"l": {Kind: Symlink, Data: "b"}},
			conflicts: []string{"l"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			parent, dir := ws(t, c.base, c.parent, c.child)
			rep, err := Handback(context.Background(), dir)
			if err != nil {
				t.Fatal(err)
			}
			if diff := diffTrees(c.want, readTree(t, parent)); diff != "" {
				t.Errorf("parent:\n%s", diff)
			}
			var merged, conflicts []string
			for _, m := range rep.Merged {
				merged = append(merged, m.Path)
			}
			marked := map[string]string{}
			for _, x := range rep.Conflicts {
				conflicts = append(conflicts, x.Path)
				if x.Marked != "" {
					marked[x.Path] = strings.TrimPrefix(x.Marked, ConflictsDir+"/")
					data, err := os.ReadFile(filepath.Join(dir, x.Marked))
					if err != nil || !strings.Contains(string(data), "<<<<<<< parent\n") || !strings.Contains(string(data), ">>>>>>> child\n") {
						t.Errorf("marked merge of %s: %q, %v", x.Path, data, err)
					}
				}
				if x.Saved != "" && c.child[x.Path].Kind == Symlink {
					if target, err := os.Readlink(filepath.Join(dir, x.Saved)); err != nil || target != c.child[x.Path].Data {
						t.Errorf("child's version of %s: %q, %v", x.Path, target, err)
					}
				} else if x.Saved != "" {
					if data, err := os.ReadFile(filepath.Join(dir, x.Saved)); err != nil || string(data) != c.child[x.Path].Data {
						t.Errorf("child's version of %s: %q, %v", x.Path, data, err)
					}
				}
			}
			if fmt.Sprint(merged) != fmt.Sprint(c.merged) || fmt.Sprint(conflicts) != fmt.Sprint(c.conflicts) {
				t.Errorf("merged %v, conflicts %v; want %v, %v", merged, conflicts, c.merged, c.conflicts)
			}
			if c.marked == nil {
				c.marked = map[string]string{}
			}
			if fmt.Sprint(marked) != fmt.Sprint(c.marked) {
				t.Errorf("marked merges %v, want %v", marked, c.marked)
			}
			if rep.Counts.Merged != len(c.merged) || rep.Counts.Changed != len(c.merged)+len(c.conflicts)+len(rep.Taken) {
				t.Errorf("counts %+v", rep.Counts)
			}
		})
	}
}

// The merge runs the hardened git: a repository around the workspace that names programs
// (here a fake git's hooks and an external merge driver) runs none of them, and its
// configured conflict style does not change the marked merge.
//
// law: host_git_hardened
func TestLineMergeHardened(t *testing.T) {
	needGit(t)
	tmp := t.TempDir()
	git(t, tmp, "init", "-q")
	ran := filepath.Join(tmp, "ran")
	prog := filepath.Join(tmp, "prog.sh")
	if err := os.WriteFile(prog, []byte("#!/bin/sh\ntouch "+ran+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, kv := range [][2]string{
		{"merge.conflictStyle", "diff3"}, {"core.fsmonitor", prog}, {"core.pager", prog},
		{"merge.x.driver", prog + " %O %A %B"}, {"core.hooksPath", tmp},
	} {
		git(t, tmp, "config", kv[0], kv[1])
	}
	os.WriteFile(filepath.Join(tmp, ".gitattributes"), []byte("* merge=x\n"), 0o644)
	ws := filepath.Join(tmp, "ws")
	p, b, c := filepath.Join(tmp, "p"), filepath.Join(tmp, "b"), filepath.Join(tmp, "c")
	os.WriteFile(b, []byte("a\nb\n"), 0o644)
	os.WriteFile(p, []byte("A\nb\n"), 0o644)
	os.WriteFile(c, []byte("x\nb\n"), 0o644)
	os.Mkdir(ws, 0o700)
	out, clean, ok, err := lineMerge(context.Background(), ws, p, b, c)
	if err != nil || !ok || clean {
		t.Fatalf("merge: clean %v ok %v err %v", clean, ok, err)
	}
	if strings.Contains(string(out), "|||||||") {
		t.Errorf("the repository's conflict style was used:\n%s", out)
	}
	if _, err := os.Stat(ran); err == nil {
		t.Error("a program the repository names ran")
	}
}

// What a line merge reads is read beneath its root following no symlink: a parent that
// swapped a file, or a directory above it, for a symlink to a file outside gets an error,
// never that file's content merged into its workspace.
func TestMergeReadsFollowNoSymlink(t *testing.T) {
	t.Parallel()
	root, outside := t.TempDir(), t.TempDir()
	secret := filepath.Join(outside, "secret")
	os.WriteFile(secret, []byte("secret\n"), 0o600)
	os.MkdirAll(filepath.Join(root, "d"), 0o755)
	os.WriteFile(filepath.Join(root, "d", "ok"), []byte("ok\n"), 0o644)
	os.Symlink(secret, filepath.Join(root, "d", "link"))
	os.Symlink(outside, filepath.Join(root, "up"))
	if b, err := readBeneath(root, "d/ok", 100); err != nil || string(b) != "ok\n" {
		t.Fatalf("d/ok: %q %v", b, err)
	}
	for _, rel := range []string{"d/link", "up/secret", "../" + filepath.Base(outside) + "/secret"} {
		if b, err := readBeneath(root, rel, 100); err == nil {
			t.Errorf("%s read %q", rel, b)
		}
	}
	if _, err := readBeneath(root, "d/ok", 2); err == nil {
		t.Error("a file over the limit was read")
	}
}

// A hand-back holds at most maxMergesHeld of merged files in memory: a file both changed
// past it is not merged but kept as the parent's, its child's version saved, nothing lost.
// law: cow_conflict_reported
func TestHandbackBoundsMergesHeld(t *testing.T) {
	needGit(t)
	const n, merge = 10, "ONE\ntwo\nthree\nfour\nFIVE\n"
	defer func(m int64) { maxMergesHeld = m }(maxMergesHeld)
	maxMergesHeld = 3 * int64(len(merge))
	base, parent, child := tree{}, tree{}, tree{}
	for i := range n {
		p := fmt.Sprintf("f%d", i)
		base[p] = node{Kind: File, Data: "one\ntwo\nthree\nfour\nfive\n"}
		parent[p] = node{Kind: File, Data: "ONE\ntwo\nthree\nfour\nfive\n"}
		child[p] = node{Kind: File, Data: "one\ntwo\nthree\nfour\nFIVE\n"}
	}
	pdir, dir := ws(t, base, parent, child)
	rep, err := Handback(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Merged) != 3 || len(rep.Conflicts) != n-3 {
		t.Fatalf("%d merged, %d conflicts; want 3 and %d", len(rep.Merged), len(rep.Conflicts), n-3)
	}
	for _, m := range rep.Merged {
		if b, err := os.ReadFile(filepath.Join(pdir, m.Path)); err != nil || string(b) != merge {
			t.Errorf("%s: %q, %v; want the merge", m.Path, b, err)
		}
	}
	for _, c := range rep.Conflicts {
		if b, err := os.ReadFile(filepath.Join(pdir, c.Path)); err != nil || string(b) != parent[c.Path].Data {
			t.Errorf("%s: %q, %v; want the parent's", c.Path, b, err)
		}
		if b, err := os.ReadFile(filepath.Join(dir, c.Saved)); err != nil || string(b) != child[c.Path].Data {
			t.Errorf("%s saved: %q, %v; want the child's", c.Path, b, err)
		}
	}
}
