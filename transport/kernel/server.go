//go:build linux

package kernel

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"os"
	"runtime"
	"sync"
	"syscall"
	"time"

	"github.com/paddockhq/paddock/transport/wire"
)

// server is one kernel's state: what it reads and writes, the execs that run, the process
// groups it started.
type server struct {
	opts   Options
	log    *slog.Logger
	out    *output
	reaper *reaper
	relay  *relay // nil: no host socket
	socket string // the host socket's path, given to every exec; "" without one
	self   string // the kernel's own program, which runs its shell (shell.go)
	// automount: the machine refuses AT_NO_AUTOMOUNT, and commands start through the
	// kernel's tracer (automount.go).
	automount bool
	ctx       context.Context
	cancel    context.CancelFunc

	// execute runs an exec; tests of the request reader put a stub here.
	execute func(*execution) (*wire.ExecResult, error)

	mu      sync.Mutex
	execs   map[string]*execution // running, by request id; guarded by mu
	groups  map[int]bool          // process groups started and maybe alive; guarded by mu
	closing bool                  // no exec starts any more; guarded by mu

	stopOnce sync.Once
	stopping chan struct{} // closed when the kernel is to end

	forward forwarder // the egress listener, once asked for

	handlers sync.WaitGroup // one per request being served
	bg       sync.WaitGroup // TERM-then-KILL escalations
}

func newServer(opts Options, out *output) *server {
	ctx, cancel := context.WithCancel(context.Background())
	s := &server{
		opts:     opts,
		log:      opts.Log,
		ctx:      ctx,
		cancel:   cancel,
		execs:    make(map[string]*execution),
		groups:   make(map[int]bool),
		stopping: make(chan struct{}),
	}
	s.execute = s.run
	s.out = out
	if p, err := os.Executable(); err == nil {
		s.self = p
	} else {
		s.self = os.Args[0]
	}
	s.automount = automountRefused()
	return s
}

// serve reads frames from r until it ends.
func (s *server) serve(r io.Reader) { s.serveLines(wire.NewReader(r)) }

// serveLines handles every line of lines until it ends.
func (s *server) serveLines(lines *wire.Reader) {
	for {
		line, err := lines.Next()
		if err != nil {
			if !errors.Is(err, io.EOF) {
				s.log.Error("reading from the host", "err", err)
			}
			return
		}
		s.handle(line)
	}
}

// handle acts on one line from the host, as decide says.
func (s *server) handle(line wire.Line) {
	d := decide(line)
	switch d.verdict {
	case ignore:
		s.log.Warn("line from the host ignored", "reason", d.reason)
	case refuse:
		s.out.write(wire.ErrorReply(d.id, wire.StatusError, d.err.Code, d.err.Message))
	case answer:
		if s.relay == nil || !s.relay.deliver(d.frame) {
			s.log.Warn("reply to no pending host request", "id", d.frame.ID)
		}
	case acknowledge:
		if s.out.j == nil {
			s.log.Warn("ack ignored: the kernel is not listening")
			return
		}
		var a wire.Ack
		if err := json.Unmarshal(d.frame.Body, &a); err != nil {
			s.log.Warn("ack ignored", "err", err)
			return
		}
		s.out.j.ack(a)
	case judged:
		s.mu.Lock()
		e := s.execs[d.frame.ID]
		s.mu.Unlock()
		if e == nil || e.judges == nil || !e.judges.deliver(d.frame.Step, d.frame.Body) {
			s.log.Warn("verdict for no judge waiting", "exec", d.frame.ID, "judge", d.frame.Step)
			return
		}
		if s.out.j != nil {
			s.out.j.judged(d.frame.ID, d.frame.Step)
		}
	case serve:
		s.dispatch(d.frame)
	}
}

// dispatch serves one request; every path through it replies exactly once.
func (s *server) dispatch(f wire.Frame) {
	select {
	case <-s.stopping:
		s.out.write(wire.ErrorReply(f.ID, wire.StatusError, CodeIO, "the kernel is shutting down"))
		return
	default:
	}
	switch f.Type {
	case wire.TypeShutdown:
		// In the reading goroutine, so nothing read after it starts.
		s.out.reply(f.ID, struct{}{}, nil)
		s.shutdown()
	case wire.TypeExec:
		// Registered before the next line is read, so a signal that follows finds it.
		e, err := s.prepare(f)
		if err != nil {
			s.out.reply(f.ID, nil, err)
			return
		}
		s.out.hold(f.ID)
		s.handlers.Add(1)
		go func() {
			defer s.handlers.Done()
			res, err := s.execute(e)
			s.finishExec(e)
			s.out.ended(f.ID)
			s.out.reply(f.ID, res, err)
		}()
	default:
		h := s.handler(f.Type)
		s.handlers.Add(1)
		go func() {
			defer s.handlers.Done()
			v, err := h(f.Body)
			s.out.reply(f.ID, v, err)
		}()
	}
}

func (s *server) handler(typ string) func(json.RawMessage) (any, error) {
	switch typ {
	case wire.TypeSignal:
		return s.signal
	case wire.TypeReaddir:
		return readdir
	case wire.TypeStat:
		return stat
	case wire.TypeRealpath:
		return realpath
	case wire.TypePing:
		return s.ping
	case wire.TypeChdir:
		return chdir
	case wire.TypeEgress:
		return s.egress
	}
	// decide lets through only served types.
	panic("kernel: no handler for " + typ)
}

