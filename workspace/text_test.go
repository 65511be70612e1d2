package workspace

import (
	"testing"
	"time"
)

// A hand-back's text gives the counts, a line per path taken, and for each conflict the
// reason, what the parent holds and where the child's version is (or that it removed it).
func TestReportText(t *testing.T) {
	t.Parallel()
	r := &Report{Parent: "/p", Dir: "/w", Counts: Counts{Listed: 5, Changed: 4, Taken: 2, Conflicts: 2, Ignored: 1},
		Taken: []Change{{Path: "a", Change: "added"}, {Path: "b", Change: "removed"}},
		Conflicts: []ConflictedPath{{Path: "c", Reason: ReasonBothChanged, Parent: "file", Saved: "conflicts/c"},
			{Path: "d", Reason: ReasonBothChanged, Parent: "dir"}}}
	want := "handed back /w/copy into /p: 2 taken, 2 conflicts (5 paths listed, 4 changed by the child, 1 new ones ignored)\n" +
		"  A a\n  D b\n" +
		"  C c (" + ReasonBothChanged + "; parent holds file): the child's version is at /w/conflicts/c\n" +
		"  C d (" + ReasonBothChanged + "; parent holds dir): the child removed it\n"
	if got := r.String(); got != want {
		t.Errorf("got:\n%s\nwant:\n%s", got, want)
	}
}

// A clone's text gives where it went, the counts and the time, to the millisecond.
func TestCloneReportText(t *testing.T) {
	t.Parallel()
	c := &CloneReport{Parent: "/p", Dir: "/w", Files: 3, Bytes: 30, Symlinks: 1, Dirs: 2, Cloned: 2, Copied: 1, CopiedB: 10, Elapsed: 1500 * time.Microsecond}
	want := "cloned /p into /w\n  3 files (30 bytes), 1 symlinks, 2 directories\n  2 cloned by extents, 1 copied by bytes (10 bytes)\n  2ms\n"
	if got := c.String(); got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}
