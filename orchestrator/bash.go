package orchestrator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"mvdan.cc/sh/v3/syntax"

	"github.com/paddockhq/paddock/orchestrator/output"
	"github.com/paddockhq/paddock/policy"
	"github.com/paddockhq/paddock/script"
	"github.com/paddockhq/paddock/transport/wire"
)

// Step is one step as it will run: expanded on the host, shown exactly as it runs.
type Step struct {
	Index     int        // position among the script's steps
	Argv      []string   // the command and its arguments; a shell step: the script
	Assigns   []string   // NAME=value before the command
	Redirects []Redirect // in order
	Cwd       string     // sandbox path the step starts in
	Shell     bool       // the whole script, run by the kernel's shell, each command judged as it runs
	Builtin   bool       // a builtin the kernel's shell runs (a command of a Shell step)
	Beside    [][]string // the words of the other commands of its pipeline, which run at once
	Script    *script.Script
	Node      *syntax.Stmt // the step's statement (nil for a shell step)
	Command   string       // the step as shown to a person

	words []string // each redirection's target as the script wrote it, for the kernel
}

// Redirect is one redirection of a step. Op is <, >, >>, >& (Path holds the target
// descriptor) or &>.
type Redirect = policy.Redirect

// Verdict is a gatekeeper's answer for one step.
type Verdict struct {
	Run     bool
	Code    string         // when refused: denied, unanswered, gateway_refused, …
	Message string         // when refused: why, for the agent
	Effects policy.Effects // the step's effects, as the policy gave them
}

// Gatekeeper decides whether a step runs. It may wait for a person's answer.
type Gatekeeper interface {
	Decide(ctx context.Context, step Step) Verdict
}

// Call is one run of the bash tool.
type Call struct {
	Script string
	// Live, when set, gets every output chunk as it is produced (step index, fd 1 or 2).
	Live func(step, fd int, data []byte)
	// Budget is how long the call blocks before it settles detached, its script going on
	// as a job; 0: the session's budget; below 0: no limit.
	Budget time.Duration
	// Artifact, when set, is a file (created 0600) that receives every byte of output.
	Artifact string
	// Shell, when set, is the shell the call continues (its directory and variables) and
	// leaves its own state in; nil: the call starts where the session does, and cd and
	// export last for the call.
	Shell *Shell
}

// RefusedStatus is the exit status of a script refused at a step.
const RefusedStatus = 126

// Bash runs a script in the session.
func (s *Session) Bash(ctx context.Context, src string) (*Result, error) {
	return s.Run(ctx, Call{Script: src})
}

// Run runs a call of the bash tool: the script is parsed; within the grammar each step is
// expanded on the host, decided, and run in the sandbox; outside it the whole script is
// one step run by bash -c. A refused step stops the script there.
func (s *Session) Run(ctx context.Context, call Call) (*Result, error) {
	budget := call.Budget
	if budget == 0 {
		budget = s.cfg.Budget
	}
	if budget < 0 || (budget == 0 && call.Artifact == "") {
		if s.limits().Set() {
			return s.runWatched(ctx, call)
		}
		r, err := s.newRunner(call)
		if err != nil {
			return nil, err
		}
		return r.run(ctx)
	}
	return s.runBudgeted(ctx, call, budget)
}

// newRunner parses a call's script and prepares its state.
func (s *Session) newRunner(call Call) (*runner, error) {
	sc, err := script.Parse(call.Script)
	if err != nil {
		return nil, err
	}
	r := &runner{s: s, call: call, sc: sc, sh: script.NewState(call.Script, s.cwd, s.stepEnv()),
		index: make(map[*syntax.Stmt]int, len(sc.Steps)), res: &Result{Grammar: string(sc.Grammar)}}
	for i, st := range sc.Steps {
		r.index[st] = i
	}
	r.sh.ReadDir, r.sh.IsDir = r.readDir, r.isDir
	if call.Shell != nil {
		call.Shell.load(r.sh)
	}
	return r, nil
}

