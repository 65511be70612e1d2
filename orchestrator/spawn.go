package orchestrator

import (
	"context"
	"fmt"
	"maps"
	"sync"
	"time"

	"github.com/paddockhq/paddock/errdefs"
	"github.com/paddockhq/paddock/transport"
	"github.com/paddockhq/paddock/workspace"
)

// A program in the sandbox can fan out too: session.spawn starts a child running a script,
// session.collect waits for it, closes it and returns its result with its hand-back.

// Host request types of children.
const (
	TypeSpawn   = "session.spawn"
	TypeCollect = "session.collect"
)

// SpawnRequest is the body of session.spawn.
type SpawnRequest struct {
	Name      string   `json:"name"`
	Workspace string   `json:"workspace"` // shared (default) or isolated
	Script    string   `json:"script"`
	Env       []string `json:"env,omitempty"`
}

// Spawned is the reply to session.spawn.
type Spawned struct {
	Child string `json:"child"`
}

// CollectRequest is the body of session.collect.
type CollectRequest struct {
	Child string `json:"child"`
	// TimeoutMillis bounds the wait; 0 waits for the child's end.
	TimeoutMillis int `json:"timeout_ms,omitempty"`
}

// Collected is the reply to session.collect, and a child's report.
type Collected struct {
	Child    string            `json:"child"`
	Name     string            `json:"name"`
	Done     bool              `json:"done"` // false: the wait ended first; collect again
	Result   *Result           `json:"result,omitempty"`
	Handback *workspace.Report `json:"handback,omitempty"`
	Error    string            `json:"error,omitempty"`
}

// childRun is a child started with a script.
type childRun struct {
	s   *Session
	job *Job

	once      sync.Once
	rep       Collected
	collected bool // guarded by the parent's kids.mu: closed and handed back
}

// children holds the children a session started with scripts.
type children struct {
	mu       sync.Mutex
	all      map[string]*childRun // guarded by mu
	reserved int                  // guarded by mu: places held by spawns under way
}

// Keeper keeps the children a session's scripts start, so that a host that dies can take
// them up again (ReopenRun): Prepare names a child and where its kernel listens before it
// starts; Started hands over the child and its job once started (Persist the job to keep
// its place); Ended gives the child's report once it was closed and handed back (collected,
// or closed with the session).
type Keeper interface {
	Prepare(cc *ChildConfig) error
	Started(child *Session, cc ChildConfig, script string, job *Job)
	Ended(rep Collected)
}

// SpawnRun spawns a child and starts its script as a job.
func (s *Session) SpawnRun(ctx context.Context, cc ChildConfig, scriptSrc string) (string, error) {
	if k := s.cfg.Keeper; k != nil {
		if err := k.Prepare(&cc); err != nil {
			return "", err
		}
	}
	c, err := s.Spawn(ctx, cc)
	if err != nil {
		return "", err
	}
	j, err := c.startJob(Call{Script: scriptSrc})
	if err != nil {
		c.Close()
		return "", err
	}
	s.addKid(c, j)
	if k := s.cfg.Keeper; k != nil {
		k.Started(c, cc, scriptSrc, j)
	}
	return c.id, nil
}

func (s *Session) addKid(c *Session, j *Job) {
	s.kids.mu.Lock()
	if s.kids.all == nil {
		s.kids.all = map[string]*childRun{}
	}
	s.kids.all[c.id] = &childRun{s: c, job: j}
	s.kids.mu.Unlock()
}

// ReopenRun takes up a child an earlier host's SpawnRun started, whose kernel listened, as
// ReopenChild does, with its job: the child is collected as if this host had started it. A
// job that ended before is settled with the end its state recorded.
func (s *Session) ReopenRun(ctx context.Context, cc ChildConfig, clone *workspace.CloneReport, k transport.Kernel, job Restore) (*Session, *Job, error) {
	c, err := s.ReopenChild(ctx, cc, clone, k, []Restore{job})
	if err != nil {
		return nil, nil, err
	}
	j, err := c.Job(job.State.ID)
	if err != nil {
		js := job.State
		res := js.Result
		if res == nil {
			res = &Result{End: End{Kind: Failed, Status: 1, Job: js.ID, Message: "its end was not recorded"}}
		}
		j = newJob(js.ID, js.Script, js.Started, 0, jobDetached)
		j.finish(res, nil)
		c.jobs.mu.Lock()
		if c.jobs.all == nil {
			c.jobs.all = map[string]*Job{}
		}
		c.jobs.all[j.id] = j
		c.jobs.mu.Unlock()
	}
	s.addKid(c, j)
	return c, j, nil
}

