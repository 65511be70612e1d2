package mcpserver

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"time"

	"github.com/paddockhq/paddock/client"
	"github.com/paddockhq/paddock/daemon/api"
	"github.com/paddockhq/paddock/orchestrator"
)

// Session is the session a server serves: one this process opened (Local), or a daemon's
// reached through its API (Remote). A server is one agent's view of it: the shell its bash
// calls continue is the server's own.
type Session interface {
	// Run runs a call of the bash tool in the server's shell (cd, variables and exports
	// hold from one call to the next); past budget it settles detached with a job id. live,
	// when set, gets the output as it comes.
	Run(ctx context.Context, script string, budget time.Duration, live func(step, fd int, data []byte)) (*orchestrator.Result, error)
	// Cwd is the sandbox directory the shell is in: where relative paths start.
	Cwd() string
	// Request makes a host file request (orchestrator.TypeFSRead, TypeFSGrep, …) with body
	// in, its reply decoded into out.
	Request(ctx context.Context, typ string, in, out any) error
	// Attach attaches a client that answers the session's questions; Answer gives its
	// answer to one.
	Attach(c orchestrator.Client) (detach func(), err error)
	Answer(id string, a orchestrator.Answer) error
	// Wait waits up to budget for a job's end: its result so far, and whether it still runs.
	Wait(ctx context.Context, job string, budget time.Duration) (*orchestrator.Result, bool, error)
	// Kill kills a job and its process groups: its result.
	Kill(ctx context.Context, job string) (*orchestrator.Result, error)
	// Jobs lists the session's jobs.
	Jobs(ctx context.Context) ([]JobInfo, error)
}

// Local is a session of this process, served with a shell of the server's.
func Local(s *orchestrator.Session) Session { return &localSession{s: s} }

type localSession struct {
	s     *orchestrator.Session
	shell orchestrator.Shell
}

func (l *localSession) Run(ctx context.Context, script string, budget time.Duration, live func(step, fd int, data []byte)) (*orchestrator.Result, error) {
	return l.s.Run(ctx, orchestrator.Call{Script: script, Budget: budget, Shell: &l.shell, Live: live})
}

func (l *localSession) Cwd() string {
	if c := l.shell.Cwd(); c != "" {
		return c
	}
	return l.s.Cwd()
}

func (l *localSession) Request(ctx context.Context, typ string, in, out any) error {
	b, err := json.Marshal(in)
	if err != nil {
		return err
	}
	res, err := l.s.Serve(ctx, typ, b)
	if err != nil {
		return err
	}
	// The reply is the type asked for (the session's own); another is read through its JSON.
	if rv, ov := reflect.ValueOf(res), reflect.ValueOf(out); rv.Type() == ov.Type() {
		ov.Elem().Set(rv.Elem())
		return nil
	}
	b, err = json.Marshal(res)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, out)
}

func (l *localSession) Attach(c orchestrator.Client) (func(), error) { return l.s.Attach(c), nil }

func (l *localSession) Answer(id string, a orchestrator.Answer) error { return l.s.Answer(id, a) }

func (l *localSession) Wait(ctx context.Context, id string, budget time.Duration) (*orchestrator.Result, bool, error) {
	j, err := l.s.Job(id)
	if err != nil {
		return nil, false, err
	}
	t := time.NewTimer(budget)
	defer t.Stop()
	select {
	case <-j.Done():
		return j.Result(), false, nil
	case <-t.C:
		return j.Result(), true, nil
	case <-ctx.Done():
		return nil, false, ctx.Err()
	}
}

func (l *localSession) Kill(_ context.Context, id string) (*orchestrator.Result, error) {
	j, err := l.s.Job(id)
	if err != nil {
		return nil, err
	}
	j.Kill()
	<-j.Done()
	return j.Result(), nil
}

