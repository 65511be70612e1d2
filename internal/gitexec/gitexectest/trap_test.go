package gitexectest

import (
	"slices"
	"testing"
)

// Plain git, run the way a user would on a trapped repository, runs every program the
// traps name: a test that finds no mark after the host ran on such a repository shows that
// the host's git ran none, not that the traps are dead.
func TestTrapsSpring(t *testing.T) {
	tr := New(t)
	for _, l := range Layouts {
		got := tr.Live(t, l)
		if miss := Missing(LiveMarks(l), got); len(miss) > 0 {
			t.Errorf("%s: plain git left %v, not %v", l, got, miss)
		}
	}
	if !slices.IsSorted(Marks) {
		t.Errorf("Marks not sorted: %v", Marks)
	}
}