// Collect waits for a child started by SpawnRun (at most timeout; 0: to its end), then
// closes it — its kernel and every process end, then an isolated workspace is handed back —
// and returns its report. Collecting again returns the same report.
func (s *Session) Collect(ctx context.Context, id string, timeout time.Duration) (Collected, error) {
	s.kids.mu.Lock()
	cr := s.kids.all[id]
	s.kids.mu.Unlock()
	if cr == nil {
		return Collected{}, &NotFoundError{What: "child", ID: id}
	}
	wctx := ctx
	if timeout > 0 {
		var cancel context.CancelFunc
		wctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	select {
	case <-cr.job.Done():
	case <-wctx.Done():
		if ctx.Err() != nil {
			return Collected{}, ctx.Err()
		}
		return Collected{Child: id, Name: cr.s.name}, nil
	}
	cr.once.Do(func() {
		res, _ := cr.job.Wait(ctx)
		cr.rep = Collected{Child: id, Name: cr.s.name, Done: true, Result: res}
		if err := cr.s.Close(); err != nil {
			cr.rep.Error = err.Error()
		}
		cr.rep.Handback = cr.s.Handback()
		if k := s.cfg.Keeper; k != nil {
			k.Ended(cr.rep)
		}
		s.kids.mu.Lock()
		cr.collected = true
		s.kids.mu.Unlock()
	})
	return cr.rep, nil
}

// hostHandlers are the host requests every session serves.
func (s *Session) hostHandlers() map[string]Handler {
	h := s.fsHandlers()
	maps.Copy(h, map[string]Handler{
		TypeSpawn: func(ctx context.Context, req HostRequest) (any, error) {
			var b SpawnRequest
			if err := req.Decode(&b); err != nil {
				return nil, err
			}
			if b.Script == "" {
				return nil, &requestError{code: "bad_request", msg: "session.spawn: a script is needed"}
			}
			release, err := s.reserveChild()
			if err != nil {
				return nil, err
			}
			defer release()
			id, err := s.SpawnRun(ctx, ChildConfig{Name: b.Name, Workspace: b.Workspace, Env: b.Env}, b.Script)
			if err != nil {
				return nil, &requestError{code: "spawn_failed", msg: fmt.Sprintf("session.spawn: %v", err)}
			}
			return Spawned{Child: id}, nil
		},
		TypeCollect: func(ctx context.Context, req HostRequest) (any, error) {
			var b CollectRequest
			if err := req.Decode(&b); err != nil {
				return nil, err
			}
			return s.Collect(ctx, b.Child, time.Duration(b.TimeoutMillis)*time.Millisecond)
		},
	})
	return h
}

// Bounds of the children a sandbox can start.
const (
	DefaultMaxChildren = 16
	DefaultMaxDepth    = 4
)

// SpawnLimitError is a session.spawn refused because a bound was reached.
type SpawnLimitError struct {
	Limit string // children (running at once) or depth
	Max   int
}

func (e *SpawnLimitError) Error() string {
	if e.Limit == "depth" {
		return fmt.Sprintf("session.spawn: refused: children of children are limited to %d levels", e.Max)
	}
	return fmt.Sprintf("session.spawn: refused: at most %d children run at once; collect one first", e.Max)
}

// Code is the stable code of the refusal.
func (e *SpawnLimitError) Code() string { return "spawn_limit" }

// Class is the error's class.
func (e *SpawnLimitError) Class() errdefs.Class { return errdefs.Refused }

// reserveChild holds a place for one more child the sandbox starts, or refuses it when a
// bound is reached; release gives the place back once the child is counted (or failed).
// Requests are served concurrently, so the place is taken under the same lock that counts.
func (s *Session) reserveChild() (release func(), err error) {
	maxDepth := s.cfg.MaxDepth
	if maxDepth <= 0 {
		maxDepth = DefaultMaxDepth
	}
	depth := 0
	for p := s.parent; p != nil; p = p.parent {
		depth++
	}
	if depth+1 > maxDepth {
		return nil, &SpawnLimitError{Limit: "depth", Max: maxDepth}
	}
	maxKids := s.cfg.MaxChildren
	if maxKids <= 0 {
		maxKids = DefaultMaxChildren
	}
	s.kids.mu.Lock()
	defer s.kids.mu.Unlock()
	running := s.kids.reserved
	for _, cr := range s.kids.all {
		if !cr.collected {
			running++
		}
	}
	if running >= maxKids {
		return nil, &SpawnLimitError{Limit: "children", Max: maxKids}
	}
	s.kids.reserved++
	return func() {
		s.kids.mu.Lock()
		s.kids.reserved--
		s.kids.mu.Unlock()
	}, nil
}
