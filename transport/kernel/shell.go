//go:build linux

package kernel

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
	"mvdan.cc/sh/v3/expand"
	"mvdan.cc/sh/v3/syntax"

	"github.com/paddockhq/paddock/internal/interp"
	"github.com/paddockhq/paddock/script"
	"github.com/paddockhq/paddock/transport/wire"
)

// This file is the kernel's shell: `paddock-kernel shell`, a process the kernel starts in
// place of a shell a judged exec would run (sh -c SCRIPT, bash FILE, a shell reading its
// input) and for a script the host does not run step by step (wire.Exec.Script). It
// interprets the script with mvdan.cc/sh/v3/interp. Nothing it runs is decided here: every
// program it would start, every builtin it would run and every file it would open for a
// redirection or a source is first sent, as a judge, over its private channel to the kernel
// (descriptor 3), which asks the host; it happens only on the host's verdict to run, with
// the words and environment the verdict gives. A refusal ends the script at once. So every
// command a script runs is judged with the words it really runs with, whatever builds them:
// loops, functions, eval, command substitutions, inner shells.
//
// A process of its own, as a shell is: $$ is its pid, a signal to the pipeline's process
// group ends it, and what the script holds in memory is not the kernel's.

// Bounds of the kernel's shell.
const (
	// maxJudging bounds the judges waiting for their verdicts at once (a pipeline's members
	// and background jobs ask together); past it a command waits.
	maxJudging = 16
	// maxCapture bounds what one program may write into the shell's memory (a command
	// substitution's output); past it the program's output pipe is closed.
	maxCapture = 64 << 20
	// maxStdinScript bounds a script the shell reads from its standard input.
	maxStdinScript = 16 << 20
)

// errRefused ends a script the host refused a command of.
var errRefused = errors.New("refused by the host")

// wrappers are the builtins that run the command named by their operands.
var wrappers = map[string]bool{"command": true, "builtin": true, "exec": true}

// programs are builtins of bash the interpreter does not have, run as the programs of their
// names (kill).
var programs = map[string]bool{"kill": true}

// Marks the shell puts in a command's words on their way from a builtin to the program it
// runs: the words of a script never hold a NUL byte, so no script can make one.
const (
	asProgram = "\x00program" // the next word names a program, not a builtin
	withArgv0 = "\x00argv0"   // exec -a NAME: the next word is the program's argv[0]
)

// Shell is `paddock-kernel shell FD`: it reads the invocation from its channel to the kernel
// (descriptor fd), interprets the script on its standard streams, and returns its exit
// status.
func Shell(fd int, grace time.Duration) int {
	// No other process of the sandbox, same user or not, may read or steer it.
	unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0)
	unix.Prctl(unix.PR_SET_PDEATHSIG, uintptr(syscall.SIGKILL), 0, 0, 0)
	ch := os.NewFile(uintptr(fd), "kernel")
	if ch == nil || fd < 3 {
		fmt.Fprintln(os.Stderr, "paddock-kernel shell: no channel to the kernel")
		return 2
	}
	syscall.CloseOnExec(fd)
	lines := wire.NewReader(ch)
	line, err := lines.Next()
	var inv script.Invocation
	if err == nil {
		var f wire.Frame
		if f, err = wire.Decode(line.Bytes); err == nil {
			err = json.Unmarshal(f.Body, &inv)
		}
	}
	if err != nil || len(inv.Params) == 0 {
		fmt.Fprintln(os.Stderr, "paddock-kernel shell: no script from the kernel")
		return 2
	}
	if grace <= 0 {
		grace = 2 * time.Second
	}
	// Not cancelled at the end: that would stop the background programs, which outlive
	// the shell as they would a shell that forks.
	ctx, cancel := context.WithCancel(context.Background())
	sh := &shell{ch: wire.NewWriter(ch), pending: map[int]chan wire.Verdict{}, slot: make(chan struct{}, maxJudging),
		cancel: cancel, grace: grace}
	go sh.read(lines)
	dir, _ := os.Getwd()
	code := sh.run(ctx, inv, dir, os.Environ(), os.Stdin, os.Stdout, os.Stderr)
	if !sh.isRefused() {
		// A background program the host holds the shell for (it changes names) ends
		// before the shell does, so that no later step is judged while it runs.
		sh.held.Wait()
	}
	if sh.isRefused() {
		// The script ends at once: the processes it started get TERM, the shell does not
		// wait for them (the kernel's signal to the group follows with KILL).
		signal.Ignore(syscall.SIGTERM)
		syscall.Kill(0, syscall.SIGTERM)
		return codeNotExecutable
	}
	return code
}

