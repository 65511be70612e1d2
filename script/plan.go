package script

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strconv"
	"strings"

	"mvdan.cc/sh/v3/expand"
	"mvdan.cc/sh/v3/syntax"
)

// State is what a script's steps of the grammar leave on the host for the steps after them:
// the working directory, the variables (set, exported, unset) and the last status. The bash
// tool runs a script's steps through it and `paddock policy check` judges them through it,
// so each step is worked out once, the same way: its words, its redirections, what cd does.
type State struct {
	// Src is the script's text, for the words errors name.
	Src string
	// Cwd is the sandbox directory the next step starts in.
	Cwd string
	// Vars are the shell's variables; the exported ones are the steps' environment.
	Vars map[string]expand.Variable
	// Status is the last step's exit status ($?).
	Status int
	// ReadDir lists a sandbox directory, for globs; nil: globs match nothing.
	ReadDir func(dir string) ([]fs.DirEntry, error)
	// IsDir says whether a sandbox path is a directory (following links), for cd: an error
	// for a path that is not there.
	IsDir func(dir string) (bool, error)
}

// NewState is the state a script starts with: in cwd, with env (NAME=value) exported.
func NewState(src, cwd string, env []string) *State {
	sh := &State{Src: src, Cwd: path.Clean(cwd), Vars: map[string]expand.Variable{}}
	for _, kv := range env {
		if k, v, ok := strings.Cut(kv, "="); ok {
			sh.Set(k, v, true)
		}
	}
	sh.Set("PWD", sh.Cwd, true)
	return sh
}

// Set sets a variable.
func (sh *State) Set(k, v string, exported bool) {
	sh.Vars[k] = expand.Variable{Set: true, Exported: exported, Kind: expand.String, Str: v}
}

// Environ is the exported variables, NAME=value, sorted.
func (sh *State) Environ() []string {
	env := make([]string, 0, len(sh.Vars))
	for k, v := range sh.Vars {
		if v.Exported {
			env = append(env, k+"="+v.Str)
		}
	}
	slices.Sort(env)
	return env
}

// Get is a variable as the expander sees it ($? is the last status).
func (sh *State) Get(name string) expand.Variable {
	if name == "?" {
		return expand.Variable{Set: true, Kind: expand.String, Str: strconv.Itoa(sh.Status)}
	}
	return sh.Vars[name]
}

// Each calls f for each variable, until it returns false.
func (sh *State) Each(f func(string, expand.Variable) bool) {
	for k, v := range sh.Vars {
		if !f(k, v) {
			return
		}
	}
}

// Config is the expander's configuration over the shell's state.
func (sh *State) Config() *expand.Config {
	cfg := &expand.Config{Env: sh}
	if sh.ReadDir != nil {
		cfg.ReadDir2 = sh.ReadDir
	}
	return cfg
}

// Planned is one command of the grammar expanded into what it runs as.
type Planned struct {
	Argv      []string // the command and its arguments (export and its words for export)
	Assigns   []string // NAME=value before the command
	Redirects []Redirect
	Cwd       string // the sandbox directory it starts in
}

// Redirect is one redirection of a planned command. Op is <, >, >>, >& (Path holds the
// target descriptor) or &>.
type Redirect struct {
	FD   int
	Op   string
	Path string // the target: absolute (joined to Cwd), a descriptor for >&, "" as written
	Word string // the target as the script wrote it, expanded
}

