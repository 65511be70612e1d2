package orchestrator

import "github.com/paddockhq/paddock/transport/wire"

// This file is the frame gate's decision: what becomes of one frame from a kernel. It is pure:
// the reader in gate.go gathers the facts (the frame's head, its size, whether it is UTF-8,
// whether its type is served, its id was used and the gate has room for it) and does what the
// decision says. Frames are decided one by one in the order they arrive; only the replies to
// accepted requests go out in the order their handlers finish.

// Action is what the gate does with a frame.
type Action int

const (
	// Accept: a host request that reaches its handler; the handler's result or error is the
	// one reply.
	Accept Action = iota
	// Refuse: a host request answered with one error reply and no other effect.
	Refuse
	// Route: a reply or a stream chunk, handed to the request it belongs to.
	Route
	// Drop: a frame that needs no reply, dropped (with a diagnostic when it is oversized).
	Drop
	// Fault: a frame the host cannot answer; the kernel is replaced.
	Fault
)

func (v Action) String() string {
	return [...]string{"accept", "refuse", "route", "drop", "fault"}[v]
}

// Refusal codes of the gate.
const (
	CodeTooLarge    = "too_large"    // over wire.MaxLine
	CodeNoType      = "no_type"      // a host request without a type
	CodeNoID        = "no_id"        // a host request without an id
	CodeUnknownType = "unknown_type" // a type the host does not serve
	CodeDuplicate   = "duplicate"    // an id used before
	CodeNotUTF8     = "not_utf8"     // a host request whose line is not UTF-8 past its head
	CodeBusy        = "busy"         // the gate serves as many requests, or holds as many bytes, as it may
)

// FrameFacts are what the gate knows of a frame before deciding.
type FrameFacts struct {
	Head     wire.Head
	HeadErr  error // the head could not be read: not UTF-8, not a frame
	Oversize bool  // the line was over wire.MaxLine; only its head was read
	// NotUTF8: the line is not UTF-8, but every member of its head comes before the first
	// invalid byte, so Head was read.
	NotUTF8 bool
	Served  bool // the host serves Head.Type
	Seen    bool // Head.ID is among the ids remembered
	// Busy: serving the request now would pass the gate's bounds (requests in flight, bytes
	// held).
	Busy bool
}

// Admission is the gate's decision for one frame.
type Admission struct {
	Action Action
	Status string // Refuse: wire.StatusError or wire.StatusDuplicate
	Code   string // Refuse: why; Drop: a diagnostic code when there is one
	// Remember: the frame's id joins the ids remembered.
	Remember bool
}

// Admit decides about one frame. Rules, in order (DESIGN.md "Frame gate"):
//   - a head that cannot be read is a fault (the frame cannot be answered), and so is a frame
//     other than a host request that is not UTF-8;
//   - a host request over the limit, or not UTF-8 past its head, gets one error reply and has
//     no effect: a sandbox program's bad request is refused, it does not end the kernel;
//   - a host request with no id, no type, a used id or an unserved type gets one error
//     reply (a used id: status duplicate) and has no effect;
//   - a host request the gate has no room for gets one error reply, code busy, and has no
//     effect: the reader never waits for a handler, since it also carries the replies a
//     handler may be waiting for;
//   - every other host request is accepted: exactly one handler, one reply;
//   - replies, stream chunks and judges go to their request; an oversized stream chunk is
//     dropped (an oversized judge is refused there);
//   - any other event needs no reply and is dropped.
func Admit(f FrameFacts) Admission {
	if f.HeadErr != nil || (f.NotUTF8 && f.Head.Event != wire.EventHostRequest) {
		return Admission{Action: Fault}
	}
	switch f.Head.Event {
	case wire.EventHostRequest:
		switch {
		case f.Head.ID == "":
			return refuse(wire.StatusError, CodeNoID, false)
		case f.Seen:
			return refuse(wire.StatusDuplicate, CodeDuplicate, false)
		case f.Oversize:
			return refuse(wire.StatusError, CodeTooLarge, true)
		case f.NotUTF8:
			return refuse(wire.StatusError, CodeNotUTF8, true)
		case f.Head.Type == "":
			return refuse(wire.StatusError, CodeNoType, true)
		case !f.Served:
			return refuse(wire.StatusError, CodeUnknownType, true)
		case f.Busy:
			return refuse(wire.StatusError, CodeBusy, true)
		}
		return Admission{Action: Accept, Remember: true}
	case wire.EventStream:
		if f.Oversize {
			return Admission{Action: Drop, Code: CodeTooLarge}
		}
		return Admission{Action: Route}
	case wire.EventReply, wire.EventJudge:
		// A judge is routed to its exec's call, which answers it with one verdict; one the
		// host cannot read is refused there (conn.routeJudge).
		return Admission{Action: Route}
	}
	return Admission{Action: Drop}
}

func refuse(status, code string, remember bool) Admission {
	return Admission{Action: Refuse, Status: status, Code: code, Remember: remember}
}