// shell is the state of one shell process.
type shell struct {
	wmu sync.Mutex
	ch  *wire.Writer // guarded by wmu

	slot   chan struct{}
	cancel context.CancelFunc
	grace  time.Duration

	mu      sync.Mutex
	next    int                       // guarded by mu
	pending map[int]chan wire.Verdict // guarded by mu
	refused bool                      // guarded by mu
	atWork  map[int][]string          // guarded by mu: the programs judged and not yet ended, each by a number of its own
	held    sync.WaitGroup            // the programs whose verdict holds the shell until they end
}

// work records a program about to be judged as at work, and gives the words of the others
// at work: its judge's Beside. Recorded before it is asked, so that of two commands judged
// at once the later sees the earlier. end takes it off.
func (sh *shell) work(argv []string) (beside [][]string, end func()) {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	beside = sh.othersLocked()
	if sh.atWork == nil {
		sh.atWork = map[int][]string{}
	}
	sh.next++
	n := sh.next
	sh.atWork[n] = argv
	return beside, func() {
		sh.mu.Lock()
		delete(sh.atWork, n)
		sh.mu.Unlock()
	}
}

// beside is the words of the programs at work: the Beside of a builtin's or an open's judge.
func (sh *shell) beside() [][]string {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	return sh.othersLocked()
}

// othersLocked is the words of the programs at work, within a judge's bounds; the caller
// holds mu.
func (sh *shell) othersLocked() [][]string {
	var beside [][]string
	for _, other := range sh.atWork {
		beside = append(beside, other)
	}
	return wire.BoundBeside(beside)
}

// read takes the kernel's verdicts; the channel's end ends the script.
func (sh *shell) read(lines *wire.Reader) {
	defer sh.cancel()
	for {
		line, err := lines.Next()
		if err != nil {
			return
		}
		f, err := wire.Decode(line.Bytes)
		if err != nil || f.Event != wire.EventVerdict {
			continue
		}
		var v wire.Verdict
		if json.Unmarshal(f.Body, &v) != nil {
			v = wire.Verdict{Code: "bad_verdict"}
		}
		sh.mu.Lock()
		ch := sh.pending[f.Step]
		delete(sh.pending, f.Step)
		sh.mu.Unlock()
		if ch != nil {
			ch <- v
		}
	}
}

// ask sends a judge and waits for its verdict. The error ends the script: the host refused
// (errRefused), or the script is being stopped.
func (sh *shell) ask(ctx context.Context, j wire.Judge) (wire.Verdict, error) {
	select {
	case sh.slot <- struct{}{}:
		defer func() { <-sh.slot }()
	case <-ctx.Done():
		return wire.Verdict{}, ctx.Err()
	}
	body, err := json.Marshal(j)
	if err != nil {
		return wire.Verdict{}, err
	}
	ch := make(chan wire.Verdict, 1)
	sh.mu.Lock()
	sh.next++
	n := sh.next
	sh.pending[n] = ch
	sh.mu.Unlock()
	defer func() {
		sh.mu.Lock()
		delete(sh.pending, n)
		sh.mu.Unlock()
	}()
	sh.wmu.Lock()
	err = sh.ch.Write(&wire.Frame{Event: wire.EventJudge, Step: n, Body: body})
	sh.wmu.Unlock()
	if err != nil {
		sh.cancel()
		return wire.Verdict{}, err
	}
	select {
	case v := <-ch:
		if !v.Run {
			sh.mu.Lock()
			sh.refused = true
			sh.mu.Unlock()
			sh.cancel()
			return v, errRefused
		}
		return v, nil
	case <-ctx.Done():
		return wire.Verdict{}, ctx.Err()
	}
}

func (sh *shell) isRefused() bool {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	return sh.refused
}

