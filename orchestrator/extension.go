package orchestrator

import (
	"context"
	"fmt"
	"maps"
	"slices"

	"github.com/paddockhq/paddock/errdefs"
	"github.com/paddockhq/paddock/policy"
)

// Host request types an embedding program adds with Config.Handlers pass the same gate as
// every other way into the host: a handler runs code on the host on the sandbox's behalf,
// whose effects the policy cannot know, so each request is judged as a step with effect
// exec — run unasked only when the auto set holds exec, else put to the approval route —
// and recorded. A handler cannot take the place of a type the session serves itself
// (fs.read, session.spawn, …): those are judged on what they do, and a replacement would
// run ungated.

// ExtensionEffects are the effects a request of a Config.Handlers type is judged with.
const ExtensionEffects = policy.Exec

// HandlerError is a Config.Handlers entry a session refuses to open with.
type HandlerError struct {
	Type string // the host request type
}

func (e *HandlerError) Error() string {
	return fmt.Sprintf("session: host request type %q is served by the session itself; a handler cannot replace it", e.Type)
}

// Code is the stable code of the error.
func (e *HandlerError) Code() string { return "handler_builtin" }

// Class is the error's class.
func (e *HandlerError) Class() errdefs.Class { return errdefs.Refused }

// builtinTypes are the host request types every session serves itself (hostHandlers).
var builtinTypes = []string{TypeFSRead, TypeFSWrite, TypeFSStat, TypeFSList, TypeFSGlob, TypeFSGrep, TypeFSEdit, TypeSpawn, TypeCollect}

// checkHandlers refuses handlers that would replace a type the session serves.
func checkHandlers(hs map[string]Handler) error {
	for _, typ := range slices.Sorted(maps.Keys(hs)) {
		if slices.Contains(builtinTypes, typ) {
			return &HandlerError{Type: typ}
		}
	}
	return nil
}

// handlers are every host request type the session serves: its own, then those of
// Config.Handlers, each behind the gate.
func (s *Session) handlers() map[string]Handler {
	h := s.hostHandlers()
	for typ, f := range s.cfg.Handlers {
		if _, ok := h[typ]; !ok {
			h[typ] = s.gated(typ, f)
		}
	}
	return h
}

// gated wraps an embedding program's handler: the request runs only when the session's
// gate lets it, and the verdict is recorded.
func (s *Session) gated(typ string, f Handler) Handler {
	return func(ctx context.Context, req HostRequest) (any, error) {
		if run, code := s.pgate.decideRequest(ctx, typ, ExtensionEffects); !run {
			return nil, &requestError{code: code, msg: RefusalText("host request", typ, code, "") + fmt.Sprintf(" (its effects: %s)", ExtensionEffects)}
		}
		return f(ctx, req)
	}
}

// decideRequest decides a host request with effects e as a step is decided: unasked within
// the auto set, else by the approval route. Every verdict is one audit record.
func (g *policyGate) decideRequest(ctx context.Context, what string, e policy.Effects) (bool, string) {
	rec := auditRecord{Session: g.s.id, Subagent: g.s.name, Step: -1, Command: what, Effects: e}
	if g.auto.Decide(e) == policy.Run {
		rec.DecidedBy, rec.Outcome = "auto", "run"
		g.s.audit.record(rec)
		return true, ""
	}
	q := Question{ID: newQuestionID(), Session: g.s.id, Step: -1, Command: policy.Quote([]string{what}), Effects: e}
	if g.s.parent != nil {
		q.Subagent = g.s.name
	}
	r := g.s.route(ctx, q, e)
	rec.Question, rec.DecidedBy, rec.At, rec.By, rec.Outcome = q.ID, r.Outcome, r.At, r.By, r.Outcome
	g.s.audit.record(rec)
	return r.Run, r.Code
}
