package orchestrator

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"mvdan.cc/sh/v3/expand"
	"mvdan.cc/sh/v3/syntax"

	"github.com/paddockhq/paddock/orchestrator/output"
	"github.com/paddockhq/paddock/script"
	"github.com/paddockhq/paddock/transport"
	"github.com/paddockhq/paddock/transport/wire"
)

// This file lets a job outlive its host. A job reports where it is (JobState) at each
// statement and each exec it sends; a host that keeps those reports can, after it died,
// take the job up again on the same kernel (a listening kernel, which kept the exec's
// output and its end): Reopen.

// JobState is where a job is: enough for a new host to take it up again.
type JobState struct {
	ID       string `json:"id"`
	Script   string `json:"script"`
	Artifact string `json:"artifact,omitempty"`
	// ArtifactCap is the artifact's cap (output.artifactBytes when the job started); 0: none.
	ArtifactCap int64     `json:"artifactCap,omitempty"`
	Started     time.Time `json:"started"`
	// Stmt is the index of the step whose statement runs or is about to be decided (a
	// pipeline's first step).
	Stmt int `json:"stmt"`
	// Exec is the kernel's id of the statement's exec, once sent; Running its steps, and At
	// the artifact's length when it was sent.
	Exec    string       `json:"exec,omitempty"`
	Running []StepResult `json:"running,omitempty"`
	At      int64        `json:"at,omitempty"`
	Cwd     string       `json:"cwd"`
	Vars    []Var        `json:"vars,omitempty"`
	Status  int          `json:"status"`
	Done    []StepResult `json:"done,omitempty"` // the steps that ended
	Ended   bool         `json:"ended,omitempty"`
	Result  *Result      `json:"result,omitempty"` // ended: the script's own end
}

// Var is one shell variable of a job.
type Var struct {
	Name     string `json:"name"`
	Value    string `json:"value"`
	Exported bool   `json:"exported,omitempty"`
}

// forgotten is an exec whose end was recorded, for the kernel to forget once the job's
// state no longer names it.
type forgotten struct {
	c  *conn
	id string
}

// Persist has save called with the job's state now and at every change, until its end
// (the last call has Ended set). A job that is not persisted is not taken up again.
//
// save is called once at a time, with the states in the order the job reached them.
func (j *Job) Persist(save func(JobState)) {
	j.saving.Lock()
	defer j.saving.Unlock()
	j.mu.Lock()
	j.persist = save
	st := j.state
	j.mu.Unlock()
	if st.ID != "" { // else the job has not reached its first step: that saves it
		save(st)
	}
}

// checkpoint records the job's state, has it saved, and only then lets the kernel forget
// the execs it no longer names.
func (j *Job) checkpoint(st JobState) {
	j.saving.Lock()
	j.mu.Lock()
	j.state = st
	save := j.persist
	forgets := j.forgets
	j.forgets = nil
	j.mu.Unlock()
	if save != nil {
		save(st)
	}
	j.saving.Unlock()
	for _, f := range forgets {
		f.c.forget(f.id)
	}
}

// at records that the statement holding step stmt is about to be decided.
func (r *runner) at(stmt int) {
	r.checkpoint(JobState{Stmt: stmt})
}

// written is how many bytes the job's artifact holds.
func (r *runner) written() int64 {
	if r.job == nil {
		return 0
	}
	return r.job.written.Load()
}

// sent records that a pipeline's exec was sent when the artifact held at bytes.
func (r *runner) sent(id string, heads []StepResult, at int64) {
	r.checkpoint(JobState{Stmt: heads[0].Index, Exec: id, Running: heads, At: at})
}

// ended lets the kernel forget an exec whose end was recorded: at once for a call, after
// the next checkpoint for a job.
func (r *runner) ended(c *conn, id string) {
	if r.job == nil {
		c.forget(id)
		return
	}
	r.job.mu.Lock()
	r.job.forgets = append(r.job.forgets, forgotten{c, id})
	r.job.mu.Unlock()
}

func (r *runner) checkpoint(st JobState) {
	j := r.job
	if j == nil {
		return
	}
	st.ID, st.Script, st.Artifact, st.ArtifactCap, st.Started = j.id, j.script, r.call.Artifact, j.cap, j.start
	st.Cwd, st.Status = r.sh.Cwd, r.sh.Status
	for k, v := range r.sh.Vars {
		st.Vars = append(st.Vars, Var{Name: k, Value: v.Str, Exported: v.Exported})
	}
	slices.SortFunc(st.Vars, func(a, b Var) int { return strings.Compare(a.Name, b.Name) })
	r.mu.Lock()
	st.Done = slices.Clone(r.res.Steps)
	r.mu.Unlock()
	j.checkpoint(st)
}

// resumePoint is where a job taken up again goes on: the statement holding step, waiting
// for the reply of the exec an earlier host sent (p set), or decided again.
type resumePoint struct {
	step int
	id   string
	p    *call
	run  *running
}

