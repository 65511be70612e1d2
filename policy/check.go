package policy

import (
	"io"
	"io/fs"
	"path"
	"strconv"
	"strings"

	"mvdan.cc/sh/v3/expand"
	"mvdan.cc/sh/v3/syntax"

	"github.com/paddockhq/paddock/script"
)

// Analysis is what a script would do, judged without running it.
type Analysis struct {
	Grammar script.Grammar `json:"grammar"`
	// Reason says why a script is outside the grammar.
	Reason string        `json:"-"`
	Steps  []StepVerdict `json:"steps"`
	// Effects is the union of the steps' effects.
	Effects Effects `json:"effects"`
}

// StepVerdict is one step's effects and whether it asks under the context's auto set.
type StepVerdict struct {
	Command string  `json:"command"`
	Effects Effects `json:"effects"`
	Asks    bool    `json:"asks"`
	// Verdict is how the step fares before anyone is asked (Decide): run, ask or refuse.
	Verdict Verdict `json:"verdict"`
	// Rule is the shell rule that decided, when one did.
	Rule string `json:"rule,omitempty"`
	// Step is the step as it would run (its Argv holds the whole script for an exec step).
	Step Step `json:"-"`
	// Fails is why the bash tool fails the step before anything runs, as bash says it (an
	// ambiguous redirect); its effects and verdict are still those of the step as written,
	// in case the sandbox sees otherwise.
	Fails string `json:"fails,omitempty"`
}

// Check judges a whole script without running it. Within the grammar each step's words are
// expanded as the bash tool would (over ctx.Env, globs through ctx.FS, cd, export,
// assignments and unset of earlier steps tracked) and judged by StepEffects. Outside it,
// the script is one exec step carrying every effect of every command it holds — nested
// ones, command substitutions, here-documents and redirections included — and secret for
// any word anywhere that names a secret path.
//
// Law (composed_needs_every_part): the script's effects hold every effect of every step.
func Check(ctx *Context, s *script.Script) Analysis {
	a := Analysis{Grammar: s.Grammar, Reason: s.Reason, Steps: []StepVerdict{}}
	sh := newShell(ctx, s.Source)
	if s.Grammar == script.Exec {
		e := sh.execEffects(s)
		step := Step{Argv: []string{"bash", "-c", s.Source}, Cwd: sh.cwd}
		a.Steps = append(a.Steps, verdict(ctx, StepVerdict{Command: Quote(step.Argv), Effects: e, Step: step}, Parts(s)))
		a.Effects = e
		return a
	}
	st := script.NewState(s.Source, sh.cwd, ctx.Env)
	st.ReadDir, st.IsDir = sh.readDir, sh.isDir
	pipes := script.Pipelines(s.File)
	type plan struct {
		step  Step
		shown string
		err   error
	}
	planned := map[*syntax.Stmt]plan{}
	planOf := func(n *syntax.Stmt) plan {
		p, ok := planned[n]
		if !ok {
			sp, err := st.Plan(n)
			p.step, p.shown = Planned(sp)
			p.err = err
			planned[n] = p
		}
		return p
	}
	for _, n := range s.Steps {
		members := pipes[n]
		if len(members) == 0 {
			members = []*syntax.Stmt{n}
		}
		// The members of a pipeline run at once, each planned from where it starts; one
		// that does not expand fails the pipeline before any of them runs.
		failed := false
		for _, m := range members {
			if planOf(m).err != nil {
				failed = true
			}
		}
		p := planOf(n)
		if failed {
			// The bash tool fails it before anything runs. Where the session's sandbox
			// differs from what the host sees (a glob matching otherwise), it may run: it is
			// judged as written, each word as far as it expands, and never more leniently.
			lenient := *sh
			lenient.cwd = st.Cwd
			step := lenient.plan(n, st.Config())
			e := StepEffects(ctx, step)
			v := verdict(ctx, StepVerdict{Command: sh.source(n), Effects: e, Step: step}, [][]string{step.Argv})
			if p.err != nil {
				v.Fails = p.err.Error()
			} else {
				v.Fails = "another command of its pipeline does not expand"
			}
			a.Steps = append(a.Steps, v)
			a.Effects |= e
			st.Status = 1
			continue
		}
		step := p.step
		for _, m := range members {
			if m != n {
				step.Beside = append(step.Beside, planOf(m).step.Argv)
			}
		}
		e := StepEffects(ctx, step)
		a.Steps = append(a.Steps, verdict(ctx, StepVerdict{Command: p.shown, Effects: e, Step: step}, [][]string{step.Argv}))
		a.Effects |= e
		st.Status = 0 // what it exits with is not known here: as if it succeeded
		if len(members) == 1 {
			if done, status, _, _ := st.Builtin(script.Planned{Argv: step.Argv, Assigns: step.Assigns, Cwd: step.Cwd}); done {
				st.Status = status
			}
		}
	}
	return a
}

