//go:build linux

package kernel

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"

	"mvdan.cc/sh/v3/expand"
	"mvdan.cc/sh/v3/interp"
	"mvdan.cc/sh/v3/syntax"

	"github.com/paddockhq/paddock/script"
	"github.com/paddockhq/paddock/transport/wire"
)

// This file is the kernel's shell: the interpreter (mvdan.cc/sh/v3/interp) that runs a script
// the host does not run step by step (wire.Exec.Script), and the script of a shell a judged
// exec would start (sh -c SCRIPT, bash FILE, a shell reading its input). Nothing it runs is
// decided here: every program it would start, every builtin it would run and every file it
// would open for a redirection or a source is first sent to the host as a judge frame, and
// happens only on the host's verdict to run, with the words and environment the verdict
// gives. A refusal ends the whole script at once. So every command a script runs is judged
// with the words it really runs with, whatever builds them: loops, functions, eval, command
// substitutions, inner shells.

// maxJudging bounds the judges of one exec waiting for their verdicts at once (a pipeline's
// members and background jobs ask together); past it a command waits in the kernel.
const maxJudging = 16

// maxCapture bounds what one program may write into the shell's memory (a command
// substitution's output); past it the program's output pipe is closed.
const maxCapture = 64 << 20

// maxStdinScript bounds a script a shell would read from its standard input.
const maxStdinScript = 16 << 20

// errRefused ends a script the host refused a command of.
var errRefused = errors.New("refused by the host")

// interpreter is the shell of one exec: the judges it asks, the process groups it started,
// and how it stops.
type interpreter struct {
	s    *server
	exec string
	env0 map[string]string // the exec's own environment: a command's Env is what differs
	slot chan struct{}     // judges in flight

	ctx    context.Context
	cancel context.CancelFunc

	mu      sync.Mutex
	next    int                       // guarded by mu: the last judge's number
	pending map[int]chan wire.Verdict // guarded by mu: judges waiting, by number
	groups  map[int]bool              // guarded by mu: the process groups started
	refused *wire.Verdict             // guarded by mu: the refusal that ended the script
}

func newInterpreter(s *server, e *execution) *interpreter {
	ctx, cancel := context.WithCancel(s.ctx)
	in := &interpreter{s: s, exec: e.id, env0: map[string]string{}, slot: make(chan struct{}, maxJudging),
		ctx: ctx, cancel: cancel, pending: map[int]chan wire.Verdict{}, groups: map[int]bool{}}
	for _, kv := range e.req.Env {
		k, v, _ := strings.Cut(kv, "=")
		in.env0[k] = v
	}
	return in
}

// ask sends a judge and waits for its verdict. The error ends the script: the host refused
// (errRefused), or the script is being stopped.
func (in *interpreter) ask(ctx context.Context, j wire.Judge) (wire.Verdict, error) {
	select {
	case in.slot <- struct{}{}:
		defer func() { <-in.slot }()
	case <-ctx.Done():
		return wire.Verdict{}, ctx.Err()
	}
	body, err := json.Marshal(j)
	if err != nil {
		return wire.Verdict{}, err
	}
	ch := make(chan wire.Verdict, 1)
	in.mu.Lock()
	in.next++
	n := in.next
	in.pending[n] = ch
	in.mu.Unlock()
	defer func() {
		in.mu.Lock()
		delete(in.pending, n)
		in.mu.Unlock()
	}()
	if err := in.s.out.write(&wire.Frame{Event: wire.EventJudge, ID: in.exec, Step: n, Body: body}); err != nil {
		return wire.Verdict{}, err
	}
	select {
	case v := <-ch:
		if !v.Run {
			in.refuse(v)
			return v, errRefused
		}
		return v, nil
	case <-ctx.Done():
		return wire.Verdict{}, ctx.Err()
	}
}

// deliver hands the host's verdict to the judge waiting for it; false when none waits.
func (in *interpreter) deliver(n int, v wire.Verdict) bool {
	in.mu.Lock()
	ch := in.pending[n]
	delete(in.pending, n)
	in.mu.Unlock()
	if ch == nil {
		return false
	}
	ch <- v // buffered, and delivered once
	return true
}

// refuse ends the script: it is told to stop, and every process it started is sent TERM
// (KILL after the grace).
func (in *interpreter) refuse(v wire.Verdict) {
	in.mu.Lock()
	if in.refused == nil {
		in.refused = &v
	}
	in.mu.Unlock()
	in.stop(syscall.SIGTERM)
}

