package orchestrator

import (
	"context"
	"strings"

	"github.com/paddockhq/paddock/policy"
	"github.com/paddockhq/paddock/transport/wire"
)

// judge answers one judge of the kernel's shell: the command it is about to run (a program,
// a builtin, a file it opens) is a step of its own, decided by the session's gate as every
// step is — the policy's effects, the rules, the auto set, the approval route, one audit
// record — and runs as the verdict says: a program with the hardened words and environment
// (policy.Harden). A refusal ends the script: the call ends refused at that command.
// The commands of the shell at work as it is judged are its Beside (a background job, the
// other members of a pipeline); a program that changes names holds the shell until it ends,
// even in the background, so that no step of a later call is judged while it runs.
func (r *runner) judge(ctx context.Context, run *running, jr judge) wire.Verdict {
	j := jr.j
	index := 0
	if len(run.heads) > 0 {
		index = run.heads[0].Index
	}
	step := Step{Index: index, Cwd: j.Cwd, Script: r.sc, Beside: wire.BoundBeside(j.Beside)}
	switch j.Kind {
	case wire.JudgeOpen:
		fd := 1
		if j.Op == wire.RedirIn {
			fd = 0
		}
		step.Redirects = []Redirect{{FD: fd, Op: j.Op, Path: j.Path}}
		step.words = []string{j.Path}
	case wire.JudgeBuiltin:
		step.Argv, step.Builtin = j.Argv, true
	case wire.JudgeProgram:
		step.Argv, step.Assigns = j.Argv, r.unapproved(j.Env)
	default:
		return wire.Verdict{Code: "bad_request", Message: "no such kind of judge: " + j.Kind}
	}
	if len(step.Argv) == 0 && len(step.Redirects) == 0 {
		return wire.Verdict{Code: "bad_request", Message: "a judge names no command"}
	}
	step.Command = showStep(step)
	v := r.decide(ctx, step)
	run.judged |= v.Effects
	if !v.Run {
		r.refuse(step, v)
		return wire.Verdict{Code: v.Code, Message: v.Message}
	}
	r.approve(step, j.Env)
	if j.Kind != wire.JudgeProgram {
		return wire.Verdict{Run: true}
	}
	argv, env, _ := policy.Harden(j.Argv)
	return wire.Verdict{Run: true, Argv: argv, Env: env, Hold: policy.Renames(j.Argv)}
}

// unapproved are the entries of a program's environment that its script set and no step
// decided before: each is judged as an assignment of the step (it makes the step exec, and
// one that moves where git finds a repository protected). An export the script ran, or an
// earlier program's same environment, was decided already.
func (r *runner) unapproved(env []string) []string {
	var out []string
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		if old, ok := r.approved[k]; !ok || old != v {
			out = append(out, kv)
		}
	}
	return out
}

// approve records the environment a step that runs was decided with: a program's, and what
// an export (declare -x, local, readonly, typeset) sets.
func (r *runner) approve(step Step, env []string) {
	if r.approved == nil {
		r.approved = map[string]string{}
	}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		r.approved[k] = v
	}
	if !step.Builtin || len(step.Argv) == 0 {
		return
	}
	switch step.Argv[0] {
	case "export", "declare", "typeset", "local", "readonly":
		for _, a := range step.Argv[1:] {
			if k, v, ok := strings.Cut(a, "="); ok && k != "" && !strings.HasPrefix(k, "-") {
				r.approved[k] = v
			}
		}
	}
}