// Planned is a command the shell planned (script.State.Plan) as the step the policy judges,
// and as it is shown: its words quoted so that bash reads them back unchanged, its
// redirections' targets named as the script wrote them.
func Planned(p script.Planned) (step Step, shown string) {
	step = Step{Argv: p.Argv, Assigns: p.Assigns, Cwd: p.Cwd}
	show := Step{Argv: p.Argv, Assigns: p.Assigns}
	for _, rd := range p.Redirects {
		step.Redirects = append(step.Redirects, Redirect{FD: rd.FD, Op: rd.Op, Path: rd.Path})
		w := rd.Word
		if rd.Op == ">&" {
			w = rd.Path
		}
		show.Redirects = append(show.Redirects, Redirect{FD: rd.FD, Op: rd.Op, Path: w})
	}
	return step, show.String()
}

// verdict decides a judged step as the bash tool does with nobody attached: by the rules
// and the auto set (Decide); anything but run asks, or is refused by a deny rule.
func verdict(ctx *Context, v StepVerdict, parts [][]string) StepVerdict {
	d, rule := Decide(v.Effects, ctx.Auto, ctx.Rules, parts, AskClients)
	v.Verdict, v.Asks = d, d != RunNow
	if rule != nil {
		v.Rule = rule.String()
	}
	return v
}

// Parts are the literal leading words of every command a script holds at its top level,
// as the rules match them: a deny or an ask of any part decides, an allow only when it
// matches every part.
func Parts(s *script.Script) [][]string {
	var out [][]string
	for _, st := range s.Steps {
		out = append(out, literalWords(st))
	}
	return out
}

// literalWords are a statement's leading literal words (none for other than a simple
// command).
func literalWords(st *syntax.Stmt) []string {
	c, ok := st.Cmd.(*syntax.CallExpr)
	if !ok {
		return nil
	}
	var out []string
	for _, w := range c.Args {
		s, ok := script.Literal(w)
		if !ok {
			break
		}
		out = append(out, s)
	}
	return out
}

// String shows a step exactly as it runs: assignments, quoted words, then redirections.
func (s Step) String() string {
	var b strings.Builder
	for _, a := range s.Assigns {
		k, v, _ := strings.Cut(a, "=")
		b.WriteString(k + "=" + QuoteWord(v) + " ")
	}
	b.WriteString(Quote(s.Argv))
	for _, r := range s.Redirects {
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		if (r.Op == "<" && r.FD != 0) || (r.Op != "<" && r.Op != "&>" && r.FD != 1) {
			b.WriteString(strconv.Itoa(r.FD))
		}
		b.WriteString(r.Op)
		if r.Op == ">&" && (r.Path == "-" || isDigits(r.Path)) {
			b.WriteString(r.Path)
		} else {
			b.WriteString(QuoteWord(r.Path))
		}
	}
	return strings.TrimSpace(b.String())
}

// shell is how a script is read on the host without running it: over the session's
// environment, globs through the path map and ctx.FS. A script of the grammar is planned
// step by step by script.State, as the bash tool plans it; one outside it is read whole
// (execEffects), each word as far as it expands.
type shell struct {
	ctx *Context
	src string
	cwd string
}

func newShell(ctx *Context, src string) *shell {
	cwd := path.Clean(abs("/", ctx.Cwd))
	return &shell{ctx: ctx, src: src, cwd: cwd}
}

func (sh *shell) get(name string) string {
	switch name {
	case "PWD":
		return sh.cwd
	case "?":
		return "0"
	}
	return sh.ctx.Getenv(name)
}

func (sh *shell) config() *expand.Config {
	return &expand.Config{Env: expand.FuncEnviron(sh.get), ReadDir2: sh.readDir}
}

// readDir reads a sandbox directory for a glob, through the path map and ctx.FS.
func (sh *shell) readDir(dir string) ([]fs.DirEntry, error) {
	host := dir
	if sh.ctx.ToHost != nil {
		h, ok := sh.ctx.ToHost(abs(sh.cwd, dir))
		if !ok {
			return nil, fs.ErrNotExist
		}
		host = h
	}
	return sh.ctx.fs().ReadDir(host)
}

// source returns a node's text as written.
func (sh *shell) source(n syntax.Node) string {
	from, to := int(n.Pos().Offset()), int(n.End().Offset())
	if from < 0 || to > len(sh.src) || from > to {
		return ""
	}
	return sh.src[from:to]
}

// fields expands words into fields; a word that does not expand stays as written.
func (sh *shell) fields(cfg *expand.Config, words []*syntax.Word) []string {
	var out []string
	for _, w := range words {
		f, err := expand.Fields(cfg, w)
		if err != nil {
			f = []string{sh.source(w)}
		}
		out = append(out, f...)
	}
	return out
}

// literal expands one word into one string; a word that does not expand stays as written.
func (sh *shell) literal(cfg *expand.Config, w *syntax.Word) string {
	if w == nil {
		return ""
	}
	v, err := expand.Literal(cfg, w)
	if err != nil {
		return sh.source(w)
	}
	return v
}