// run interprets the script of an invocation to its end, background jobs included, and gives
// its status. A script file is read here; one on standard input is read whole first.
func (sh *shell) run(ctx context.Context, inv script.Invocation, dir string, env []string, stdin *os.File, stdout, stderr io.Writer) int {
	name := inv.Params[0]
	src := inv.Source
	switch {
	case inv.File != "":
		p := inv.File
		if !filepath.IsAbs(p) {
			p = filepath.Join(dir, p)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			fmt.Fprintf(stderr, "%s: %s: %s\n", name, inv.File, errText(err))
			return codeNotFound
		}
		src = string(b)
	case inv.Stdin:
		if stdin != nil {
			b, err := io.ReadAll(io.LimitReader(stdin, maxStdinScript+1))
			if err != nil || len(b) > maxStdinScript {
				fmt.Fprintf(stderr, "%s: the script on standard input is over %d bytes or cannot be read\n", name, maxStdinScript)
				return 2
			}
			src = string(b)
		}
		stdin = nil // what the script was read from is used up
	}
	if stdin == nil {
		devnull, err := os.Open(os.DevNull)
		if err != nil {
			fmt.Fprintf(stderr, "%s: %v\n", name, err)
			return 2
		}
		defer devnull.Close()
		stdin = devnull
	}
	file, err := syntax.NewParser(syntax.Variant(syntax.LangBash)).Parse(strings.NewReader(src), name)
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", name, err)
		return 2
	}
	sr := &shellRun{sh: sh, name: name}
	var args []string
	for _, o := range inv.Options {
		args = append(args, "-o", o)
	}
	args = append(append(args, "--"), inv.Params[1:]...)
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
	err = r.Run(ctx, file)
	if ctx.Err() == nil {
		// A background job of shell code goes on after the script's last command, as a
		// forked shell would: the shell ends with it. A background program goes on alone.
		r.WaitShellJobs()
	}
	if err == nil {
		return 0
	}
	var code interp.ExitStatus
	if errors.As(err, &code) {
		return int(code)
	}
	if ctx.Err() != nil {
		return 128 + int(syscall.SIGTERM)
	}
	fmt.Fprintf(stderr, "%s: %v\n", name, err)
	return 1
}

// shellRun is one script being interpreted: the top-level one, or an inner shell's.
type shellRun struct {
	sh   *shell
	name string // $0, for messages
}

// call judges a builtin before it runs. A program, or a function, passes: a program is
// judged when it is about to start (exec), a function's commands as each runs.
func (sr *shellRun) call(ctx context.Context, args []string) ([]string, error) {
	if programs[args[0]] {
		return append([]string{asProgram}, args...), nil
	}
	if len(args) > 3 && args[0] == "exec" && args[1] == "-a" {
		return append([]string{"exec", withArgv0}, args[2:]...), nil
	}
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
	if _, err := sr.sh.ask(ctx, wire.Judge{Kind: wire.JudgeBuiltin, Argv: args, Cwd: hc.Dir, Beside: sr.sh.beside()}); err != nil {
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
		if _, err := sr.sh.ask(ctx, wire.Judge{Kind: wire.JudgeOpen, Path: path, Op: op, Cwd: hc.Dir, Beside: sr.sh.beside()}); err != nil {
			return nil, err
		}
	}
	return os.OpenFile(path, flag, perm)
}

// exec judges a program the shell would start, then runs it as the verdict says: a shell
// reading a script is interpreted here instead, with the same judges.
func (sr *shellRun) exec(ctx context.Context, args []string) error {
	hc := interp.HandlerCtx(ctx)
	argv0 := ""
	switch args[0] {
	case asProgram:
		args = args[1:]
	case withArgv0:
		argv0, args = args[1], args[2:]
	}
	env := exportedEnv(hc.Env)
	beside, end := sr.sh.work(args)
	defer end()
	v, err := sr.sh.ask(ctx, wire.Judge{Kind: wire.JudgeProgram, Argv: args, Env: changedEnv(env), Cwd: hc.Dir, Beside: beside})
	if err != nil {
		return err
	}
	if v.Hold {
		sr.sh.held.Add(1)
		defer sr.sh.held.Done()
	}
	argv := args
	if len(v.Argv) > 0 {
		argv = v.Argv
	}
	env = mergeEnv(env, v.Env)
	getenv := func(k string) string { s, _ := lookupEnv(env, k); return s }
	stdin, _ := hc.Stdin.(*os.File)
	if inv, ok := script.Shell(argv, getenv); ok {
		hc.NoProgram()
		return sr.sh.inner(ctx, inv, hc.Dir, env, stdin, hc.Stdout, hc.Stderr)
	}
	return sr.sh.spawn(ctx, sr.prefix(hc), argv, argv0, env, hc.Dir, stdin, hc.Stdout, hc.Stderr, hc.Started)
}