// stop ends the script with a signal: the interpreter stops before its next command, and
// the signal goes to every process group it started.
func (in *interpreter) stop(sig syscall.Signal) {
	in.cancel()
	in.mu.Lock()
	groups := groupList(in.groups)
	in.mu.Unlock()
	for _, g := range groups {
		if syscall.Kill(-g, sig) == nil && sig == syscall.SIGTERM {
			in.s.bg.Add(1)
			go func() {
				defer in.s.bg.Done()
				in.s.escalate(g, in.s.opts.Grace)
			}()
		}
	}
}

// alive reports whether a process group the script started may still have a process.
func (in *interpreter) alive() bool {
	in.mu.Lock()
	defer in.mu.Unlock()
	for g := range in.groups {
		if syscall.Kill(-g, 0) != syscall.ESRCH {
			return true
		}
	}
	return false
}

// forgetGroups drops the script's groups that have ended from the kernel's own list.
func (in *interpreter) forgetGroups() {
	in.mu.Lock()
	groups := groupList(in.groups)
	in.mu.Unlock()
	in.s.mu.Lock()
	defer in.s.mu.Unlock()
	for _, g := range groups {
		if syscall.Kill(-g, 0) == syscall.ESRCH {
			delete(in.s.groups, g)
		}
	}
}

func groupList(m map[int]bool) []int {
	out := make([]int, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// changed is what an environment holds that the exec's own does not: the entries added or
// changed, sorted.
func (in *interpreter) changed(env []string) []string {
	var out []string
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		if old, ok := in.env0[k]; !ok || old != v {
			out = append(out, kv)
		}
	}
	slices.Sort(out)
	return out
}

// shellRun is one script being interpreted: the top-level one, or an inner shell's.
type shellRun struct {
	in     *interpreter
	runner *interp.Runner
	name   string // $0, for messages
}

// runScript runs an exec whose body is a script: its output streams as step 0's.
func (s *server) runScript(e *execution) (*wire.ExecResult, error) {
	x := &e.req
	cwd, err := execDir(x.Cwd)
	if err != nil {
		return nil, err
	}
	in := e.interp
	defer in.cancel()
	devnull, err := os.Open(os.DevNull)
	if err != nil {
		return nil, errorf(CodeIO, "exec: open %s: %v", os.DevNull, err)
	}
	defer devnull.Close()
	var pumps sync.WaitGroup
	var writers [2]*os.File
	for i := range writers {
		r, w, err := os.Pipe()
		if err != nil {
			return nil, errorf(CodeIO, "exec: pipe: %v", err)
		}
		writers[i] = w
		pumps.Add(1)
		go func() {
			defer pumps.Done()
			s.pump(e.id, streamKey{0, i + 1}, r)
		}()
	}
	e.markStarted(0)
	params := x.Params
	if len(params) == 0 {
		params = []string{"bash"}
	}
	env := mergeEnv(x.Env, s.ownEnv())
	code := in.interpret(in.ctx, x.Script, params, nil, cwd, env, devnull, writers[0], writers[1])
	for _, w := range writers {
		w.Close()
	}
	pumps.Wait()
	in.forgetGroups()
	st := wire.ExitStatus{Code: code}
	in.mu.Lock()
	if r := in.refused; r != nil {
		st = wire.ExitStatus{Code: codeNotExecutable, Error: "refused: " + r.Code}
	}
	in.mu.Unlock()
	return &wire.ExecResult{Statuses: []wire.ExitStatus{st}}, nil
}

// ownEnv is what the kernel adds to every program's environment: where the host socket is.
func (s *server) ownEnv() []string {
	if s.socket == "" {
		return nil
	}
	return []string{HostSocketEnv + "=" + s.socket}
}

// interpret runs one script to its end, background jobs included, and gives its status.
// Standard input is a file (a pipe, /dev/null); output may be any writer.
func (in *interpreter) interpret(ctx context.Context, src string, params, options []string, dir string, env []string, stdin *os.File, stdout, stderr io.Writer) int {
	name := params[0]
	file, err := syntax.NewParser(syntax.Variant(syntax.LangBash)).Parse(strings.NewReader(src), name)
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", name, err)
		return 2
	}
	sr := &shellRun{in: in, name: name}
	args := []string{}
	for _, o := range options {
		args = append(args, "-o", o)
	}
	args = append(args, "--")
	args = append(args, params[1:]...)
	r, err := interp.New(
		interp.Env(expand.ListEnviron(env...)),
		interp.Dir(dir),
		interp.Params(args...),
		interp.StdIO(stdin, stdout, stderr),
		interp.CallHandler(sr.call),
		interp.ExecHandlers(func(interp.ExecHandlerFunc) interp.ExecHandlerFunc { return sr.exec }),
		interp.OpenHandler(sr.open),
	)
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", name, err)
		return 2
	}
	sr.runner = r
	err = r.Run(ctx, file)
	if ctx.Err() == nil {
		// A background job goes on after the script's last command, as it would under a
		// shell; the script's output ends with it.
		if wait, perr := syntax.NewParser().Parse(strings.NewReader("wait"), ""); perr == nil {
			r.Run(ctx, wait)
		}
	}
	return statusOf(err, stderr, name)
}