// run runs the script to its end.
func (r *runner) run(ctx context.Context) (*Result, error) {
	r.s.running.Store(r, r.call.Script)
	defer r.s.running.Delete(r)
	var stop bool
	var err error
	switch {
	case r.sc.Grammar == script.Exec && r.from != nil:
		stop, err = r.resumed(ctx, nil)
	case r.sc.Grammar == script.Exec:
		stop, err = r.shell(ctx)
	default:
		for _, st := range r.sc.File.Stmts {
			if stop, err = r.stmt(ctx, st); stop || err != nil {
				break
			}
		}
	}
	if err != nil {
		return r.snapshot(), err
	}
	if !stop {
		r.setEnd(End{Kind: Finished, Status: r.sh.Status})
	}
	if sh := r.call.Shell; sh != nil && r.sc.Grammar != script.Exec && !r.detached() {
		sh.keep(r.sh)
	}
	return r.snapshot(), nil
}

// detached reports whether the call's job has settled detached.
func (r *runner) detached() bool {
	if r.job == nil {
		return false
	}
	r.job.mu.Lock()
	defer r.job.mu.Unlock()
	return r.job.life == jobDetached
}

// runner is the state of one call: working directory, variables, last status (sh). cd and
// export last for the call.
type runner struct {
	s     *Session
	call  Call
	sc    *script.Script
	index map[*syntax.Stmt]int
	job   *Job          // the job the call runs as; nil: none
	from  *resumePoint  // a job taken up again: where it goes on
	sh    *script.State // the working directory, variables and last status, for the steps to come
	// approved is the environment the steps of the kernel's shell were decided with (judge).
	approved map[string]string

	mu      sync.Mutex
	res     *Result    // guarded by mu
	running []liveStep // guarded by mu: the steps of the pipeline running now
}

// liveStep is a step whose output is still coming.
type liveStep struct {
	res  StepResult
	outs [2]*output.Window
}

func (r *runner) addStep(res StepResult) {
	r.mu.Lock()
	r.res.Steps = append(r.res.Steps, res)
	r.mu.Unlock()
}

func (r *runner) setEnd(e End) {
	r.mu.Lock()
	r.res.End = e
	r.mu.Unlock()
}

// snapshot is the result so far: the steps that ended, then those still running with their
// output so far.
func (r *runner) snapshot() *Result {
	r.mu.Lock()
	defer r.mu.Unlock()
	res := *r.res
	res.Steps = slices.Clone(r.res.Steps)
	for _, l := range r.running {
		st := l.res
		st.Running = true
		st.Stdout, st.Stderr = l.outs[0].Snapshot(), l.outs[1].Snapshot()
		res.Steps = append(res.Steps, st)
	}
	return &res
}

// stmt runs one statement of the grammar: a list, a pipeline or one command. stop reports
// that the script ended (exit, or a refusal).
func (r *runner) stmt(ctx context.Context, st *syntax.Stmt) (stop bool, err error) {
	if r.from != nil && !r.holds(st) {
		return false, nil // ran before the host that took the job up again
	}
	if b, ok := st.Cmd.(*syntax.BinaryCmd); ok {
		switch b.Op {
		case syntax.AndStmt, syntax.OrStmt:
			if r.from != nil && !r.holds(b.X) {
				return r.stmt(ctx, b.Y) // X ran, and led to Y
			}
			if stop, err = r.stmt(ctx, b.X); stop || err != nil {
				return stop, err
			}
			if (r.sh.Status == 0) == (b.Op == syntax.AndStmt) {
				return r.stmt(ctx, b.Y)
			}
			return false, nil
		case syntax.Pipe:
			return r.pipeline(ctx, pipeParts(st, nil))
		}
	}
	return r.pipeline(ctx, []*syntax.Stmt{st})
}

