package orchestrator

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/paddockhq/paddock/policy"
)

// askedAtDeath runs a job whose second step asks, on a listening kernel, and cuts its host
// while the question waits: it returns the configuration and the job's state at that moment.
func askedAtDeath(t *testing.T, lt *listenTransport, ws string) (Config, JobState) {
	t.Helper()
	ctx := context.Background()
	cfg := listenConfig(t, lt, ws)
	cfg.Policy = Policy{Rules: []policy.ShellRule{{Action: policy.AskRule, Prefix: []string{"touch"}, Source: "test"}}}
	s, err := Open(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	asked := make(chan Question, 1)
	s.Attach(&funcClient{kind: Interactive, notify: func(e Event) {
		if e.Question != nil {
			asked <- *e.Question
		}
	}})
	var mu sync.Mutex
	var last JobState
	res, err := s.Run(ctx, Call{Script: "echo a; touch asked; echo b", Budget: 50 * time.Millisecond})
	if err != nil || res.End.Kind != Detached {
		t.Fatalf("%v %+v", err, res.End)
	}
	j, err := s.Job(res.End.Job)
	if err != nil {
		t.Fatal(err)
	}
	j.Persist(func(st JobState) {
		mu.Lock()
		last = st
		mu.Unlock()
	})
	if q := <-asked; q.Command != "touch asked" {
		t.Fatalf("the question: %+v", q)
	}
	mu.Lock()
	js := last
	mu.Unlock()
	cut(s) // the host dies while the question waits
	if js.Exec != "" || js.Stmt != 1 {
		t.Fatalf("the job's state when its host died: %+v", js)
	}
	return cfg, js
}

// A job whose step waited for an answer when its host died is asked again by the host that
// takes it up only once that host's clients can attach (Ready), and the question waits for
// one (AttachGrace): a client that attaches after the job asked again is shown the question,
// and its yes runs the step. Asked before Ready, with no client yet, it was refused at once.
func TestReopenAsksAgainOnceReady(t *testing.T) {
	lt := &listenTransport{}
	ws := t.TempDir()
	cfg, js := askedAtDeath(t, lt, ws)
	ready := make(chan struct{})
	cfg.Ready, cfg.AttachGrace = ready, time.Minute
	s := takeUp(t, lt, cfg, nil, js)
	j, err := s.Job(js.ID)
	if err != nil {
		t.Fatal(err)
	}
	awaiting := make(chan struct{}, 1)
	s.clients.mu.Lock()
	s.clients.testAwaiting = func() {
		select {
		case awaiting <- struct{}{}:
		default:
		}
	}
	s.clients.mu.Unlock()
	close(ready)
	// The step asks again and, with no client, waits for one.
	select {
	case <-awaiting:
	case <-time.After(guard):
		t.Fatalf("the job did not ask again: %+v", j.Result().End)
	}
	s.Attach(&funcClient{kind: Interactive, notify: func(e Event) {
		if e.Question != nil {
			go s.Answer(e.Question.ID, Answer{Approve: true, Client: "test"})
		}
	}})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	end, err := j.Wait(ctx)
	if err != nil {
		t.Fatalf("the job after its question was asked again: %v, %+v", err, j.Result().End)
	}
	if end.End.Kind != Finished || len(end.Steps) != 3 || end.Steps[2].Stdout.Text != "b\n" {
		t.Fatalf("the job's end: %s", end)
	}
	if _, err := os.Stat(filepath.Join(ws, "asked")); err != nil {
		t.Errorf("the approved step did not run: %v", err)
	}
}

// When no client attaches within the grace, the question asked again is unanswered, as one
// with nobody to ask is.
//
// law: quiet_is_unanswered
func TestReopenUnansweredAfterGrace(t *testing.T) {
	lt := &listenTransport{}
	ws := t.TempDir()
	cfg, js := askedAtDeath(t, lt, ws)
	ready := make(chan struct{})
	cfg.Ready, cfg.AttachGrace = ready, 200*time.Millisecond
	s := takeUp(t, lt, cfg, nil, js)
	j, err := s.Job(js.ID)
	if err != nil {
		t.Fatal(err)
	}
	close(ready)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	end, err := j.Wait(ctx)
	if err != nil || end.End.Kind != Refused || end.End.Code != "unanswered" {
		t.Fatalf("%v %+v", err, end)
	}
	if _, err := os.Stat(filepath.Join(ws, "asked")); !os.IsNotExist(err) {
		t.Errorf("the unanswered step ran: %v", err)
	}
}
