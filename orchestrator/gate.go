package orchestrator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"unicode/utf8"

	"github.com/paddockhq/paddock/transport/wire"
)

// HostRequest is an accepted host request, as its handler sees it.
type HostRequest struct {
	ID   string
	Type string
	Body json.RawMessage
}

// Decode decodes the request's body into v; a body that does not decode is the
// agent's error, with code bad_request.
func (r HostRequest) Decode(v any) error {
	if err := json.Unmarshal(r.Body, v); err != nil {
		return &requestError{code: "bad_request", msg: fmt.Sprintf("%s: the body does not decode: %v", r.Type, err)}
	}
	return nil
}

type requestError struct{ code, msg string }

func (e *requestError) Error() string { return e.msg }
func (e *requestError) Code() string  { return e.code }

// Handler serves one type of host request. Its result is the reply's body; an error is the
// reply's error, with the code of a Coded error (else "failed"). The request's Body is
// valid until the handler returns.
type Handler func(ctx context.Context, req HostRequest) (any, error)

// Coded is an error with a stable code for the agent.
type Coded interface {
	error
	Code() string
}

// Gate reads a kernel's frames and admits them one by one (admission.go decides). Accepted
// and refused host requests are answered in the order they arrived, one reply each, by one
// worker; replies and stream chunks are routed as they are read, so output keeps flowing
// while a handler works.
type Gate struct {
	Handlers map[string]Handler
	// Reply writes one frame to the kernel.
	Reply func(*wire.Frame) error
	// Route takes a reply or stream frame; the line is valid until Route returns.
	Route func(h wire.Head, line wire.Line)
	// Read, when set, is called after each frame is dealt with (routed, queued or dropped).
	Read func()
	Log  *slog.Logger

	ids idRing
}

// item is one answer to give, in order.
type item struct {
	adm  Admission
	head wire.Head
	line wire.Line
}

// Run reads frames from r until it ends. It returns nil at the end of the stream, a
// *wire.ProtocolFault for a frame that cannot be answered, or the reader's error. Every host
// request read before the end is answered before Run returns.
func (g *Gate) Run(ctx context.Context, r *wire.Reader) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	queue := make(chan item, 256)
	done := make(chan struct{})
	go func() { // the worker: one reply per host request, in order
		defer close(done)
		for it := range queue {
			g.answer(ctx, it)
		}
	}()
	err := g.read(r, queue)
	close(queue)
	<-done
	return err
}

func (g *Gate) read(r *wire.Reader, queue chan<- item) error {
	for {
		line, err := r.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		facts := FrameFacts{Oversize: line.Oversize()}
		if !facts.Oversize && !utf8.Valid(line.Bytes) {
			facts.HeadErr = &wire.ProtocolFault{Reason: "not UTF-8"}
		} else {
			facts.Head, facts.HeadErr = wire.ReadHead(line.Head, !facts.Oversize)
		}
		if facts.HeadErr == nil && facts.Head.Event == wire.EventHostRequest {
			_, facts.Served = g.Handlers[facts.Head.Type]
			facts.Seen = g.ids.has(facts.Head.ID)
		}
		adm := Admit(facts)
		if adm.Remember {
			g.ids.add(facts.Head.ID)
		}
		switch adm.Action {
		case Fault:
			line.Release()
			var pf *wire.ProtocolFault
			if !errors.As(facts.HeadErr, &pf) {
				pf = &wire.ProtocolFault{Reason: facts.HeadErr.Error()}
			}
			if facts.Oversize {
				pf = &wire.ProtocolFault{Reason: "over the line limit with no readable head: " + pf.Reason}
			}
			return pf
		case Accept, Refuse:
			queue <- item{adm: adm, head: facts.Head, line: line}
		case Route:
			g.Route(facts.Head, line)
			line.Release()
		case Drop:
			line.Release()
			if adm.Code != "" && g.Log != nil {
				g.Log.Warn("frame dropped", "event", facts.Head.Event, "id", facts.Head.ID, "code", adm.Code, "size", line.Size)
			}
		}
		if g.Read != nil {
			g.Read()
		}
	}
}

// answer gives the one reply to a host request.
func (g *Gate) answer(ctx context.Context, it item) {
	id := it.head.ID
	var reply *wire.Frame
	if it.adm.Action == Refuse {
		reply = wire.ErrorReply(id, it.adm.Status, it.adm.Code, refusalText(it))
	} else {
		reply = g.serve(ctx, it)
	}
	it.line.Release()
	if err := g.Reply(reply); err != nil && g.Log != nil {
		g.Log.Warn("reply not written", "id", id, "err", err)
	}
}

func refusalText(it item) string {
	switch it.adm.Code {
	case CodeTooLarge:
		return fmt.Sprintf("the frame is %d bytes, over the limit of %d", it.line.Size, wire.MaxLine)
	case CodeNoType:
		return "a host request needs a type"
	case CodeNoID:
		return "a host request needs an id"
	case CodeUnknownType:
		return fmt.Sprintf("the host does not serve %q", it.head.Type)
	case CodeDuplicate:
		return fmt.Sprintf("id %q was used before", it.head.ID)
	}
	return it.adm.Code
}

func (g *Gate) serve(ctx context.Context, it item) (reply *wire.Frame) {
	id := it.head.ID
	// The body is handed on undecoded: decoding it is the handler's part.
	body, ok := wire.Member(it.line.Bytes, it.head, "body")
	if !ok {
		f, err := wire.Decode(it.line.Bytes)
		if err != nil {
			return wire.ErrorReply(id, wire.StatusError, "bad_request", err.Error())
		}
		body = f.Body
	}
	defer func() {
		if p := recover(); p != nil {
			if g.Log != nil {
				g.Log.Error("host request handler panicked", "type", it.head.Type, "panic", p)
			}
			reply = wire.ErrorReply(id, wire.StatusError, "failed", "the host failed to serve this request")
		}
	}()
	res, err := g.Handlers[it.head.Type](ctx, HostRequest{ID: id, Type: it.head.Type, Body: body})
	if err != nil {
		code := "failed"
		var c Coded
		if errors.As(err, &c) {
			code = c.Code()
		}
		return wire.ErrorReply(id, wire.StatusError, code, err.Error())
	}
	reply, err = wire.Reply(id, res)
	if err != nil {
		return wire.ErrorReply(id, wire.StatusError, "failed", "the reply could not be encoded")
	}
	return reply
}

// idRing remembers the last wire.RememberedIDs ids.
type idRing struct {
	ring [wire.RememberedIDs]string
	next int
	set  map[string]struct{}
}

func (r *idRing) has(id string) bool {
	_, ok := r.set[id]
	return ok
}

func (r *idRing) add(id string) {
	if r.set == nil {
		r.set = make(map[string]struct{}, wire.RememberedIDs)
	}
	if old := r.ring[r.next]; old != "" {
		delete(r.set, old)
	}
	r.ring[r.next] = id
	r.set[id] = struct{}{}
	r.next = (r.next + 1) % len(r.ring)
}
