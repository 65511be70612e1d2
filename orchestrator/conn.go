package orchestrator

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/paddockhq/paddock/errdefs"
	"github.com/paddockhq/paddock/transport"
	"github.com/paddockhq/paddock/transport/wire"
)

// ErrKernelGone is the error of a request whose kernel ended before replying.
var ErrKernelGone = errors.New("the kernel ended")

// StalledError ends a connection whose kernel stopped reading: a write to its input made no
// progress within the bound. The kernel is ended and, like one that sent a protocol fault,
// replaced; the calls in flight fail with this error.
type StalledError struct {
	Wait time.Duration // the bound that passed
}

func (e *StalledError) Error() string {
	return fmt.Sprintf("the kernel stopped reading: a write to it made no progress in %v", e.Wait)
}

// Code is the error's stable code.
func (e *StalledError) Code() string { return "kernel_stalled" }

// Class is the error's class.
func (e *StalledError) Class() errdefs.Class { return errdefs.Refused }

// writeWait bounds how long one piece of a write to a kernel may take (see stallWriter). A
// healthy kernel reads its input at all times; a variable so tests can shorten it.
var writeWait = 15 * time.Second

// conn is one running kernel and the frames to and from it. Requests go out under wmu;
// the gate reads everything that comes back and routes replies and stream chunks to the
// pending calls.
type conn struct {
	k   transport.Kernel
	log *slog.Logger

	wmu sync.Mutex
	w   *wire.Writer // guarded by wmu

	mu      sync.Mutex
	pending map[string]*call // guarded by mu
	next    uint64           // guarded by mu
	err     error            // guarded by mu; set when the gate ended
	release []string         // guarded by mu: execs the kernel may forget, sent with the next ack

	// A listening kernel (transport.Resuming) opens with resume, and keeps what it sends
	// until acknowledged: read counts the frames the gate has handled, for the acks.
	resume *wire.Resume
	prefix string // request ids, unlike those of an earlier host of the same kernel
	read   atomic.Uint64

	done chan struct{} // closed when the gate has ended and every pending call failed
}

// ackEvery is how often a listening kernel is told what was handled.
const ackEvery = 20 * time.Millisecond

// call is one request waiting for its reply.
type call struct {
	reply  chan wire.Frame // gets exactly one frame
	stream func(step, fd int, data []byte)
	// judges gets the judges the kernel asks of an exec (judge frames), each to be answered
	// with one verdict; nil for a request that has none, whose judges are refused.
	judges chan judge
}

// judge is one judge a kernel asks of an exec: the command its shell would run, and the
// judge's number within the exec.
type judge struct {
	n int
	j wire.Judge
}

// judgeQueue bounds the judges of one exec waiting for the host: twice as many as a kernel
// asks at once; past it a judge is refused.
const judgeQueue = 32

// newExecCall is the call of an exec whose commands the kernel may ask about.
func newExecCall(stream func(step, fd int, data []byte)) *call {
	return &call{reply: make(chan wire.Frame, 1), stream: stream, judges: make(chan judge, judgeQueue)}
}

// startConn starts reading k's frames through a gate serving handlers. adopt are calls
// waiting for the replies of execs an earlier host sent (a listening kernel's).
func startConn(ctx context.Context, k transport.Kernel, handlers map[string]Handler, log *slog.Logger, adopt map[string]*call) *conn {
	c := &conn{k: k, log: log, pending: map[string]*call{}, done: make(chan struct{})}
	c.w = wire.NewWriter(&stallWriter{w: k.Stdin(), wait: writeWait, stalled: c.stalled})
	if r, ok := k.(transport.Resuming); ok {
		if res, ok := r.Resume(); ok {
			c.resume = &res
			var b [4]byte
			_, _ = rand.Read(b[:])
			c.prefix = "r" + hex.EncodeToString(b[:]) + "-"
		}
	}
	maps.Copy(c.pending, adopt)
	g := &Gate{Handlers: handlers, Reply: c.write, Route: c.route, Log: log, Read: func() { c.read.Add(1) }}
	if c.resume != nil {
		go c.acks()
	}
	go func() {
		err := g.Run(context.WithoutCancel(ctx), wire.NewReader(k.Stdout()))
		if err == nil {
			err = ErrKernelGone
		}
		var pf *wire.ProtocolFault
		if errors.As(err, &pf) {
			log.Error("protocol fault: the kernel sent a frame the host cannot answer; it will be replaced", "fault", pf.Reason)
		}
		c.mu.Lock()
		if c.err == nil { // else a stall ended the conn first, and is its cause
			c.err = err
		}
		err = c.err
		pending := c.pending
		c.pending = nil
		c.mu.Unlock()
		for id, p := range pending {
			p.reply <- *wire.ErrorReply(id, wire.StatusError, "kernel_gone", err.Error())
		}
		close(c.done)
	}()
	return c
}