// pipeParts lists the commands of a pipeline, left to right.
func pipeParts(st *syntax.Stmt, out []*syntax.Stmt) []*syntax.Stmt {
	if b, ok := st.Cmd.(*syntax.BinaryCmd); ok && b.Op == syntax.Pipe {
		return pipeParts(b.Y, pipeParts(b.X, out))
	}
	return append(out, st)
}

// pipeline expands, decides and runs one pipeline (or one command).
func (r *runner) pipeline(ctx context.Context, parts []*syntax.Stmt) (stop bool, err error) {
	if r.from != nil {
		return r.resumed(ctx, parts)
	}
	r.at(r.index[parts[0]])
	steps := make([]Step, len(parts))
	for i, st := range parts {
		step, err := r.plan(st)
		if err != nil {
			// An expansion error fails the pipeline as a shell fails the command.
			res := StepResult{Index: r.index[st], Command: r.sc.Source[st.Pos().Offset():st.End().Offset()], Status: 1}
			res.Stderr = output.Whole(fmt.Sprintf("bash: line %d: %v\n", st.Pos().Line(), err))
			r.addStep(res)
			r.sh.Status = 1
			return false, nil
		}
		steps[i] = step
	}
	if len(steps) > 1 {
		for i := range steps {
			for j := range steps {
				if j != i {
					steps[i].Beside = append(steps[i].Beside, steps[j].Argv)
				}
			}
		}
	}
	// Every step of the pipeline is decided, in order, before any of them runs.
	effects := make([]policy.Effects, len(steps))
	for i, step := range steps {
		v := r.decide(ctx, step)
		if !v.Run {
			r.refuse(step, v)
			return true, nil
		}
		effects[i] = v.Effects
	}
	if len(steps) == 1 {
		if done, stop := r.builtin(steps[0], effects[0]); done {
			return stop, nil
		}
	}
	if err := r.exec(ctx, steps, effects); err != nil {
		return false, err
	}
	return r.refused(), nil
}

// refused reports whether the script was refused at a command the kernel's shell asked
// about: it ends there.
func (r *runner) refused() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.res.End.Kind == Refused
}

func (r *runner) decide(ctx context.Context, step Step) Verdict {
	r.s.questions.Add(1) // it may wait for an answer: the call's limits count that as output
	defer r.s.questions.Add(-1)
	return r.s.gate.Decide(ctx, step)
}

func (r *runner) refuse(step Step, v Verdict) {
	r.setEnd(End{Kind: Refused, Status: RefusedStatus, Step: step.Index, Command: step.Command, Code: v.Code, Message: v.Message, Effects: v.Effects})
}

// shell runs a script outside the grammar as one step: the kernel's shell interprets it, and
// every command it runs is decided as it is about to run (judge), with the words it runs
// with. A refusal stops the script there.
func (r *runner) shell(ctx context.Context) (stop bool, err error) {
	r.at(0)
	step := Step{Argv: []string{r.sc.Source}, Cwd: r.sh.Cwd, Shell: true, Script: r.sc, Command: r.sc.Source}
	if err := r.exec(ctx, []Step{step}, []policy.Effects{0}); err != nil {
		return false, err
	}
	return r.refused(), nil
}

// plan expands one command of the grammar into the step it will run (script.State.Plan).
func (r *runner) plan(st *syntax.Stmt) (Step, error) {
	p, err := r.sh.Plan(st)
	step := Step{Index: r.index[st], Cwd: p.Cwd, Script: r.sc, Node: st, Argv: p.Argv, Assigns: p.Assigns}
	if err != nil {
		return step, err
	}
	for _, rd := range p.Redirects {
		step.Redirects = append(step.Redirects, Redirect{FD: rd.FD, Op: rd.Op, Path: rd.Path})
		step.words = append(step.words, rd.Word)
	}
	step.Command = showStep(step)
	return step, nil
}