// statusOf is the exit status an interpreter's end gives.
func statusOf(err error, stderr io.Writer, name string) int {
	if err == nil {
		return 0
	}
	if code, ok := interp.IsExitStatus(err); ok {
		return int(code)
	}
	switch {
	case errors.Is(err, errRefused):
		return codeNotExecutable
	case errors.Is(err, context.Canceled):
		return 128 + int(syscall.SIGTERM)
	}
	fmt.Fprintf(stderr, "%s: %v\n", name, err)
	return 1
}

// wrappers are the builtins that run the command named by their operands.
var wrappers = map[string]bool{"command": true, "builtin": true, "exec": true}

// call judges a builtin before it runs. A program, or a function, passes: a program is
// judged when it is about to start (exec), a function's commands as each runs.
func (sr *shellRun) call(ctx context.Context, args []string) ([]string, error) {
	if !interp.IsBuiltin(args[0]) {
		return args, nil
	}
	inner := args
	for len(inner) > 0 && wrappers[inner[0]] {
		inner = inner[1:]
		for len(inner) > 0 && strings.HasPrefix(inner[0], "-") && inner[0] != "-v" && inner[0] != "-V" {
			inner = inner[1:]
		}
	}
	if len(inner) > 0 && !interp.IsBuiltin(inner[0]) && !strings.HasPrefix(inner[0], "-") {
		return args, nil // a wrapper around a program: the program is judged as it starts
	}
	hc := interp.HandlerCtx(ctx)
	if _, err := sr.in.ask(ctx, wire.Judge{Kind: wire.JudgeBuiltin, Argv: args, Cwd: hc.Dir}); err != nil {
		return nil, err
	}
	return args, nil
}

// open judges a file the shell opens, then opens it. /dev/null is the one file opened
// unasked: it is no file, and scripts open it all the time.
func (sr *shellRun) open(ctx context.Context, path string, flag int, perm os.FileMode) (io.ReadWriteCloser, error) {
	hc := interp.HandlerCtx(ctx)
	if !filepath.IsAbs(path) {
		path = filepath.Join(hc.Dir, path)
	}
	if path != os.DevNull {
		op := wire.RedirIn
		switch {
		case flag&os.O_APPEND != 0:
			op = wire.RedirAppend
		case flag&(os.O_WRONLY|os.O_RDWR) != 0:
			op = wire.RedirOut
		}
		if _, err := sr.in.ask(ctx, wire.Judge{Kind: wire.JudgeOpen, Path: path, Op: op, Cwd: hc.Dir}); err != nil {
			return nil, err
		}
	}
	return os.OpenFile(path, flag, perm)
}

// exec judges a program the shell would start, then runs it as the verdict says: a shell
// reading a script is interpreted here instead.
func (sr *shellRun) exec(ctx context.Context, args []string) error {
	hc := interp.HandlerCtx(ctx)
	env := exportedEnv(hc.Env)
	v, err := sr.in.ask(ctx, wire.Judge{Kind: wire.JudgeProgram, Argv: args, Env: sr.in.changed(env), Cwd: hc.Dir})
	if err != nil {
		return err
	}
	argv := args
	if len(v.Argv) > 0 {
		argv = v.Argv
	}
	env = mergeEnv(env, v.Env, sr.in.s.ownEnv())
	getenv := func(k string) string { s, _ := lookupEnv(env, k); return s }
	stdin, _ := hc.Stdin.(*os.File)
	if inv, ok := script.Shell(argv, getenv); ok {
		return sr.in.shell(ctx, inv, hc.Dir, env, stdin, hc.Stdout, hc.Stderr)
	}
	return sr.in.spawn(ctx, sr.prefix(hc), argv, env, hc.Dir, stdin, hc.Stdout, hc.Stderr)
}

