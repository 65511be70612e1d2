// Package wire holds the frames that pass between the host and a kernel: their types, the
// line splitter with its limits, and the head reader the frame gate decides by. Host and
// kernel share it.
//
// One frame is one JSON object on one line. Its head — `event`, `id`, `type` and the other
// small routing fields — comes first, so that a reader can decide about a frame from its
// first MaxHead bytes without reading the rest.
package wire

import (
	"encoding/json"
)

// Limits of the wire.
const (
	MaxLine       = 32 << 20 // the longest line a reader takes whole, newline excluded
	MaxHead       = 4 << 10  // the part of an over-long line that is read
	RememberedIDs = 1024     // how many host-request ids the gate remembers
	// MaxHostRequests is how many host requests a kernel has waiting for their replies at
	// once, and so how many the host serves at once: a program past it waits in the kernel
	// for a reply to come, it is not refused.
	MaxHostRequests = 64
)

// Events.
const (
	EventRequest     = "request"      // host -> kernel: a request, one reply each
	EventReply       = "reply"        // either way: the answer to a request or host request
	EventStream      = "stream"       // kernel -> host: an output chunk of an exec
	EventHostRequest = "host_request" // kernel -> host: a sandbox program's request, relayed
	// A listening kernel (one that outlives its host's connection) and its host also use:
	EventAttach    = "attach"    // host -> kernel: the first line of a connection (Attach)
	EventChallenge = "challenge" // kernel -> host: the answer to an attach (Challenge)
	EventProve     = "prove"     // host -> kernel: the answer to a challenge (Prove)
	EventResume    = "resume"    // kernel -> host: the first frame once attached (Resume)
	EventAck       = "ack"       // host -> kernel: what the host has handled (Ack); no reply
	// A kernel interpreting a script asks before each command (Judge), and is answered:
	EventJudge   = "judge"   // kernel -> host: a command of an exec to judge; one verdict each
	EventVerdict = "verdict" // host -> kernel: the answer to a judge (Verdict)
)

// Reply statuses.
const (
	StatusOK        = "ok"
	StatusError     = "error"
	StatusDuplicate = "duplicate" // the host request's id was used before
)

// Request types, host -> kernel.
const (
	TypeExec     = "exec"
	TypeSignal   = "signal"
	TypeReaddir  = "readdir"
	TypeStat     = "stat"
	TypeRealpath = "realpath"
	TypePing     = "ping"
	TypeChdir    = "chdir"  // the kernel's own working directory becomes Path
	TypeEgress   = "egress" // the kernel forwards a loopback address to the host's proxy (Egress)
	TypeShutdown = "shutdown"
)

// Frame is one line of the wire. Field order is the wire order: the head fields come first.
// Stream frames carry Step, FD and Data; requests and host requests Type and Body; replies
// Status, and Body or Error.
type Frame struct {
	Event  string          `json:"event"`
	ID     string          `json:"id,omitempty"`
	Type   string          `json:"type,omitempty"`
	Status string          `json:"status,omitempty"`
	Step   int             `json:"step,omitempty"`
	FD     int             `json:"fd,omitempty"`
	Error  *Error          `json:"error,omitempty"`
	Data   []byte          `json:"data,omitempty"`
	Body   json.RawMessage `json:"body,omitempty"`
}

// Error is the error of a reply: a stable code and a message fit for the agent.
type Error struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

func (e *Error) Error() string { return e.Code + ": " + e.Message }

// Append appends f as one line (with its newline) to b.
func Append(b []byte, f *Frame) ([]byte, error) {
	j, err := json.Marshal(f)
	if err != nil {
		return b, err
	}
	b = append(b, j...)
	return append(b, '\n'), nil
}

// Decode reads a whole line as a frame.
func Decode(line []byte) (Frame, error) {
	var f Frame
	if err := json.Unmarshal(line, &f); err != nil {
		return Frame{}, &ProtocolFault{Reason: "not a frame: " + err.Error()}
	}
	if f.Event == "" {
		return Frame{}, &ProtocolFault{Reason: "not a frame: no event"}
	}
	return f, nil
}

// Reply builds the reply to request id with body v.
func Reply(id string, v any) (*Frame, error) {
	body, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return &Frame{Event: EventReply, ID: id, Status: StatusOK, Body: body}, nil
}

// ErrorReply builds an error reply to request id.
func ErrorReply(id, status, code, message string) *Frame {
	return &Frame{Event: EventReply, ID: id, Status: status, Error: &Error{Code: code, Message: message}}
}