// showStep writes a step exactly as it runs: each word quoted so that bash reads it back
// unchanged, control characters as $'…', redirections named as the script wrote them.
func showStep(step Step) string {
	shown := policy.Step{Argv: step.Argv, Assigns: step.Assigns, Redirects: slices.Clone(step.Redirects)}
	for i := range shown.Redirects {
		if shown.Redirects[i].Op != ">&" {
			shown.Redirects[i].Path = step.words[i]
		}
	}
	return shown.String()
}

// builtin runs cd, export, unset, exit and bare assignments on the host
// (script.State.Builtin). done is false for any other command.
func (r *runner) builtin(step Step, effects policy.Effects) (done, stop bool) {
	done, status, stderr, exit := r.sh.Builtin(script.Planned{Argv: step.Argv, Assigns: step.Assigns, Cwd: step.Cwd})
	if !done {
		return false, false
	}
	res := StepResult{Index: step.Index, Command: step.Command, Effects: effects, Status: status}
	if stderr != "" {
		res.Stderr = output.Whole(fmt.Sprintf("bash: line %d: %s\n", step.Node.Pos().Line(), stderr))
	}
	if exit {
		r.addStep(res)
		r.sh.Status = status
		r.setEnd(End{Kind: Exited, Status: status})
		return true, true
	}
	if res.Stderr.Text != "" {
		r.out(nil, step.Index, 2, []byte(res.Stderr.Text), 0)
	}
	r.sh.Status = status
	r.addStep(res)
	return true, false
}

// isDir says whether a sandbox path is a directory, through the kernel, for cd.
func (r *runner) isDir(p string) (bool, error) {
	var e wire.Entry
	if err := r.s.request(context.Background(), wire.TypeStat, wire.Path{Path: p}, &e); err != nil {
		return false, err
	}
	return e.Type == wire.TypeDir, nil
}

// exec runs a pipeline in the sandbox and records each step's output and status.
func (r *runner) exec(ctx context.Context, steps []Step, effects []policy.Effects) error {
	// The kernel opens redirections relative to the working directory, named as the script
	// wrote them, so that its messages read as bash's do.
	// Every exec is judged: a shell one of its commands would start (sh -c, bash FILE) is
	// the kernel's to interpret, each of its commands decided here as it runs.
	x := wire.Exec{Cwd: r.sh.Cwd, Env: append(r.sh.Environ(), policy.StepEnv...), Judged: true}
	if n := steps[0].Node; n != nil {
		x.Prefix = fmt.Sprintf("bash: line %d: ", n.Pos().Line())
	}
	if steps[0].Shell {
		x.Script, x.Params = r.sc.Source, []string{"bash"}
		steps = steps[:1]
	}
	for _, st := range steps {
		if st.Shell {
			break
		}
		cmd := wire.Command{Argv: st.Argv, Env: st.Assigns}
		// A step runs none of the programs a file the sandbox can write configures: a git
		// step none of the repository's (fsmonitor, hooks, pager, drivers, signature
		// programs, transports), curl no ~/.curlrc (policy.Harden).
		if argv, env, ok := policy.Harden(st.Argv); ok {
			cmd.Argv = argv
			cmd.Env = append(slices.Clone(st.Assigns), env...)
		}
		for i, rd := range st.Redirects {
			switch rd.Op {
			case "&>":
				cmd.Redirects = append(cmd.Redirects, wire.Redirect{FD: 1, Op: wire.RedirOut, Path: st.words[i]},
					wire.Redirect{FD: 2, Op: wire.RedirDup, DupFD: 1})
			case ">&":
				n, _ := strconv.Atoi(rd.Path)
				cmd.Redirects = append(cmd.Redirects, wire.Redirect{FD: rd.FD, Op: wire.RedirDup, DupFD: n})
			default:
				cmd.Redirects = append(cmd.Redirects, wire.Redirect{FD: rd.FD, Op: rd.Op, Path: st.words[i]})
			}
		}
		x.Commands = append(x.Commands, cmd)
	}
	heads := make([]StepResult, len(steps))
	for i, st := range steps {
		heads[i] = StepResult{Index: st.Index, Command: st.Command, Effects: effects[i]}
	}
	run := r.startRunning(steps, heads)
	defer r.stopRunning()
	c, err := r.s.conn(ctx)
	if err != nil {
		return err
	}
	at := r.written() // before the send: the exec's output may come at once
	id, p, err := c.sendExec(x, run.stream)
	if err != nil {
		return err
	}
	r.sent(id, heads, at)
	return r.await(ctx, c, id, p, run)
}

