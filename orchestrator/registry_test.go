package orchestrator

import (
	"context"
	"testing"
	"time"
)

// ForgetJobs drops ended jobs that are not kept, and never a live one.
func TestForgetJobs(t *testing.T) {
	s := openLocal(t, t.TempDir(), Config{Budget: 100 * time.Millisecond})
	ctx := context.Background()
	quick, err := s.Run(ctx, Call{Script: "true"})
	if err != nil || quick.End.Kind != Finished {
		t.Fatalf("%v %+v", err, quick)
	}
	slow, err := s.Run(ctx, Call{Script: "sleep 30"})
	if err != nil || slow.End.Kind != Detached {
		t.Fatalf("%v %+v", err, slow)
	}
	if n := len(s.Jobs()); n != 2 {
		t.Fatalf("%d jobs before", n)
	}
	s.ForgetJobs(func(string) bool { return false })
	jobs := s.Jobs()
	if len(jobs) != 1 || jobs[0].ID() != slow.End.Job {
		t.Fatalf("after: %d jobs", len(jobs))
	}
	jobs[0].Kill()
	s.ForgetJobs(func(id string) bool { return id == slow.End.Job })
	if len(s.Jobs()) != 1 {
		t.Error("a kept job was dropped")
	}
	s.ForgetJobs(func(string) bool { return false })
	if len(s.Jobs()) != 0 {
		t.Error("an ended job not kept stays")
	}
}
