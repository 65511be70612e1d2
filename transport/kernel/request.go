//go:build linux

package kernel

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"

	"github.com/paddockhq/paddock/transport/wire"
)

// This file decides what one line from the host is, before anything acts on it. Every line
// with a readable id that is not itself a reply gets exactly one reply: either a handler's,
// when the line is a request the kernel serves, or the refusal decided here.

// verdict is what the kernel does with one line from the host.
type verdict int

const (
	serve       verdict = iota // a request of a served type: its handler replies
	answer                     // the host's reply to a host request: route it to the waiting program
	refuse                     // an error reply to the line's id, nothing else
	acknowledge                // the host's ack (a listening kernel): what it handled
	judged                     // the host's verdict on a judge: route it to the waiting command
	ignore                     // nothing to reply to: a diagnostic on stderr
)

// served are the request types the kernel answers.
var served = map[string]bool{
	wire.TypeExec:     true,
	wire.TypeSignal:   true,
	wire.TypeReaddir:  true,
	wire.TypeStat:     true,
	wire.TypeRealpath: true,
	wire.TypePing:     true,
	wire.TypeChdir:    true,
	wire.TypeEgress:   true,
	wire.TypeShutdown: true,
}

// decision is the verdict on one line with what acting on it needs.
type decision struct {
	verdict verdict
	frame   wire.Frame  // serve, answer, judged: the decoded frame
	id      string      // refuse: the id the error reply carries
	err     *wire.Error // refuse: the error
	reason  string      // ignore: why, for the diagnostic
}

// decide reads one line from the host.
func decide(line wire.Line) decision {
	if line.Oversize() {
		event, id := scanHead(line.Head)
		if id == "" || event == wire.EventReply {
			return decision{verdict: ignore, reason: "line of " + strconv.FormatInt(line.Size, 10) + " bytes over the limit, no request id in its head"}
		}
		return decision{verdict: refuse, id: id, err: errorf(CodeBadRequest, "request of %d bytes is over the limit of %d", line.Size, wire.MaxLine)}
	}
	if len(bytes.TrimSpace(line.Bytes)) == 0 {
		return decision{verdict: ignore, reason: "empty line"}
	}
	f, err := wire.Decode(line.Bytes)
	if err != nil {
		event, id := scanHead(line.Bytes)
		if id == "" || event == wire.EventReply {
			return decision{verdict: ignore, reason: err.Error()}
		}
		return decision{verdict: refuse, id: id, err: errorf(CodeBadRequest, "%v", err)}
	}
	switch {
	case f.Event == wire.EventReply && f.ID != "":
		return decision{verdict: answer, frame: f}
	case f.Event == wire.EventReply:
		return decision{verdict: ignore, reason: "reply without an id"}
	case f.Event == wire.EventAck && f.ID == "":
		return decision{verdict: acknowledge, frame: f}
	case f.Event == wire.EventVerdict && f.ID != "" && f.Step > 0:
		return decision{verdict: judged, frame: f}
	case f.Event == wire.EventVerdict:
		return decision{verdict: ignore, reason: "verdict without an exec id or judge number"}
	case f.ID == "":
		return decision{verdict: ignore, reason: "frame " + strconv.Quote(f.Event) + " without an id"}
	case f.Event != wire.EventRequest:
		return decision{verdict: refuse, id: f.ID, err: errorf(CodeBadRequest, "the kernel takes requests, not %q frames", f.Event)}
	case !served[f.Type]:
		return decision{verdict: refuse, id: f.ID, err: errorf(CodeUnknownType, "unknown request type %q", f.Type)}
	}
	return decision{verdict: serve, frame: f}
}

// scanHead reads the top-level "event" and "id" members of a line that may be cut short or
// broken further on: whatever can be read before the first fault. A member that is not a
// string counts as absent.
func scanHead(b []byte) (event, id string) {
	d := json.NewDecoder(bytes.NewReader(b))
	if t, err := d.Token(); err != nil || t != json.Delim('{') {
		return "", ""
	}
	for d.More() {
		k, err := d.Token()
		if err != nil {
			break
		}
		key, _ := k.(string)
		var v json.RawMessage
		if err := d.Decode(&v); err != nil {
			break
		}
		var s string
		switch key {
		case "event":
			if json.Unmarshal(v, &s) == nil {
				event = s
			}
		case "id":
			if json.Unmarshal(v, &s) == nil {
				id = s
			}
		}
	}
	return event, id
}

