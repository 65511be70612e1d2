package orchestrator

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// Job is a call of the bash tool that goes on past its blocking budget. It ends exactly
// once: when its script ends, or when it is killed; nothing after its end changes it.
type Job struct {
	id     string
	script string
	r      *runner
	cancel context.CancelFunc

	mu       sync.Mutex
	end      *Result        // guarded by mu; set once
	err      error          // guarded by mu
	artifact *os.File       // guarded by mu
	state    JobState       // guarded by mu: where the job is
	persist  func(JobState) // guarded by mu: set by Persist
	forgets  []forgotten    // guarded by mu: execs to forget after the next checkpoint
	written  atomic.Int64   // bytes in the artifact
	saving   sync.Mutex     // one save of the state at a time, in order
	done     chan struct{}
	start    time.Time
}

// ID returns the job's id.
func (j *Job) ID() string { return j.id }

// Script returns the job's script.
func (j *Job) Script() string { return j.script }

// Done is closed when the job has ended.
func (j *Job) Done() <-chan struct{} { return j.done }

// Result returns the result so far: the final one once the job has ended.
func (j *Job) Result() *Result {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.end != nil {
		return j.end
	}
	return j.r.snapshot()
}

// Wait waits for the job's end, or for ctx.
func (j *Job) Wait(ctx context.Context) (*Result, error) {
	select {
	case <-j.done:
		j.mu.Lock()
		defer j.mu.Unlock()
		return j.end, j.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Kill ends a live job at once, as killed, with the output it has; its process groups are
// then signalled (TERM, then KILL after the kernel's grace). Killing an ended job does
// nothing.
func (j *Job) Kill() {
	j.mu.Lock()
	if j.end != nil {
		j.mu.Unlock()
		return
	}
	res := j.r.snapshot()
	for i := range res.Steps {
		res.Steps[i].Running = false
	}
	res.End = End{Kind: Killed, Status: 137, Job: j.id}
	j.settle(res, nil)
	j.mu.Unlock()
	j.cancel()
}

// settle ends the job; the caller holds mu.
func (j *Job) settle(res *Result, err error) {
	j.end, j.err = res, err
	if j.artifact != nil {
		j.artifact.Close()
		j.artifact = nil
	}
	close(j.done)
}

// finish is the script's own end; after a kill it changes nothing.
func (j *Job) finish(res *Result, err error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.end != nil {
		return
	}
	j.settle(res, err)
}

// write keeps output in the artifact file, until the end.
func (j *Job) write(p []byte) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.artifact != nil && j.end == nil {
		n, _ := j.artifact.Write(p)
		j.written.Add(int64(n))
	}
}

// jobs holds a session's jobs.
type jobs struct {
	mu   sync.Mutex
	all  map[string]*Job // guarded by mu
	next int             // guarded by mu
}

// Jobs lists the session's jobs, live and ended.
func (s *Session) Jobs() []*Job {
	s.jobs.mu.Lock()
	defer s.jobs.mu.Unlock()
	out := make([]*Job, 0, len(s.jobs.all))
	for _, j := range s.jobs.all {
		out = append(out, j)
	}
	return out
}

// Job returns the job with an id.
func (s *Session) Job(id string) (*Job, error) {
	s.jobs.mu.Lock()
	defer s.jobs.mu.Unlock()
	if j := s.jobs.all[id]; j != nil {
		return j, nil
	}
	return nil, &NotFoundError{What: "job", ID: id}
}

// NotFoundError names something a session does not have.
type NotFoundError struct{ What, ID string }

func (e *NotFoundError) Error() string { return fmt.Sprintf("no %s %s", e.What, e.ID) }

// Code is the stable code of the error.
func (e *NotFoundError) Code() string { return "not_found" }

// runBudgeted runs a call as a job and waits for it at most budget (budget 0: to its end):
// a job that ends in time gives its own result; one that does not gives the result so far,
// settled detached with the job's id, and goes on.
func (s *Session) runBudgeted(ctx context.Context, call Call, budget time.Duration) (*Result, error) {
	j, err := s.startJob(call)
	if err != nil {
		return nil, err
	}
	var timeout <-chan time.Time
	if budget > 0 {
		t := time.NewTimer(budget)
		defer t.Stop()
		timeout = t.C
	}
	select {
	case <-j.done:
		return j.Wait(context.Background())
	case <-ctx.Done():
		j.Kill()
		return nil, ctx.Err()
	case <-timeout:
	}
	res := j.Result()
	if res.End.Kind != "" { // ended while the snapshot was taken
		return res, nil
	}
	res.End = End{Kind: Detached, Job: j.id}
	return res, nil
}

// startJob starts a call's script in the background, on the session's own lifetime.
func (s *Session) startJob(call Call) (*Job, error) {
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	if closed {
		return nil, ErrClosed
	}
	s.jobs.mu.Lock()
	s.jobs.next++
	id := fmt.Sprintf("%s-j%d", s.id, s.jobs.next)
	s.jobs.mu.Unlock()
	j := &Job{id: id, script: call.Script, done: make(chan struct{}), start: time.Now()}
	if call.Artifact != "" {
		f, err := os.OpenFile(call.Artifact, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
		if err != nil {
			return nil, fmt.Errorf("job %s: artifact: %w", id, err)
		}
		j.artifact = f
	}
	live := call.Live
	call.Live = func(step, fd int, data []byte) {
		j.write(data)
		if live != nil {
			live(step, fd, data)
		}
	}
	r, err := s.newRunner(call)
	if err != nil {
		if j.artifact != nil {
			j.artifact.Close()
		}
		return nil, err
	}
	j.r = r
	r.job = j
	s.jobs.mu.Lock()
	if s.jobs.all == nil {
		s.jobs.all = map[string]*Job{}
	}
	s.jobs.all[id] = j
	s.jobs.mu.Unlock()
	s.goOn(j, r)
	return j, nil
}

// finishJob runs a job's script to its end and settles the job.
func (s *Session) finishJob(j *Job, r *runner, ctx context.Context) {
	res, err := r.run(ctx)
	if err != nil && !errors.Is(err, context.Canceled) {
		res.End = End{Kind: Failed, Status: 1, Message: err.Error(), Job: j.id}
		err = nil
	}
	r.checkpoint(JobState{Stmt: -1, Ended: true, Result: res})
	j.finish(res, err)
}
