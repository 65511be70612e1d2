package workspace

import (
	"context"
	"path/filepath"
	"reflect"
	"sync/atomic"
	"testing"
)

// crashScenario is one workspace whose hand-back does every kind of step: takes, removals,
// a directory for a file and a file for a directory (exchanges), same changes, line merges
// (clean, one whose merge is the child's content, and marked), and every kind of conflict.
var crashScenario = struct{ base, parent, child tree }{
	base: spec("a=1", "b=1", "c=1", "d/x=1", "d/y=1", "e/x=1", "f=1", "g/x=1", "l->a", "m/", "r/x=1", "r/y/z=1", "s=1", "u/x=1", "h=1", "v/x=1",
		"mc=1\nm\n1\n", "ms=1\nm\n1\n", "mx=1\nm\n1\n", "w/mc=1\nm\n1\n"),
	parent: spec("a=1", "b=1", "c=p", "d/x=1", "d/y=1", "d/p=p", "h=p", "e/x=1", "e/p=p", "f=1", "g->d", "l->a", "m/", "r/x=1", "r/y/z=1",
		"s=same", "u/x=1", "v/x=1", "mc=2\nm\n1\n", "ms=2\nm\n1\n", "mx=2\nm\n1\n", "w/mc=1\nm\n2\n"),
	child: spec("a=child", "b*=1", "c=c", "d=file", "f/n/x=new", "g/x=1", "g/n=c", "l->b", "n/o/p=new", "n/q/",
		"s=same", "t->a", "u/x=1", "v=file", "mc=1\nm\n2\n", "ms=2\nm\n2\n", "mx=3\nm\n1\n", "w/mc=3\nm\n1\n"),
}

// A hand-back killed (SIGKILL, a separate process) at any point, then rerun, ends with the
// same parent, the same saved conflicts and the same report as an uncut one: on the test's
// own filesystem (byte copies, or reflinks), on XFS (reflinks) and on btrfs (snapshots).
func TestHandbackCrash(t *testing.T) {
	for _, fs := range []string{"", "xfs", "btrfs"} {
		name := fs
		if name == "" {
			name = "tmp"
		}
		t.Run(name, func(t *testing.T) { handbackCrash(t, fs) })
	}
}

func handbackCrash(t *testing.T, fs string) {
	sc := crashScenario
	crashRuns(t, func(t *testing.T) (string, string) { return wsOn(t, fs, sc.base, sc.parent, sc.child) },
		func(points int, _ string, want *Report) bool {
			return points >= 20 && len(want.Conflicts) >= 4 && len(want.Merged) >= 3
		})
}

// crashRuns runs the hand-back of a workspace mk makes, uncut, counting its points (meant
// says whether the run is the scenario meant: a test of a run too small tests nothing);
// then, for each point, of a new one killed there, killed again in the rerun at a point that
// moves with it, and run to its end: each must end with the uncut run's parent, saved
// conflicts and report, and nothing else left in the workspace.
func crashRuns(t *testing.T, mk func(*testing.T) (parent, dir string), meant func(points int, parent string, want *Report) bool) {
	parent, dir := mk(t)
	var count atomic.Int64
	hook = func(string) { count.Add(1) }
	want, err := Handback(context.Background(), dir)
	hook = nil
	if err != nil {
		t.Fatal(err)
	}
	points := int(count.Load())
	wantTree, wantSaved := readTree(t, parent), readTree(t, filepath.Join(dir, ConflictsDir))
	norm := func(r *Report) Report { c := *r; c.Parent, c.Dir = "", ""; return c }
	if !meant(points, parent, want) {
		t.Fatalf("the scenario is not as meant: %d points, %+v", points, want)
	}
	check := func(t *testing.T, parent, dir string, got *Report) {
		t.Helper()
		if diff := diffTrees(wantTree, readTree(t, parent)); diff != "" {
			t.Errorf("parent differs from the uncut hand-back:\n%s", diff)
		}
		if diff := diffTrees(wantSaved, readTree(t, filepath.Join(dir, ConflictsDir))); diff != "" {
			t.Errorf("saved conflicts differ from the uncut hand-back:\n%s", diff)
		}
		if !reflect.DeepEqual(norm(got), norm(want)) {
			t.Errorf("report = %+v\nwant %+v", norm(got), norm(want))
		}
		if rest := readTree(t, dir, ConflictsDir, ManifestName, ReportName); len(rest) > 0 {
			t.Errorf("left in the workspace: %v", rest)
		}
	}
	for k := 1; k <= points; k++ {
		parent, dir := mk(t)
		if !runHelper(t, dir, k) {
			t.Fatalf("the hand-back was not killed at point %d of %d", k, points)
		}
		// A second cut in the rerun, at a point that moves with k, before the last run.
		runHelper(t, dir, 1+(k*7)%points)
		got, err := Handback(context.Background(), dir)
		if err != nil {
			t.Fatalf("rerun after a kill at point %d: %v", k, err)
		}
		check(t, parent, dir, got)
		if t.Failed() {
			t.Fatalf("after a kill at point %d", k)
		}
	}
	t.Logf("killed at each of %d points, rerun, same result", points)
}