// Plan expands one command of the grammar into what it runs as, over the shell's state. A
// word that does not expand (${x:?}, a bad substitution) or a redirection that does not
// expand to exactly one word fails the command, as bash fails it: nothing runs.
func (sh *State) Plan(st *syntax.Stmt) (Planned, error) {
	p := Planned{Cwd: sh.Cwd}
	cfg := sh.Config()
	switch c := st.Cmd.(type) {
	case *syntax.CallExpr:
		for _, a := range c.Assigns {
			v, err := expand.Literal(cfg, a.Value)
			if err != nil {
				return p, err
			}
			p.Assigns = append(p.Assigns, a.Name.Value+"="+v)
		}
		argv, err := expand.Fields(cfg, c.Args...)
		if err != nil {
			return p, err
		}
		p.Argv = argv
	case *syntax.DeclClause: // export, the one the grammar takes
		p.Argv = []string{"export"}
		for _, a := range c.Args {
			arg := a.Name.Value
			if a.Value != nil {
				v, err := expand.Literal(cfg, a.Value)
				if err != nil {
					return p, err
				}
				arg += "=" + v
			}
			p.Argv = append(p.Argv, arg)
		}
	}
	for _, rd := range st.Redirs {
		fields, err := expand.Fields(cfg, rd.Word)
		if err != nil {
			return p, err
		}
		if len(fields) != 1 {
			return p, fmt.Errorf("%s: ambiguous redirect", sh.source(rd.Word))
		}
		fd := 1
		if rd.Op == syntax.RdrIn {
			fd = 0
		}
		if rd.N != nil {
			fd, _ = strconv.Atoi(rd.N.Value)
		}
		op, target := rd.Op.String(), fields[0]
		if op != ">&" && target != "" && !path.IsAbs(target) {
			target = path.Join(sh.Cwd, target)
		}
		p.Redirects = append(p.Redirects, Redirect{FD: fd, Op: op, Path: target, Word: fields[0]})
	}
	return p, nil
}

// source is a node's text as written.
func (sh *State) source(n syntax.Node) string {
	from, to := int(n.Pos().Offset()), int(n.End().Offset())
	if from < 0 || to > len(sh.Src) || from > to {
		return ""
	}
	return sh.Src[from:to]
}

// Builtin carries out a planned command the host runs itself: bare assignments, cd, export,
// unset and exit. done is false for any other command (the shell is unchanged); otherwise
// status is its exit status, stderr what bash would print (without its "bash: line N: "),
// and exit says the script ends here.
func (sh *State) Builtin(p Planned) (done bool, status int, stderr string, exit bool) {
	switch {
	case len(p.Argv) == 0: // NAME=value …
		for _, a := range p.Assigns {
			k, v, _ := strings.Cut(a, "=")
			sh.Set(k, v, sh.Vars[k].Exported)
		}
	case p.Argv[0] == "cd":
		dir := sh.Vars["HOME"].Str
		if len(p.Argv) > 1 {
			dir = p.Argv[1]
		}
		if dir == "" {
			return true, 1, "cd: HOME not set", false
		}
		target := dir
		if !path.IsAbs(target) {
			target = path.Join(sh.Cwd, target)
		}
		isDir, err := false, errors.New("no way to look")
		if sh.IsDir != nil {
			isDir, err = sh.IsDir(target)
		}
		switch {
		case err != nil:
			return true, 1, "cd: " + dir + ": No such file or directory", false
		case !isDir:
			return true, 1, "cd: " + dir + ": Not a directory", false
		}
		sh.Set("OLDPWD", sh.Cwd, true)
		sh.Cwd = path.Clean(target) // bash's cd is logical
		sh.Set("PWD", sh.Cwd, true)
	case p.Argv[0] == "export":
		for _, a := range p.Argv[1:] {
			k, v, ok := strings.Cut(a, "=")
			if !ok {
				v = sh.Vars[k].Str
			}
			sh.Set(k, v, true)
		}
	case p.Argv[0] == "unset":
		for _, k := range p.Argv[1:] {
			delete(sh.Vars, k)
		}
	case p.Argv[0] == "exit":
		code := sh.Status
		if len(p.Argv) > 1 {
			n, err := strconv.Atoi(p.Argv[1])
			if err != nil {
				return true, 2, "exit: " + p.Argv[1] + ": numeric argument required", true
			}
			code = n & 0xff
		}
		return true, code, "", true
	default:
		return false, 0, "", false
	}
	return true, 0, "", false
}