// holds reports whether statement st holds the resume point's step.
func (r *runner) holds(st syntax.Node) bool {
	if r.from.step < 0 || r.from.step >= len(r.sc.Steps) {
		return false
	}
	at := r.sc.Steps[r.from.step]
	return st.Pos().Offset() <= at.Pos().Offset() && at.End().Offset() <= st.End().Offset()
}

// resumed runs the statement at the resume point: the exec an earlier host sent is
// awaited, or the statement runs from its start.
func (r *runner) resumed(ctx context.Context, parts []*syntax.Stmt) (stop bool, err error) {
	from := r.from
	r.from = nil
	if from.p == nil {
		if parts == nil {
			return r.shell(ctx)
		}
		return r.pipeline(ctx, parts)
	}
	defer r.stopRunning()
	c, err := r.s.conn(ctx)
	if err != nil {
		return false, err
	}
	return false, r.await(ctx, c, from.id, from.p, from.run)
}

// Restore is a job to take up again, and where its output goes as it comes.
type Restore struct {
	State JobState
	Live  func(step, fd int, data []byte)
}

// Reopen takes up a session whose kernel outlived its host: k is the kernel reattached (a
// listening one, transport.Resuming). jobs are the jobs the earlier host persisted: each
// one not ended goes on where it was — awaiting the exec it had sent, whose whole output the
// kernel kept (what the artifact already holds is not written again), or deciding its
// statement again when it had sent none. A job whose exec the kernel no longer holds ends
// as failed, its output up to then in its artifact. Execs an earlier host sent for calls
// that are no job are killed: their callers are gone.
func Reopen(ctx context.Context, cfg Config, k transport.Kernel, jobs []Restore) (*Session, error) {
	r, ok := k.(transport.Resuming)
	var res wire.Resume
	if ok {
		res, ok = r.Resume()
	}
	if !ok {
		return nil, errors.New("reopen: the kernel was not reattached through a listening connection")
	}
	s, err := newSession(ctx, cfg)
	if err != nil {
		return nil, err
	}
	held := map[string]wire.HeldExec{}
	for _, h := range res.Execs {
		held[h.ID] = h
	}
	adopt := map[string]*call{}
	type taken struct {
		j *Job
		r *runner
	}
	var goOn []taken
	for _, rs := range jobs {
		js := rs.State
		if js.Ended {
			continue
		}
		j, jr, err := s.restoreJob(js, rs.Live)
		if err != nil {
			s.log.Error("job not taken up again", "job", js.ID, "err", err)
			continue
		}
		if js.Exec == "" {
			jr.from = &resumePoint{step: js.Stmt}
			goOn = append(goOn, taken{j, jr})
			continue
		}
		h, ok := held[js.Exec]
		if !ok {
			res := jr.snapshot()
			res.End = End{Kind: Failed, Status: 1, Job: j.id,
				Message: "the step that ran when the host stopped ended unseen; its output is in the job's artifact"}
			j.finish(res, nil)
			continue
		}
		run := jr.adopt(js, h)
		adopt[js.Exec] = run.p
		jr.from = &resumePoint{step: js.Stmt, id: js.Exec, p: run.p, run: run.running}
		goOn = append(goOn, taken{j, jr})
	}
	// The execs no job takes belong to calls whose callers are gone: killed, and forgotten
	// once they end.
	var orphans []wire.HeldExec
	for _, h := range res.Execs {
		if adopt[h.ID] == nil {
			adopt[h.ID] = &call{reply: make(chan wire.Frame, 1)}
			orphans = append(orphans, h)
		}
	}
	c := startConn(ctx, k, s.handlers(), s.log, adopt)
	s.setConn(c)
	s.move(sessionStarted)
	for _, h := range orphans {
		p := adopt[h.ID]
		go func() {
			if h.Running {
				sctx, cancel := context.WithTimeout(s.life, 10*time.Second)
				c.request(sctx, wire.TypeSignal, wire.Signal{Target: h.ID, Signal: "KILL"}, nil)
				cancel()
			}
			select {
			case <-p.reply:
				c.forget(h.ID)
			case <-c.done:
			}
		}()
	}
	if _, err := c.request(ctx, wire.TypePing, struct{}{}, nil); err != nil {
		s.Close()
		return nil, fmt.Errorf("session %s: the reattached kernel did not answer: %w", s.id, err)
	}
	if err := s.startEgress(ctx, c, s.Listening()); err != nil {
		s.Close()
		return nil, fmt.Errorf("session %s: %w", s.id, err)
	}
	s.holdUntilReady()
	for _, t := range goOn {
		s.goOn(t.j, t.r)
	}
	return s, nil
}

// DefaultAttachGrace is how long a question waits for a client after a session is taken up
// again, when Config.AttachGrace does not say.
const DefaultAttachGrace = 30 * time.Second