// prefix begins the messages the shell writes of a command, as bash does.
func (sr *shellRun) prefix(hc interp.HandlerContext) string {
	if hc.Pos.IsValid() {
		return fmt.Sprintf("%s: line %d: ", sr.name, hc.Pos.Line())
	}
	return sr.name + ": "
}

// shell interprets the script a shell invocation reads, with the same judges.
func (in *interpreter) shell(ctx context.Context, inv script.Invocation, dir string, env []string, stdin *os.File, stdout, stderr io.Writer) error {
	src := inv.Source
	switch {
	case inv.File != "":
		p := inv.File
		if !filepath.IsAbs(p) {
			p = filepath.Join(dir, p)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			fmt.Fprintf(stderr, "%s: %s: %s\n", inv.Params[0], inv.File, errText(err))
			return interp.ExitStatus(codeNotFound)
		}
		src = string(b)
	case inv.Stdin && stdin != nil:
		b, err := io.ReadAll(io.LimitReader(stdin, maxStdinScript+1))
		if err != nil || len(b) > maxStdinScript {
			fmt.Fprintf(stderr, "%s: the script on standard input is over %d bytes or cannot be read\n", inv.Params[0], maxStdinScript)
			return interp.ExitStatus(2)
		}
		src = string(b)
	}
	devnull, err := os.Open(os.DevNull)
	if err != nil {
		return err
	}
	defer devnull.Close()
	if stdin == nil || inv.Stdin {
		stdin = devnull // what a shell reads its script from is used up
	}
	if code := in.interpret(ctx, src, inv.Params, inv.Options, dir, env, stdin, stdout, stderr); code != 0 {
		return interp.ExitStatus(uint8(code))
	}
	return nil
}

// spawn starts a program in a process group of its own, waits for it and gives its status.
// Its descriptors are the shell's own: a file is handed on as it is; any other writer (a
// command substitution) gets a pipe the kernel copies from.
func (in *interpreter) spawn(ctx context.Context, prefix string, argv, env []string, dir string, stdin *os.File, stdout, stderr io.Writer) error {
	pathEnv, hasPath := lookupEnv(env, "PATH")
	path, ns := lookPath(argv[0], pathEnv, dir, hasPath)
	if ns != nil {
		fmt.Fprintln(stderr, prefix+strings.TrimPrefix(ns.msg, "paddock-kernel: "))
		return interp.ExitStatus(uint8(ns.code))
	}
	var files [3]int
	var close []int
	defer func() {
		for _, fd := range close {
			syscall.Close(fd)
		}
	}()
	var copies sync.WaitGroup
	for i, stream := range []any{stdin, stdout, stderr} {
		fd, copyFrom, err := childFD(stream, i == 0)
		if err != nil {
			fmt.Fprintf(stderr, "%s%v\n", prefix, err)
			return interp.ExitStatus(codeNotExecutable)
		}
		files[i] = fd
		close = append(close, fd)
		if copyFrom != nil {
			w := stream.(io.Writer)
			copies.Add(1)
			go func() {
				defer copies.Done()
				defer copyFrom.Close()
				io.Copy(w, io.LimitReader(copyFrom, maxCapture))
			}()
		}
	}
	attr := &syscall.ProcAttr{
		Dir:   dir,
		Env:   env,
		Files: []uintptr{uintptr(files[0]), uintptr(files[1]), uintptr(files[2])},
		Sys:   &syscall.SysProcAttr{Setpgid: true},
	}
	s := in.s
	s.reaper.begin()
	if s.isClosing() || ctx.Err() != nil {
		s.reaper.end()
		return ctx.Err()
	}
	pid, ch, err := s.reaper.forkExec(path, argv, attr)
	if errors.Is(err, syscall.ENOEXEC) {
		s.reaper.end()
		// A file with no #! line is a shell script, as execvp runs it: interpreted here.
		inv := script.Invocation{File: path, Params: argv}
		return in.shell(ctx, inv, dir, env, stdin, stdout, stderr)
	}
	if err == nil {
		in.mu.Lock()
		in.groups[pid] = true
		in.mu.Unlock()
		s.track(pid)
	}
	s.reaper.end()
	for _, fd := range close {
		syscall.Close(fd)
	}
	close = nil
	if err != nil {
		st := startFailure(argv[0], err)
		fmt.Fprintln(stderr, prefix+strings.TrimPrefix(st.Error, "paddock-kernel: "))
		copies.Wait()
		return interp.ExitStatus(uint8(st.Code))
	}
	var ws syscall.WaitStatus
	select {
	case ws = <-ch:
	case <-ctx.Done():
		if syscall.Kill(-pid, syscall.SIGTERM) == nil {
			s.bg.Add(1)
			go func() {
				defer s.bg.Done()
				s.escalate(pid, s.opts.Grace)
			}()
		}
		ws = <-ch
	}
	copies.Wait()
	st := exitStatus(ws)
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if st.Code == 0 {
		return nil
	}
	return interp.ExitStatus(uint8(st.Code))
}

