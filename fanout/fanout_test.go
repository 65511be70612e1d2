package fanout

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/paddockhq/paddock/daemon/api"
	"github.com/paddockhq/paddock/orchestrator"
)

// spawner is a Spawner whose children record when they were cloned and ran.
type spawner struct {
	mu       sync.Mutex
	cloned   int
	early    []string // children that ran before the first wave was cloned
	running  atomic.Int32
	most     atomic.Int32
	closed   bool
	parallel int
}

func (s *spawner) Workspace() string { return "/w" }
func (s *spawner) Close()            { s.closed = true }

func (s *spawner) Child(_ context.Context, i int, name, script string, spawned func()) Child {
	n := s.running.Add(1)
	defer s.running.Add(-1)
	for m := s.most.Load(); n > m && !s.most.CompareAndSwap(m, n); m = s.most.Load() {
	}
	s.mu.Lock()
	s.cloned++
	s.mu.Unlock()
	spawned()
	s.mu.Lock()
	if i < s.parallel && s.cloned < s.parallel {
		s.early = append(s.early, name)
	}
	s.mu.Unlock()
	c := Child{Index: i, Name: name, End: orchestrator.Finished,
		Clone: &api.CloneReport{Warnings: []string{"no reflinks: " + name}}}
	switch i % 3 {
	case 1:
		c.Status = 1
	case 2:
		c.Conflicts = []Conflict{{ConflictedPath: api.ConflictedPath{Path: "x"}}}
	}
	return c
}

// The first wave is cloned before any of it runs; no more than Parallel run at once; each
// child is told once as it ends; a warning of one kind is told once; the report counts the
// children that failed and the paths that conflicted; the root is closed at the end.
func TestRun(t *testing.T) {
	for _, c := range []struct{ n, parallel int }{{1, 1}, {6, 2}, {7, 0}, {9, 3}, {4, 9}} {
		want := c.parallel
		if want < 1 || want > c.n {
			want = c.n
		}
		sp := &spawner{parallel: want}
		var ends, warns []string
		var mu sync.Mutex
		rep := Run(context.Background(), sp, Options{N: c.n, Parallel: c.parallel, Script: "true",
			Ended: func(ended, n int, ch Child) { mu.Lock(); ends = append(ends, ch.Name); mu.Unlock() },
			Warn:  func(w string) { warns = append(warns, w) }})
		if len(sp.early) > 0 {
			t.Errorf("%+v: %v ran before the first wave was cloned", c, sp.early)
		}
		if m := int(sp.most.Load()); m > want {
			t.Errorf("%+v: %d children at once, want at most %d", c, m, want)
		}
		if len(ends) != c.n || len(warns) != 1 || !strings.HasPrefix(warns[0], "no reflinks") || !sp.closed {
			t.Errorf("%+v: ends %v, warnings %v, closed %v", c, ends, warns, sp.closed)
		}
		failed, conflicts := 0, 0
		for i := range c.n {
			if i%3 == 1 {
				failed++
			}
			if i%3 == 2 {
				conflicts++
			}
		}
		if rep.Failed != failed || rep.Conflicts != conflicts || len(rep.Children) != c.n || rep.Workspace != "/w" {
			t.Errorf("%+v: report %+v", c, rep)
		}
		for i, ch := range rep.Children {
			if ch.Index != i || ch.Taken == nil || ch.Conflicts == nil {
				t.Errorf("%+v: child %d %+v", c, i, ch)
			}
		}
	}
}

// A child's line as it ends: its end, status and counts; where its versions of conflicted
// paths are, when it has any.
func TestChildString(t *testing.T) {
	t.Parallel()
	c := Child{Name: "child-1", End: orchestrator.Finished, Taken: make([]api.Change, 2), Merged: make([]api.Change, 1)}
	if got, want := c.String(), "child-1 finished (status 0): 2 taken, 1 merged, 0 conflicts"; got != want {
		t.Errorf("%q, want %q", got, want)
	}
	c.End, c.Status, c.Conflicts, c.Dir = orchestrator.Exited, 3, make([]Conflict, 1), "/s/child-1"
	if got, want := c.String(), "child-1 exited (status 3): 2 taken, 1 merged, 1 conflicts\n  child-1's versions of the conflicted paths are in /s/child-1/conflicts"; got != want {
		t.Errorf("%q, want %q", got, want)
	}
}