// holdUntilReady has the clients of a session taken up again, once Ready, AttachGrace to
// attach: a question that finds none meanwhile waits for one.
func (s *Session) holdUntilReady() {
	if s.cfg.Ready == nil {
		return
	}
	grace := s.cfg.AttachGrace
	if grace <= 0 {
		grace = DefaultAttachGrace
	}
	s.attachBy.Store(time.Now().Add(grace).UnixNano()) // until Ready, and the grace after it
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		select {
		case <-s.cfg.Ready:
			s.attachBy.Store(time.Now().Add(grace).UnixNano())
		case <-s.life.Done():
		}
	}()
}

// restoreJob makes a job from its state: its runner where the state says, its artifact
// appended to.
func (s *Session) restoreJob(js JobState, live func(step, fd int, data []byte)) (*Job, *runner, error) {
	j := newJob(js.ID, js.Script, js.Started, js.ArtifactCap, jobDetached)
	j.last.Store(time.Now().UnixNano()) // its silence is counted from when it is taken up
	if js.Artifact != "" {
		a, err := openArtifact(js.Artifact, output.Spill{Cap: js.ArtifactCap})
		if err != nil {
			return nil, nil, fmt.Errorf("job %s: artifact: %w", js.ID, err)
		}
		j.artifact = a
		j.written.Store(a.written)
	}
	call := Call{Script: js.Script, Artifact: js.Artifact, Live: live}
	r, err := s.newRunner(call)
	if err != nil {
		if j.artifact != nil {
			j.artifact.f.Close()
		}
		return nil, nil, err
	}
	r.job = j
	j.r = r
	j.state = js
	r.sh.Cwd, r.sh.Status = js.Cwd, js.Status
	r.sh.Vars = map[string]expand.Variable{}
	for _, v := range js.Vars {
		r.sh.Set(v.Name, v.Value, v.Exported)
	}
	r.res.Steps = slices.Clone(js.Done)
	s.jobs.mu.Lock()
	if s.jobs.all == nil {
		s.jobs.all = map[string]*Job{}
	}
	s.jobs.all[j.id] = j
	if _, n, ok := strings.Cut(j.id, "-j"); ok {
		if n, err := strconv.Atoi(n); err == nil && n > s.jobs.next {
			s.jobs.next = n
		}
	}
	s.jobs.mu.Unlock()
	return j, r, nil
}

// adopted is an exec an earlier host sent, taken up by a job.
type adopted struct {
	running *running
	p       *call
}

// adopt prepares a job's runner to receive the output and reply of the exec its state
// names. The kernel sends that output again from the start (less what it skipped, which the
// artifact holds); the windows take all of it, the artifact and the live output only what
// the artifact does not have yet.
func (r *runner) adopt(js JobState, h wire.HeldExec) adopted {
	steps := make([]Step, len(js.Running))
	for i, head := range js.Running {
		steps[i] = Step{Index: head.Index, Command: head.Command, Shell: r.sc.Grammar == script.Exec}
		if !steps[i].Shell && head.Index >= 0 && head.Index < len(r.sc.Steps) {
			steps[i].Node = r.sc.Steps[head.Index]
		}
	}
	run := r.startRunning(steps, slices.Clone(js.Running))
	have := r.job.written.Load() - js.At // bytes of this exec the artifact holds
	pos := h.Skipped
	if h.Skipped > 0 && len(run.outs) > 0 && r.call.Artifact != "" {
		// What the kernel no longer kept is in the artifact, without its streams told
		// apart: it counts as the first step's standard output. (An artifact whose cap is
		// below what the kernel keeps may have dropped some of it: those bytes are counted
		// in the artifact's report, and are not in the window.)
		r.job.readArtifact(run.outs[0][0], js.At, min(h.Skipped, have))
	}
	stream := func(step, fd int, data []byte) {
		if step < 0 || step >= len(run.outs) || (fd != 1 && fd != 2) {
			return
		}
		skip := int(min(max(have-pos, 0), int64(len(data))))
		pos += int64(len(data))
		r.out(run.outs[step][fd-1], steps[step].Index, fd, data, skip)
	}
	// The messages the host writes itself after the reply (a redirection that failed) count
	// on from the exec's output: one an earlier host wrote is not written again.
	run.stream = stream
	return adopted{running: run, p: newExecCall(stream)}
}

// goOn runs a job taken up again to its end, on the session's lifetime.
func (s *Session) goOn(j *Job, r *runner) {
	ctx, cancel := context.WithCancel(s.life)
	j.cancel = cancel
	s.watchJob(j)
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer cancel()
		if s.cfg.Ready != nil {
			// Taken up before its clients can attach: what it asks would go unanswered.
			select {
			case <-s.cfg.Ready:
				j.last.Store(time.Now().UnixNano()) // its silence counts from here
			case <-ctx.Done():
			}
		}
		s.finishJob(j, r, ctx)
	}()
}