// childFD is the descriptor a child gets for one of the shell's streams: a duplicate of a
// file's, /dev/null for
// no input, and for a writer that is no file a pipe whose read end is returned to copy from.
func childFD(stream any, input bool) (fd int, copyFrom *os.File, err error) {
	switch f := stream.(type) {
	case *os.File:
		if f != nil {
			return dupFD(f)
		}
	case io.Writer:
		if f != nil && !input {
			r, w, err := os.Pipe()
			if err != nil {
				return -1, nil, err
			}
			fd, _, err := dupFD(w)
			w.Close()
			if err != nil {
				r.Close()
				return -1, nil, err
			}
			return fd, r, nil
		}
	}
	flags := syscall.O_WRONLY
	if input {
		flags = syscall.O_RDONLY
	}
	fd, err = syscall.Open(os.DevNull, flags|syscall.O_CLOEXEC, 0)
	return fd, nil, err
}

// dupFD duplicates a file's descriptor, close-on-exec (the child gets it through Files).
func dupFD(f *os.File) (int, *os.File, error) {
	rc, err := f.SyscallConn()
	if err != nil {
		return -1, nil, err
	}
	fd := -1
	var derr error
	if err := rc.Control(func(raw uintptr) {
		fd, derr = syscall.Dup(int(raw))
		if derr == nil {
			syscall.CloseOnExec(fd)
			// A program reads and writes its descriptors blocking; the mode belongs to the
			// open file, which the shell's own end shares, as os.File.Fd would make it.
			derr = syscall.SetNonblock(fd, false)
		}
	}); err != nil {
		return -1, nil, err
	}
	return fd, nil, derr
}

// exportedEnv is the environment a program gets from the shell's variables: the exported
// ones, a later one for a name in place of an earlier.
func exportedEnv(env expand.Environ) []string {
	var list []string
	env.Each(func(name string, vr expand.Variable) bool {
		if !vr.IsSet() {
			list = slices.DeleteFunc(list, func(kv string) bool { return strings.HasPrefix(kv, name+"=") })
		}
		if vr.Exported && vr.Kind == expand.String {
			list = append(list, name+"="+vr.String())
		}
		return true
	})
	return mergeEnv(list)
}

// judgedShell runs one command of a judged pipeline that is a shell reading a script: the
// kernel interprets it on the command's descriptors, its commands judged.
func (s *server) judgedShell(e *execution, inv script.Invocation, dir string, env []string, fds [3]int) <-chan int {
	done := make(chan int, 1)
	files := make([]*os.File, 3)
	for i, fd := range fds {
		if fd < 0 {
			continue
		}
		d, err := syscall.Dup(fd)
		if err == nil {
			syscall.CloseOnExec(d)
			files[i] = os.NewFile(uintptr(d), "fd")
		}
	}
	go func() {
		defer func() {
			for _, f := range files {
				if f != nil {
					f.Close()
				}
			}
		}()
		var stdout, stderr io.Writer = io.Discard, io.Discard
		if files[1] != nil {
			stdout = files[1]
		}
		if files[2] != nil {
			stderr = files[2]
		}
		err := e.interp.shell(e.interp.ctx, inv, dir, env, files[0], stdout, stderr)
		done <- statusOf(err, stderr, inv.Params[0])
	}()
	return done
}