// running is a pipeline whose output is coming.
type running struct {
	steps  []Step
	heads  []StepResult
	outs   [][2]*output.Window
	stream func(step, fd int, data []byte)
	// judged are the effects of the commands the kernel's shell ran, for the shell step.
	judged policy.Effects
}

// startRunning shows a pipeline's steps as running, with windows for their output.
func (r *runner) startRunning(steps []Step, heads []StepResult) *running {
	run := &running{steps: steps, heads: heads, outs: make([][2]*output.Window, len(steps))}
	live := make([]liveStep, len(steps))
	for i := range steps {
		run.outs[i] = [2]*output.Window{output.NewWindow(r.s.cfg.Limit), output.NewWindow(r.s.cfg.Limit)}
		live[i] = liveStep{res: heads[i], outs: run.outs[i]}
	}
	r.mu.Lock()
	r.running = live
	r.mu.Unlock()
	run.stream = func(step, fd int, data []byte) {
		if step < 0 || step >= len(run.outs) || (fd != 1 && fd != 2) {
			return
		}
		r.out(run.outs[step][fd-1], steps[step].Index, fd, data, 0)
	}
	return run
}

// out takes a chunk of a step's output (step index, fd 1 or 2): into w, the step's window
// (nil: a text the step's result holds whole), and for a job into its artifact from byte
// skip on (what the artifact already holds is not written again), both at one moment with
// respect to the job's end, so that a killed job's window and artifact count the same bytes;
// then to the call's Live. A job that has ended takes no more output.
func (r *runner) out(w *output.Window, index, fd int, data []byte, skip int) {
	skip = min(max(skip, 0), len(data))
	if j := r.job; j != nil {
		j.last.Store(time.Now().UnixNano())
		j.mu.Lock()
		if j.ended() {
			j.mu.Unlock()
			return
		}
		if w != nil {
			w.Write(data)
		}
		if j.artifact != nil && skip < len(data) {
			j.artifact.write(data[skip:])
			j.written.Store(j.artifact.written)
		}
		j.mu.Unlock()
	} else if w != nil {
		w.Write(data)
	}
	if r.call.Live != nil && skip < len(data) {
		r.call.Live(index, fd, data[skip:])
	}
}

func (r *runner) stopRunning() {
	r.mu.Lock()
	r.running = nil
	r.mu.Unlock()
}

// await waits for a pipeline's exec to reply and records each step's end.
func (r *runner) await(ctx context.Context, c *conn, id string, p *call, run *running) error {
	raw, err := c.await(ctx, id, p, func(jr judge) wire.Verdict { return r.judge(ctx, run, jr) })
	defer r.ended(c, id)
	if err != nil {
		if pf := c.fault(); pf != nil {
			return fmt.Errorf("exec: %w", pf)
		}
		return err
	}
	var xr wire.ExecResult
	if err := json.Unmarshal(raw, &xr); err != nil {
		return fmt.Errorf("exec: bad reply: %w", err)
	}
	var done []StepResult
	for i, st := range run.steps {
		var es wire.ExitStatus
		if i < len(xr.Statuses) {
			es = xr.Statuses[i]
		}
		if es.Error != "" {
			line := 1
			if st.Node != nil {
				line = int(st.Node.Pos().Line())
			}
			msg := fmt.Sprintf("bash: line %d: %s\n", line, strings.TrimPrefix(es.Error, "paddock-kernel: "))
			run.stream(i, 2, []byte(msg))
		}
		res := run.heads[i]
		res.Status, res.Signal = es.Code, es.Signal
		if run.steps[i].Shell {
			res.Effects = run.judged
		}
		res.Stdout, res.Stderr = run.outs[i][0].Snapshot(), run.outs[i][1].Snapshot()
		done = append(done, res)
		r.sh.Status = es.Code
	}
	// The steps move from running to ended at one moment, for snapshots.
	r.mu.Lock()
	r.res.Steps = append(r.res.Steps, done...)
	r.running = nil
	r.mu.Unlock()
	return nil
}