func (l *localSession) Jobs(context.Context) ([]JobInfo, error) {
	jobs := []JobInfo{}
	for _, j := range l.s.Jobs() {
		info := JobInfo{ID: j.ID(), Script: j.Script(), Running: true}
		select {
		case <-j.Done():
			info.Running = false
		default:
		}
		jobs = append(jobs, info)
	}
	return jobs, nil
}

// Remote is the session id of the daemon c reaches, served with a shell of the server's:
// the daemon's named shell (api.BashRequest.Shell), so that cd and exports hold from one
// call to the next as they do locally. cwd is the session's starting directory (its
// api.Session.Cwd). A step's output is not sent as progress: the daemon's answer brings it
// whole.
func Remote(c *client.Client, id, cwd string) Session {
	var b [8]byte
	rand.Read(b[:])
	return &remoteSession{c: c, id: id, shell: "mcp-" + hex.EncodeToString(b[:]), cwd: cwd}
}

type remoteSession struct {
	c     *client.Client
	id    string
	shell string

	mu  sync.Mutex
	cwd string // guarded by mu: where the daemon's shell is, as its last answer said
}

func (r *remoteSession) Run(ctx context.Context, script string, budget time.Duration, _ func(step, fd int, data []byte)) (*orchestrator.Result, error) {
	resp, err := r.c.Bash(ctx, r.id, api.BashRequest{Script: script, Budget: budget.String(), Shell: r.shell})
	if err != nil {
		return nil, err
	}
	if resp.Cwd != "" {
		r.mu.Lock()
		r.cwd = resp.Cwd
		r.mu.Unlock()
	}
	return orchestrator.ResultOf(resp.Result), nil
}

func (r *remoteSession) Cwd() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.cwd
}

func (r *remoteSession) Request(ctx context.Context, typ string, in, out any) error {
	op, ok := strings.CutPrefix(typ, "fs.")
	if !ok {
		return fmt.Errorf("mcpserver: %s is not a file request", typ)
	}
	return r.c.FS(ctx, r.id, op, in, out)
}

// Attach opens the session's event stream as an interactive client: the questions it
// brings are c's to answer, until detach closes it.
func (r *remoteSession) Attach(c orchestrator.Client) (func(), error) {
	st, err := r.c.Events(context.Background(), r.id, api.StreamInteractive)
	if err != nil {
		return nil, err
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			e, err := st.Next()
			if err != nil {
				return
			}
			switch e.Kind {
			case api.EventQuestion, api.EventSettled:
				c.Notify(orchestrator.EventOf(e.Kind, e.Question, e.Settled))
			case api.EventClosed:
				return
			}
		}
	}()
	return func() {
		st.Close()
		<-done
	}, nil
}

func (r *remoteSession) Answer(id string, a orchestrator.Answer) error {
	return r.c.Answer(context.Background(), r.id, id, api.AnswerRequest{Approve: a.Approve, ForSession: a.ForSession, Client: a.Client})
}

func (r *remoteSession) Wait(ctx context.Context, id string, budget time.Duration) (*orchestrator.Result, bool, error) {
	j, err := r.c.Wait(ctx, r.id, id, budget.String())
	if err != nil {
		return nil, false, err
	}
	return resultOf(j), !j.Done, nil
}

func (r *remoteSession) Kill(ctx context.Context, id string) (*orchestrator.Result, error) {
	j, err := r.c.Kill(ctx, r.id, id)
	if err != nil {
		return nil, err
	}
	return resultOf(j), nil
}

func (r *remoteSession) Jobs(ctx context.Context) ([]JobInfo, error) {
	list, err := r.c.Jobs(ctx, r.id)
	if err != nil {
		return nil, err
	}
	jobs := []JobInfo{}
	for _, j := range list {
		jobs = append(jobs, JobInfo{ID: j.ID, Script: j.Script, Running: !j.Done})
	}
	return jobs, nil
}

// resultOf is a daemon's job's result; a job still running has none yet.
func resultOf(j api.Job) *orchestrator.Result {
	if j.Result == nil {
		return &orchestrator.Result{}
	}
	return orchestrator.ResultOf(j.Result)
}