// body decodes a request's body; a missing body is the zero value.
func body(raw json.RawMessage, v any) error {
	if len(raw) == 0 {
		return nil
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return errorf(CodeBadRequest, "body: %v", err)
	}
	return nil
}

// prepare reads an exec request and registers it under its id.
func (s *server) prepare(f wire.Frame) (*execution, error) {
	var x wire.Exec
	if err := body(f.Body, &x); err != nil {
		return nil, err
	}
	if err := checkExec(&x); err != nil {
		return nil, err
	}
	e := newExecution(f.ID, x)
	if x.Script != "" || x.Judged {
		e.judges = newJudges(s, f.ID)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.execs[f.ID]; ok {
		return nil, errorf(CodeBadRequest, "exec %q is already running", f.ID)
	}
	s.execs[f.ID] = e
	return e, nil
}

// finishExec forgets an exec that has ended, and its process group once it is empty.
func (s *server) finishExec(e *execution) {
	e.markStarted(0)
	close(e.done)
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.execs, e.id)
	if e.pgid != 0 && syscall.Kill(-e.pgid, 0) == syscall.ESRCH {
		delete(s.groups, e.pgid)
	}
}

// track remembers a process group the kernel started.
func (s *server) track(pgid int) {
	s.mu.Lock()
	s.groups[pgid] = true
	s.mu.Unlock()
}

func (s *server) isClosing() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closing
}

// signal sends a signal to an exec's process group; TERM is followed by KILL after the grace
// when the group has not ended.
func (s *server) signal(raw json.RawMessage) (any, error) {
	var req wire.Signal
	if err := body(raw, &req); err != nil {
		return nil, err
	}
	sig, ok := parseSignal(req.Signal)
	if !ok {
		return nil, errorf(CodeBadRequest, "signal %q: not one of TERM, KILL, INT, HUP, QUIT", req.Signal)
	}
	s.mu.Lock()
	e := s.execs[req.Target]
	s.mu.Unlock()
	if e == nil {
		return nil, errorf(CodeNotFound, "no running exec %q", req.Target)
	}
	select {
	case <-e.started:
	case <-s.ctx.Done():
		return nil, errorf(CodeIO, "the kernel is shutting down")
	}
	select {
	case <-e.done:
		return nil, errorf(CodeNotFound, "exec %q has ended", req.Target)
	default:
	}
	if e.pgid == 0 {
		return nil, errorf(CodeNotFound, "exec %q started no process", req.Target)
	}
	if err := syscall.Kill(-e.pgid, sig); err != nil {
		if err == syscall.ESRCH {
			return nil, errorf(CodeNotFound, "exec %q has no process left", req.Target)
		}
		return nil, classify(err)
	}
	if sig == syscall.SIGTERM {
		grace := s.opts.Grace
		if req.GraceMillis > 0 {
			grace = time.Duration(req.GraceMillis) * time.Millisecond
		}
		s.bg.Add(1)
		go func() {
			defer s.bg.Done()
			s.escalate(e.pgid, grace)
		}()
	}
	return struct{}{}, nil
}

// escalate sends KILL to a process group still alive after grace. It looks often, so that
// it stops once the group is gone and never signals a later group that reuses the number.
func (s *server) escalate(pgid int, grace time.Duration) {
	deadline := time.NewTimer(grace)
	defer deadline.Stop()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-tick.C:
			if syscall.Kill(-pgid, 0) == syscall.ESRCH {
				return
			}
		case <-deadline.C:
			if syscall.Kill(-pgid, 0) == nil {
				syscall.Kill(-pgid, syscall.SIGKILL)
			}
			return
		case <-s.ctx.Done():
			return // the kernel's end kills everything
		}
	}
}

func (s *server) ping(raw json.RawMessage) (any, error) {
	return wire.Hello{
		Version:    s.opts.Version,
		OS:         runtime.GOOS,
		Arch:       runtime.GOARCH,
		PID:        os.Getpid(),
		HostSocket: s.socket,
	}, nil
}

// shutdown asks the kernel to end; finish does it.
func (s *server) shutdown() {
	s.stopOnce.Do(func() { close(s.stopping) })
}

// finish ends the kernel: no exec starts any more, the host socket closes, every process the
// kernel started and every descendant is killed (TERM, a grace, KILL) and reaped, and the
// requests in flight reply.
func (s *server) finish() {
	s.shutdown()
	s.reaper.startMu.Lock() // no start in progress
	s.mu.Lock()
	s.closing = true
	s.mu.Unlock()
	s.reaper.startMu.Unlock()
	s.cancel()
	if s.relay != nil {
		s.relay.close()
	}
	s.forward.close()
	s.killAll()
	s.bg.Wait()
	waitGroup(&s.handlers, 5*time.Second, s.log)
	s.reaper.close()
	if s.relay != nil {
		s.relay.remove()
	}
}

// waitGroup waits for wg at most d: a request blocked on something outside the kernel's
// reach (a FIFO no one opens) must not keep it from ending.
func waitGroup(wg *sync.WaitGroup, d time.Duration, log *slog.Logger) {
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(d):
		log.Warn("requests still in flight at exit")
	}
}