// readDir lists a sandbox directory through the kernel, for globs.
func (r *runner) readDir(dir string) ([]fs.DirEntry, error) {
	var d wire.Dir
	if err := r.s.request(context.Background(), wire.TypeReaddir, wire.Path{Path: dir}, &d); err != nil {
		return nil, err
	}
	out := make([]fs.DirEntry, len(d.Entries))
	for i, e := range d.Entries {
		out[i] = dirEntry{e}
	}
	return out, nil
}

// dirEntry is a kernel's directory entry as an fs.DirEntry.
type dirEntry struct{ e wire.Entry }

func (d dirEntry) Name() string               { return d.e.Name }
func (d dirEntry) IsDir() bool                { return d.e.Type == wire.TypeDir }
func (d dirEntry) Info() (fs.FileInfo, error) { return nil, errors.ErrUnsupported }
func (d dirEntry) Type() fs.FileMode {
	switch d.e.Type {
	case wire.TypeDir:
		return fs.ModeDir
	case wire.TypeSymlink:
		return fs.ModeSymlink
	case wire.TypeFile:
		return 0
	}
	return fs.ModeIrregular
}

// await waits for an exec's reply, answering each judge its kernel asks meanwhile with
// serve's verdict, one at a time, in the order asked. When ctx ends first, the pipeline's
// process group and the kernel's shell are signalled (TERM, then KILL after the kernel's
// grace) and its reply, which comes once every process ended, is awaited a while longer;
// judges are refused then.
func (c *conn) await(ctx context.Context, id string, p *call, serve func(judge) wire.Verdict) (json.RawMessage, error) {
	for done := false; !done; {
		select {
		case f := <-p.reply:
			return replyBody(f)
		case jr := <-p.judges:
			v := serve(jr)
			c.answer(id, jr.n, v)
			if !v.Run {
				// The script ends at the refusal: its shell stops, and whatever else runs in
				// the exec gets TERM, then KILL after the kernel's grace.
				go func() {
					sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
					defer cancel()
					_, _ = c.request(sctx, wire.TypeSignal, wire.Signal{Target: id, Signal: "TERM"}, nil)
				}()
			}
		case <-ctx.Done():
			done = true
		}
	}
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, _ = c.request(sctx, wire.TypeSignal, wire.Signal{Target: id, Signal: "TERM"}, nil)
	for {
		select {
		case f := <-p.reply:
			if _, err := replyBody(f); err != nil {
				return nil, err
			}
			return nil, ctx.Err()
		case jr := <-p.judges:
			c.answer(id, jr.n, wire.Verdict{Code: "cancelled", Message: "the call ended before the command could run"})
		case <-sctx.Done():
			return nil, ctx.Err()
		}
	}
}

// answer writes the verdict on one judge of an exec.
func (c *conn) answer(exec string, n int, v wire.Verdict) {
	b, _ := json.Marshal(v)
	if err := c.write(&wire.Frame{Event: wire.EventVerdict, ID: exec, Step: n, Body: b}); err != nil {
		c.log.Warn("verdict not written", "exec", exec, "judge", n, "err", err)
	}
}
