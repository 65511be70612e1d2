package orchestrator

import (
	"context"
	"errors"
	"testing"
)

// The tables hold: every state is reached and can end; a session and a job end once.
// law: job_ends_once, job_end_is_final
func TestLifeTables(t *testing.T) {
	t.Parallel()
	if err := sessionLife.Check(); err != nil {
		t.Error(err)
	}
	if err := jobLife.Check(); err != nil {
		t.Error(err)
	}
	for _, s := range []sessionState{sessionOpening, sessionLive, sessionClosing} {
		if sessionLife.Final(s) {
			t.Errorf("session state %s is final", s)
		}
	}
	if !sessionLife.Final(sessionClosed) {
		t.Error("a closed session can move")
	}
	for _, s := range []jobState{jobEnded, jobKilled} {
		if !jobLife.Final(s) {
			t.Errorf("job state %s can move", s)
		}
	}
	// A job's end is its first: a kill after the script's end, or the end after a kill,
	// changes nothing.
	for _, evs := range [][]jobEvent{{jobFinish, jobKill}, {jobKill, jobFinish}, {jobDetach, jobKill, jobFinish, jobDetach}} {
		j := &Job{life: jobLife.Start}
		var first jobState
		for _, ev := range evs {
			if j.move(ev) && jobLife.Final(j.life) && first == "" {
				first = j.life
			}
		}
		if j.life != first {
			t.Errorf("%v: ended %s, then moved to %s", evs, first, j.life)
		}
	}
}

// A closed session takes no request and starts no job; closing it again does nothing.
func TestClosedSessionRefuses(t *testing.T) {
	t.Parallel()
	s := openLocal(t, t.TempDir(), Config{})
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if s.state != sessionClosed {
		t.Fatalf("after Close the session is %s", s.state)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("a second Close: %v", err)
	}
	if _, err := s.Ping(context.Background()); !errors.Is(err, ErrClosed) {
		t.Fatalf("ping of a closed session: %v", err)
	}
	if _, err := s.startJob(Call{Script: "true"}); !errors.Is(err, ErrClosed) {
		t.Fatalf("a job of a closed session: %v", err)
	}
}