// prefix begins the messages the shell writes of a command, as bash does.
func (sr *shellRun) prefix(hc interp.HandlerContext) string {
	if hc.Pos.IsValid() {
		return fmt.Sprintf("%s: line %d: ", sr.name, hc.Pos.Line())
	}
	return sr.name + ": "
}

// inner interprets an inner shell's script in this process.
func (sh *shell) inner(ctx context.Context, inv script.Invocation, dir string, env []string, stdin *os.File, stdout, stderr io.Writer) error {
	if code := sh.run(ctx, inv, dir, env, stdin, stdout, stderr); code != 0 {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return interp.ExitStatus(uint8(code))
	}
	return nil
}

// spawn starts a program, waits for it and gives its status. Its descriptors are the shell's
// own: a file is handed on as it is; any other writer (a command substitution) is copied
// into, at most maxCapture bytes. Stopping the script sends it TERM, then KILL after the
// grace.
func (sh *shell) spawn(ctx context.Context, prefix string, argv []string, argv0 string, env []string, dir string, stdin *os.File, stdout, stderr io.Writer, started func(pid int)) error {
	pathEnv, hasPath := lookupEnv(env, "PATH")
	path, ns := lookPath(argv[0], pathEnv, dir, hasPath)
	if ns != nil {
		fmt.Fprintln(stderr, prefix+strings.TrimPrefix(ns.msg, "paddock-kernel: "))
		return interp.ExitStatus(uint8(ns.code))
	}
	cmd := exec.CommandContext(ctx, path)
	cmd.Args, cmd.Env, cmd.Dir = argv, env, dir
	if argv0 != "" {
		cmd.Args = append([]string{argv0}, argv[1:]...)
	}
	if stdin != nil {
		cmd.Stdin = stdin
	}
	cmd.Stdout, cmd.Stderr = capped(stdout), capped(stderr)
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = sh.grace
	err := cmd.Start()
	if err == nil {
		started(cmd.Process.Pid)
	}
	if errors.Is(err, syscall.ENOEXEC) {
		// A file with no #! line is a shell script, as execvp runs it: interpreted here.
		started(0)
		return sh.inner(ctx, script.Invocation{File: path, Params: argv}, dir, env, stdin, stdout, stderr)
	}
	if err != nil {
		st := startFailure(argv[0], err)
		fmt.Fprintln(stderr, prefix+strings.TrimPrefix(st.Error, "paddock-kernel: "))
		return interp.ExitStatus(uint8(st.Code))
	}
	err = cmd.Wait()
	if ctx.Err() != nil {
		return ctx.Err()
	}
	var ee *exec.ExitError
	switch {
	case err == nil, errors.Is(err, exec.ErrWaitDelay):
		return nil
	case errors.As(err, &ee):
		st := exitStatus(ee.Sys().(syscall.WaitStatus))
		return interp.ExitStatus(uint8(st.Code))
	}
	return err
}

// capped bounds what a program writes to a writer that is no file.
func capped(w io.Writer) io.Writer {
	if _, ok := w.(*os.File); ok || w == nil {
		return w
	}
	return &capWriter{w: w, left: maxCapture}
}

type capWriter struct {
	w    io.Writer
	left int
}

func (c *capWriter) Write(p []byte) (int, error) {
	if len(p) > c.left {
		n, _ := c.w.Write(p[:c.left])
		c.left = 0
		return n, fmt.Errorf("output over %d bytes", maxCapture)
	}
	c.left -= len(p)
	return c.w.Write(p)
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

// shellEnv0 is the environment the shell started with: a command's Env is what differs.
var shellEnv0 = func() map[string]string {
	m := map[string]string{}
	for _, kv := range os.Environ() {
		k, v, _ := strings.Cut(kv, "=")
		m[k] = v
	}
	return m
}()

// changedEnv is what an environment holds that the shell's own did not: the entries added
// or changed, sorted.
func changedEnv(env []string) []string {
	var out []string
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		if old, ok := shellEnv0[k]; !ok || old != v {
			out = append(out, kv)
		}
	}
	slices.Sort(out)
	return out
}
