package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/paddockhq/paddock/errdefs"
	"github.com/paddockhq/paddock/internal/peer"

	"github.com/paddockhq/paddock/client"
	"github.com/paddockhq/paddock/daemon/api"
	"github.com/paddockhq/paddock/orchestrator"
	"github.com/paddockhq/paddock/transport/docker"
)

// needDocker skips a test when no Docker engine answers (fails it under
// PADDOCK_REQUIRE_INTEGRATION=1).
func needDocker(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	cli, err := docker.Connect(ctx)
	if err == nil {
		cli.Close()
		return
	}
	peer.Missing(t, "no Docker engine: %v", err)
}

func nextEvent(t *testing.T, st *client.Stream, kind string) api.Event {
	t.Helper()
	for {
		e, err := st.Next()
		if err != nil {
			t.Fatalf("waiting for %s: %v", kind, err)
		}
		if e.Kind == kind {
			return e
		}
	}
}

// The API end to end on docker sessions: a step that asks, answered from a second client
// over the event stream; an isolated child's changes handed back; a detached job waited on
// and another killed.
func TestDaemonDockerSession(t *testing.T) {
	needDocker(t)
	c := serveTest(t, "kernelTransport:\n  kind: docker\nshell:\n  rules:\n    - {action: ask, command: touch}\n")
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	ws := t.TempDir()
	os.WriteFile(filepath.Join(ws, "kept.txt"), []byte("parent\n"), 0o644)
	s, err := c.Open(ctx, api.OpenRequest{Workspace: ws, BlockingBudget: "2s"})
	if err != nil {
		t.Fatal(err)
	}
	if s.Transport != "docker" {
		t.Fatalf("transport %q", s.Transport)
	}
	second, err := client.New(c.Host())
	if err != nil {
		t.Fatal(err)
	}
	defer second.Close()
	st, err := second.Events(ctx, s.ID, api.StreamInteractive)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()

	type ran struct {
		r   api.BashResponse
		err error
	}
	done := make(chan ran, 1)
	go func() {
		r, err := c.Bash(ctx, s.ID, api.BashRequest{Script: "cat /proc/1/cgroup >/dev/null; touch made.txt; echo ok"})
		done <- ran{r, err}
	}()
	q := nextEvent(t, st, orchestrator.EventQuestion)
	if err := second.Answer(ctx, s.ID, q.Question.ID, api.AnswerRequest{Approve: true}); err != nil {
		t.Fatal(err)
	}
	if r := <-done; r.err != nil || r.r.End.Kind != orchestrator.Finished {
		t.Fatalf("%v %+v", r.err, r.r.Result)
	}
	if _, err := os.Stat(filepath.Join(ws, "made.txt")); err != nil {
		t.Errorf("the approved step's file: %v", err)
	}
	if err := second.Answer(ctx, s.ID, q.Question.ID, api.AnswerRequest{}); !isGone(err) {
		t.Errorf("a late answer: %v", err)
	}

	child, err := c.Spawn(ctx, s.ID, api.SpawnRequest{Name: "iso", Workspace: orchestrator.Isolated})
	if err != nil {
		t.Fatal(err)
	}
	if r, err := c.Bash(ctx, child.ID, api.BashRequest{Script: "echo child > new.txt; echo changed > kept.txt"}); err != nil || r.End.Kind != orchestrator.Finished {
		t.Fatalf("child: %v %+v", err, r.Result)
	}
	closed, err := c.CloseSession(ctx, child.ID)
	if err != nil {
		t.Fatal(err)
	}
	if closed.Handback == nil || len(closed.Handback.Taken) != 2 {
		t.Fatalf("hand-back %+v", closed.Handback)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "new.txt")); string(b) != "child\n" {
		t.Errorf("new.txt after the hand-back: %q", b)
	}

	gate := filepath.Join(ws, "go-on")
	r, err := c.Bash(ctx, s.ID, api.BashRequest{Script: "echo start; while [ ! -e go-on ]; do sleep 0.05; done; echo end"})
	if err != nil || r.End.Kind != orchestrator.Detached {
		t.Fatalf("%v %+v", err, r.Result)
	}
	os.WriteFile(gate, nil, 0o644)
	j, err := c.Wait(ctx, s.ID, r.End.Job, "")
	if err != nil || j.Result.End.Kind != orchestrator.Finished || !strings.HasSuffix(j.Result.Steps[len(j.Result.Steps)-1].Stdout.Text, "end\n") {
		t.Fatalf("waited: %v %+v", err, j.Result)
	}
	r, err = c.Bash(ctx, s.ID, api.BashRequest{Script: "sleep 600"})
	if err != nil || r.End.Kind != orchestrator.Detached {
		t.Fatalf("%v %+v", err, r.Result)
	}
	j, err = c.Kill(ctx, s.ID, r.End.Job)
	if err != nil || j.Result.End.Kind != orchestrator.Killed {
		t.Fatalf("killed: %v %+v", err, j.Result)
	}
	// Its process is gone from the sandbox (TERM, then KILL after the kernel's grace).
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		r, err := c.Bash(ctx, s.ID, api.BashRequest{Script: "ps -eo args"})
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(r.Steps[0].Stdout.Text, "sleep 600") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the killed job's process is still there:\n%s", orchestrator.ResultOf(r.Result))
		}
	}
}

// isGone reports whether err is a late answer's.
func isGone(err error) bool {
	c, _ := errdefs.Of(err)
	return c == errdefs.Gone
}
