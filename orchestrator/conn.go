package orchestrator

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/paddockhq/paddock/transport"
	"github.com/paddockhq/paddock/transport/wire"
)

// ErrKernelGone is the error of a request whose kernel ended before replying.
var ErrKernelGone = errors.New("the kernel ended")

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
}

// startConn starts reading k's frames through a gate serving handlers. adopt are calls
// waiting for the replies of execs an earlier host sent (a listening kernel's).
func startConn(ctx context.Context, k transport.Kernel, handlers map[string]Handler, log *slog.Logger, adopt map[string]*call) *conn {
	c := &conn{k: k, log: log, w: wire.NewWriter(k.Stdin()), pending: map[string]*call{}, done: make(chan struct{})}
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
		c.err = err
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

func (c *conn) write(f *wire.Frame) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	return c.w.Write(f)
}

// route hands a reply or stream chunk to its call.
func (c *conn) route(h wire.Head, line wire.Line) {
	c.mu.Lock()
	p := c.pending[h.ID]
	if p != nil && h.Event == wire.EventReply {
		delete(c.pending, h.ID)
	}
	c.mu.Unlock()
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
	b, err := json.Marshal(body)
	if err != nil {
		return "", nil, err
	}
	p := &call{reply: make(chan wire.Frame, 1), stream: stream}
	c.mu.Lock()
	if c.err != nil {
		err := c.err
		c.mu.Unlock()
		return "", nil, err
	}
	c.next++
	id := c.prefix + strconv.FormatUint(c.next, 10)
	c.pending[id] = p
	c.mu.Unlock()
	if err := c.write(&wire.Frame{Event: wire.EventRequest, ID: id, Type: typ, Body: b}); err != nil {
		c.mu.Lock()
		if c.pending != nil {
			delete(c.pending, id)
		}
		c.mu.Unlock()
		return "", nil, fmt.Errorf("%s: %w (%v)", typ, ErrKernelGone, err)
	}
	return id, p, nil
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

// fault returns the protocol fault that ended the conn, if one did.
func (c *conn) fault() *wire.ProtocolFault {
	c.mu.Lock()
	defer c.mu.Unlock()
	var pf *wire.ProtocolFault
	if errors.As(c.err, &pf) {
		return pf
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