// maxFD bounds the descriptors a redirection may name.
const maxFD = 255

// checkExec refuses an exec request that cannot be run as asked.
func checkExec(x *wire.Exec) *wire.Error {
	if x.Script != "" {
		switch {
		case len(x.Commands) > 0 || x.Shell:
			return errorf(CodeBadRequest, "exec: a script has no commands of its own")
		case strings.IndexByte(x.Script, 0) >= 0:
			return errorf(CodeBadRequest, "exec: the script holds a NUL byte")
		case strings.IndexByte(x.Cwd, 0) >= 0:
			return errorf(CodeBadRequest, "exec: cwd holds a NUL byte")
		}
		for _, p := range x.Params {
			if strings.IndexByte(p, 0) >= 0 {
				return errorf(CodeBadRequest, "exec: a parameter holds a NUL byte")
			}
		}
		return checkEnv(x.Env)
	}
	if len(x.Commands) == 0 {
		return errorf(CodeBadRequest, "exec: no commands")
	}
	if x.Shell && len(x.Commands) != 1 {
		return errorf(CodeBadRequest, "exec: a shell script is one command, not %d", len(x.Commands))
	}
	if strings.IndexByte(x.Cwd, 0) >= 0 {
		return errorf(CodeBadRequest, "exec: cwd holds a NUL byte")
	}
	if err := checkEnv(x.Env); err != nil {
		return err
	}
	for i, c := range x.Commands {
		if len(c.Argv) == 0 {
			return errorf(CodeBadRequest, "exec: command %d has no argv", i)
		}
		if err := checkEnv(c.Env); err != nil {
			return err
		}
		for _, a := range c.Argv {
			if strings.IndexByte(a, 0) >= 0 {
				return errorf(CodeBadRequest, "exec: command %d: an argument holds a NUL byte", i)
			}
		}
		for _, r := range c.Redirects {
			if strings.IndexByte(r.Path, 0) >= 0 {
				return errorf(CodeBadRequest, "exec: command %d: a redirection path holds a NUL byte", i)
			}
			if r.FD < 0 || r.FD > maxFD {
				return errorf(CodeBadRequest, "exec: command %d: fd %d out of range 0..%d", i, r.FD, maxFD)
			}
			switch r.Op {
			case wire.RedirIn, wire.RedirOut, wire.RedirAppend:
				if r.Path == "" {
					return errorf(CodeBadRequest, "exec: command %d: redirection %q without a path", i, r.Op)
				}
			case wire.RedirDup:
				if r.DupFD < 0 || r.DupFD > maxFD {
					return errorf(CodeBadRequest, "exec: command %d: fd %d out of range 0..%d", i, r.DupFD, maxFD)
				}
			default:
				return errorf(CodeBadRequest, "exec: command %d: unknown redirection %q", i, r.Op)
			}
		}
	}
	return nil
}

func checkEnv(env []string) *wire.Error {
	for _, kv := range env {
		if i := strings.IndexByte(kv, '='); i <= 0 {
			return errorf(CodeBadRequest, "exec: environment entry %q is not NAME=value", kv)
		}
		if strings.IndexByte(kv, 0) >= 0 {
			return errorf(CodeBadRequest, "exec: environment entry holds a NUL byte")
		}
	}
	return nil
}

// mergeEnv joins environments: a later entry for a name replaces an earlier one in place.
func mergeEnv(envs ...[]string) []string {
	var out []string
	at := make(map[string]int)
	for _, env := range envs {
		for _, kv := range env {
			name := kv[:strings.IndexByte(kv, '=')]
			if i, ok := at[name]; ok {
				out[i] = kv
				continue
			}
			at[name] = len(out)
			out = append(out, kv)
		}
	}
	return out
}

// lookupEnv finds name's value in env.
func lookupEnv(env []string, name string) (string, bool) {
	for _, kv := range env {
		if len(kv) > len(name) && kv[len(name)] == '=' && kv[:len(name)] == name {
			return kv[len(name)+1:], true
		}
	}
	return "", false
}