// plan expands one statement into the step it runs as.
func (sh *shell) plan(st *syntax.Stmt, cfg *expand.Config) Step {
	step := Step{Cwd: sh.cwd}
	switch c := st.Cmd.(type) {
	case *syntax.CallExpr:
		for _, a := range c.Assigns {
			if a.Name != nil {
				step.Assigns = append(step.Assigns, a.Name.Value+"="+sh.literal(cfg, a.Value))
			}
		}
		step.Argv = sh.fields(cfg, c.Args)
	case *syntax.DeclClause:
		name := "declare"
		if c.Variant != nil {
			name = c.Variant.Value
		}
		step.Argv = []string{name}
		for _, a := range c.Args {
			switch {
			case a.Name == nil && a.Value != nil:
				step.Argv = append(step.Argv, sh.literal(cfg, a.Value))
			case a.Name != nil && a.Value != nil:
				step.Argv = append(step.Argv, a.Name.Value+"="+sh.literal(cfg, a.Value))
			case a.Name != nil:
				step.Argv = append(step.Argv, a.Name.Value)
			}
		}
	}
	for _, rd := range st.Redirs {
		step.Redirects = append(step.Redirects, sh.redirect(cfg, rd))
	}
	return step
}

// redirect expands one redirection of the grammar's forms; a relative target stays relative
// to the step's directory.
func (sh *shell) redirect(cfg *expand.Config, rd *syntax.Redirect) Redirect {
	fd := 1
	if rd.Op == syntax.RdrIn {
		fd = 0
	}
	if rd.N != nil {
		if n, err := strconv.Atoi(rd.N.Value); err == nil {
			fd = n
		}
	}
	p := strings.Join(sh.fields(cfg, []*syntax.Word{rd.Word}), " ")
	return Redirect{FD: fd, Op: rd.Op.String(), Path: p}
}

// isDir says whether a sandbox path is a directory, following links, through the path map
// and ctx.FS: what cd needs.
func (sh *shell) isDir(dir string) (bool, error) {
	host := dir
	if sh.ctx.ToHost != nil {
		h, ok := sh.ctx.ToHost(dir)
		if !ok {
			// A directory only the sandbox has (under no mount): the host cannot look, and
			// the steps after the cd are judged from there, as they would run if it is.
			return true, nil
		}
		host = h
	}
	fsys := sh.ctx.fs()
	real, loop := Real(fsys, host)
	if loop {
		return false, fs.ErrInvalid
	}
	fi, err := fsys.Lstat(real)
	if err != nil {
		return false, err
	}
	return fi.IsDir(), nil
}

// execEffects judges a script outside the grammar as one step.
func (sh *shell) execEffects(s *script.Script) Effects {
	e := Exec
	cfg := sh.config()
	cfg.CmdSubst = func(io.Writer, *syntax.CmdSubst) error { return nil }
	cfg.ProcSubst = func(*syntax.ProcSubst) (string, error) { return "/dev/fd/63", nil }
	for _, st := range s.Steps {
		step := sh.plan(st, cfg)
		step.Redirects = nil // judged below, with every other statement's
		e |= StepEffects(sh.ctx, step)
	}
	ps := sh.ctx.paths(sh.cwd)
	syntax.Walk(s.File, func(n syntax.Node) bool {
		switch n := n.(type) {
		case *syntax.Stmt:
			for _, rd := range n.Redirs {
				e |= sh.execRedirect(cfg, rd)
			}
		case *syntax.Word:
			u := use{}
			u.word(sh.literal(cfg, n))
			e |= ps.named(&u, false)
		}
		return true
	})
	return e
}

// execRedirect judges any redirection bash may run. A target built by a command
// substitution or arithmetic is unknown: reading it is read; writing it may write anywhere.
func (sh *shell) execRedirect(cfg *expand.Config, rd *syntax.Redirect) Effects {
	known := true
	syntax.Walk(rd.Word, func(n syntax.Node) bool {
		switch n.(type) {
		case *syntax.CmdSubst, *syntax.ProcSubst, *syntax.ArithmExp:
			known = false
		}
		return known
	})
	target := sh.literal(cfg, rd.Word)
	judge := func(op string) Effects {
		if !known {
			if op == "<" {
				return Read
			}
			return Write | Outside | Protected
		}
		return RedirectEffects(sh.ctx, sh.cwd, Redirect{Op: op, Path: target})
	}
	switch rd.Op {
	case syntax.RdrIn:
		return judge("<")
	case syntax.RdrOut, syntax.AppOut, syntax.RdrClob, syntax.RdrAll, syntax.AppAll:
		return judge(">")
	case syntax.RdrInOut:
		return judge("<") | judge(">")
	case syntax.DplIn, syntax.DplOut:
		if known && (target == "-" || isDigits(target)) {
			return 0
		}
		return judge(">")
	}
	return 0 // here-documents and here-strings: text, no file
}
