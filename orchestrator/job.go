package orchestrator

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/paddockhq/paddock/errdefs"
	"github.com/paddockhq/paddock/orchestrator/output"
)

// Job is a call of the bash tool that goes on past its blocking budget. It ends exactly
// once: when its script ends, or when it is killed; nothing after its end changes it.
type Job struct {
	id     string
	script string
	r      *runner
	cancel context.CancelFunc

	mu       sync.Mutex
	end      *Result         // guarded by mu; set once
	err      error           // guarded by mu
	artifact *artifact       // guarded by mu; nil once the job ended
	report   *ArtifactReport // guarded by mu: the artifact's, at the end
	state    JobState        // guarded by mu: where the job is, for a new host
	life     jobState        // guarded by mu (jobLife)
	persist  func(JobState)  // guarded by mu: set by Persist
	forgets  []forgotten     // guarded by mu: execs to forget after the next checkpoint
	written  atomic.Int64    // bytes written to the artifact (kept or dropped)
	last     atomic.Int64    // when the job last printed, in Unix nanoseconds
	saving   sync.Mutex      // one save of the state at a time, in order
	done     chan struct{}
	start    time.Time
	cap      int64 // the artifact's cap; 0: none
}

// newJob makes a job, where its life begins: running for a call that starts it, detached for
// one a new host takes up (its caller is gone).
func newJob(id, script string, start time.Time, cap int64, life jobState) *Job {
	return &Job{id: id, script: script, done: make(chan struct{}), start: start, cap: cap, life: life}
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
	if j.ended() {
		return j.end
	}
	res := j.r.snapshot()
	if j.artifact != nil {
		res.Saved = j.artifact.report()
	}
	return res
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
func (j *Job) Kill() { j.kill(End{Kind: Killed, Status: 137}) }

// kill ends a live job at once with end (a kill: Killed), as Kill does.
func (j *Job) kill(end End) {
	j.mu.Lock()
	if !j.move(jobKill) {
		j.mu.Unlock()
		return
	}
	res := j.r.snapshot()
	for i := range res.Steps {
		res.Steps[i].Running = false
	}
	end.Job = j.id
	res.End = end
	art := j.settle(res, nil)
	j.mu.Unlock()
	j.cancel()
	j.close(art)
}

// settle ends the job and takes its artifact, for close; the caller holds mu.
func (j *Job) settle(res *Result, err error) *artifact {
	art := j.artifact
	j.artifact = nil
	if art != nil {
		j.report = art.report()
		res.Saved = j.report
	}
	j.end, j.err = res, err
	return art
}

// close puts the ended job's artifact in order, then tells the job's end. A reader that
// waited for the end finds the file whole.
func (j *Job) close(art *artifact) {
	if art != nil {
		if err := art.finish(); err != nil {
			j.r.s.log.Error("job artifact not put in order", "job", j.id, "file", art.path, "err", err)
		}
	}
	close(j.done)
}

// finish is the script's own end; after a kill it changes nothing.
func (j *Job) finish(res *Result, err error) {
	j.mu.Lock()
	if !j.move(jobFinish) {
		j.mu.Unlock()
		return
	}
	art := j.settle(res, err)
	j.mu.Unlock()
	j.close(art)
}

// artifactReport says what the artifact holds so far; nil without one.
func (j *Job) artifactReport() *ArtifactReport {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.artifact != nil {
		return j.artifact.report()
	}
	return j.report
}

// readArtifact writes to w what the artifact holds of the output's n bytes from off.
func (j *Job) readArtifact(w io.Writer, off, n int64) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.artifact != nil {
		j.artifact.readAt(w, off, n)
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

// Class is the error's class.
func (e *NotFoundError) Class() errdefs.Class { return errdefs.NotFound }

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
	j.mu.Lock()
	j.move(jobDetach) // refused if it ended since: the caller finds its end with Wait
	j.mu.Unlock()
	res.End = End{Kind: Detached, Job: j.id}
	return res, nil
}

// startJob starts a call's script in the background, on the session's own lifetime.
func (s *Session) startJob(call Call) (*Job, error) {
	s.mu.Lock()
	live := s.state == sessionLive
	s.mu.Unlock()
	if !live {
		return nil, ErrClosed
	}
	s.jobs.mu.Lock()
	s.jobs.next++
	id := fmt.Sprintf("%s-j%d", s.id, s.jobs.next)
	s.jobs.mu.Unlock()
	j := newJob(id, call.Script, time.Now(), s.cfg.ArtifactBytes, jobLife.Start)
	j.last.Store(j.start.UnixNano())
	if call.Artifact != "" {
		a, err := createArtifact(call.Artifact, output.Spill{Cap: j.cap})
		if err != nil {
			return nil, fmt.Errorf("job %s: artifact: %w", id, err)
		}
		j.artifact = a
	}
	r, err := s.newRunner(call)
	if err != nil {
		if j.artifact != nil {
			j.artifact.f.Close()
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
	res.Saved = j.artifactReport()
	r.checkpoint(JobState{Stmt: -1, Ended: true, Result: res})
	j.finish(res, err)
}