// stalled ends a conn whose kernel stopped reading: its end is known at once (the conn is
// no longer alive), and ending the kernel closes its input, which ends the write waiting.
func (c *conn) stalled(err *StalledError) {
	c.mu.Lock()
	if c.err == nil {
		c.err = err
	}
	c.mu.Unlock()
	c.log.Error("the kernel stopped reading its input; it will be replaced", "fault", err)
	c.k.Kill()
}

// write writes one frame to the kernel. Writes are one at a time; each is bounded by the
// stallWriter beneath.
func (c *conn) write(f *wire.Frame) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	return c.w.Write(f)
}

// stallWriter writes to a kernel's input in pieces of stallPiece bytes, each of which must be
// taken within wait; else it calls stalled, which ends the kernel and so the write. Pieces
// rather than frames: a large frame to a kernel on a slow link takes long, but keeps moving,
// while a kernel that never reads would hold the host's writer, and with it every reply,
// for ever. Not safe for concurrent use (the conn's wmu serializes writes).
type stallWriter struct {
	w       io.Writer
	wait    time.Duration
	stalled func(*StalledError)
	err     error // set once a write stalled: every later write fails with it
}

const stallPiece = 64 << 10

func (s *stallWriter) Write(p []byte) (int, error) {
	if s.err != nil {
		return 0, s.err
	}
	n := 0
	stall := &StalledError{Wait: s.wait}
	for n < len(p) {
		timer := time.AfterFunc(s.wait, func() { s.stalled(stall) })
		m, err := s.w.Write(p[n:min(len(p), n+stallPiece)])
		n += m
		if !timer.Stop() { // the bound passed: the kernel is being ended, whatever the write did
			s.err = stall
			return n, s.err
		}
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// route hands a reply or stream chunk to its call.
func (c *conn) route(h wire.Head, line wire.Line) {
	c.mu.Lock()
	p := c.pending[h.ID]
	if p != nil && h.Event == wire.EventReply {
		delete(c.pending, h.ID)
	}
	c.mu.Unlock()
	if h.Event == wire.EventJudge {
		c.routeJudge(p, h, line)
		return
	}
	if p == nil {
		if c.resume != nil && c.read.Load() < uint64(c.resume.Replay) {
			return // a frame sent again for an earlier host's request
		}
		c.log.Warn("frame for no pending request", "event", h.Event, "id", h.ID)
		return
	}
	if line.Oversize() {
		err := fmt.Errorf("%s frame of %d bytes is over the limit", h.Event, line.Size)
		if h.Event == wire.EventReply {
			p.reply <- *wire.ErrorReply(h.ID, wire.StatusError, "bad_reply", err.Error())
		}
		return
	}
	switch h.Event {
	case wire.EventReply:
		f, err := wire.Decode(line.Bytes)
		if err != nil {
			f = *wire.ErrorReply(h.ID, wire.StatusError, "bad_reply", err.Error())
		}
		p.reply <- f
	case wire.EventStream:
		data, err := wire.StreamData(line.Bytes, h)
		if err != nil {
			c.log.Warn("stream frame dropped", "id", h.ID, "err", err)
			return
		}
		if p.stream != nil {
			p.stream(h.Step, h.FD, data)
		}
	}
}

// routeJudge hands a judge to its exec's call. A judge that cannot be read, or of an exec
// with no call that takes judges, or past the call's queue, is refused at once: every judge
// gets one verdict, and the kernel's shell ends on a refusal.
func (c *conn) routeJudge(p *call, h wire.Head, line wire.Line) {
	refuse := func(code, msg string) {
		c.log.Warn("judge refused", "exec", h.ID, "judge", h.Step, "code", code)
		c.verdict(h.ID, h.Step, wire.Verdict{Code: code, Message: msg})
	}
	if h.Step <= 0 {
		c.log.Warn("judge without a number dropped", "exec", h.ID)
		return
	}
	if line.Oversize() {
		refuse("too_large", fmt.Sprintf("the command is %d bytes, over the limit", line.Size))
		return
	}
	f, err := wire.Decode(line.Bytes)
	var j wire.Judge
	if err == nil {
		err = json.Unmarshal(f.Body, &j)
	}
	switch {
	case err != nil:
		refuse("bad_request", "the judge does not decode: "+err.Error())
	case p == nil || p.judges == nil:
		refuse("no_exec", "no exec of this host asks about its commands")
	default:
		select {
		case p.judges <- judge{n: h.Step, j: j}:
		default:
			refuse("busy", "too many commands wait to be judged")
		}
	}
}

// verdict sends the answer to a judge. From the reading goroutine it is written by another,
// so that a kernel slow to read holds back no frame the gate reads.
func (c *conn) verdict(exec string, n int, v wire.Verdict) {
	b, _ := json.Marshal(v)
	go c.write(&wire.Frame{Event: wire.EventVerdict, ID: exec, Step: n, Body: b})
}

// request sends one request and waits for its reply; stream gets the request's stream
// chunks, in order, before the reply returns. A reply with status error is returned as a
// *wire.Error.
func (c *conn) request(ctx context.Context, typ string, body any, stream func(step, fd int, data []byte)) (json.RawMessage, error) {
	_, p, err := c.send(typ, body, stream)
	if err != nil {
		return nil, err
	}
	select {
	case f := <-p.reply:
		return replyBody(f)
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// send sends one request; its reply comes on the call's channel.
func (c *conn) send(typ string, body any, stream func(step, fd int, data []byte)) (string, *call, error) {
	return c.sendCall(typ, body, &call{reply: make(chan wire.Frame, 1), stream: stream})
}

// sendExec sends an exec whose commands the kernel may ask about: its judges come on the
// call's judges channel.
func (c *conn) sendExec(x wire.Exec, stream func(step, fd int, data []byte)) (string, *call, error) {
	return c.sendCall(wire.TypeExec, x, newExecCall(stream))
}

func (c *conn) sendCall(typ string, body any, p *call) (string, *call, error) {
	b, err := json.Marshal(body)
	if err != nil {
		return "", nil, err
	}
	id, err := c.register(p)
	if err != nil {
		return "", nil, err
	}
	if err := c.write(&wire.Frame{Event: wire.EventRequest, ID: id, Type: typ, Body: b}); err != nil {
		c.mu.Lock()
		if c.pending != nil {
			delete(c.pending, id)
		}
		c.mu.Unlock()
		return "", nil, fmt.Errorf("%s: %w: %w", typ, ErrKernelGone, err)
	}
	return id, p, nil
}

// register gives a call a fresh id, to which the reply with that id will go; its request is
// not sent.
func (c *conn) register(p *call) (string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		return "", c.err
	}
	c.next++
	id := c.prefix + strconv.FormatUint(c.next, 10)
	c.pending[id] = p
	return id, nil
}

// replyBody returns a reply's body, or its error.
func replyBody(f wire.Frame) (json.RawMessage, error) {
	if f.Status == wire.StatusOK {
		return f.Body, nil
	}
	if f.Error == nil {
		return nil, &wire.Error{Code: f.Status, Message: "request failed"}
	}
	if f.Error.Code == "kernel_gone" {
		return nil, fmt.Errorf("%w: %s", ErrKernelGone, f.Error.Message)
	}
	return nil, f.Error
}

// fault returns the fault that ended the conn, if one did: a *wire.ProtocolFault (a frame
// the host cannot answer) or a *StalledError (a kernel that stopped reading). Nil when the
// conn is alive or its kernel just ended.
func (c *conn) fault() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	var pf *wire.ProtocolFault
	if errors.As(c.err, &pf) {
		return pf
	}
	var se *StalledError
	if errors.As(c.err, &se) {
		return se
	}
	return nil
}

// alive reports whether the kernel is still answering. The gate's end is known (c.err)
// before the calls in flight hear of it, so a caller that heard never finds the conn alive.
func (c *conn) alive() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err == nil
}

// close ends the kernel and waits for the gate.
func (c *conn) close() error {
	err := c.k.Kill()
	<-c.done
	return err
}

// acks tells a listening kernel, every ackEvery, which frames were handled and which execs
// it may forget. Frames sent again at the resume are not acknowledged before all of them
// were read: until then they may still be needed.
func (c *conn) acks() {
	t := time.NewTicker(ackEvery)
	defer t.Stop()
	var sent uint64
	for {
		select {
		case <-c.done:
			return
		case <-t.C:
		}
		var seq uint64
		if n, replay := c.read.Load(), uint64(c.resume.Replay); n >= replay {
			seq = c.resume.Last + n - replay
		}
		c.mu.Lock()
		done := c.release
		c.release = nil
		c.mu.Unlock()
		if seq == sent && len(done) == 0 {
			continue
		}
		b, _ := json.Marshal(wire.Ack{Seq: seq, Done: done})
		if c.write(&wire.Frame{Event: wire.EventAck, Body: b}) != nil {
			return
		}
		sent = seq
	}
}

// forget tells a listening kernel, with the next ack, that an exec's frames are no longer
// needed: its end is recorded.
func (c *conn) forget(id string) {
	if c.resume == nil {
		return
	}
	c.mu.Lock()
	c.release = append(c.release, id)
	c.mu.Unlock()
}
