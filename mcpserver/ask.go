package mcpserver

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/paddockhq/paddock/orchestrator"
)

// Questions through elicitation. A client that declared the elicitation capability is
// attached to the session as an interactive client for the life of the connection: each
// question the session poses (the step exactly as it runs, its effects; yes, always for this
// session, or no) is put to the client, and its answer is the session's answer. The first
// answer wins, as with every client of the session: a question settled elsewhere is no
// longer asked here. A client without the capability is never attached, so a step that
// asks is refused as unanswered, with its guidance, as in CI.
//
// How a question reaches the client depends on the protocol version it speaks. Before
// 2026-07-28 the server sends an elicitation request as soon as the question is posed.
// From 2026-07-28 a server sends no request of its own while serving one (multi round-trip
// requests, SEP-2322): a tool call that is waiting while a question is open returns the
// question as an input request, the client asks the person and calls again with the answer
// and the request's state, and the call goes on where it was (rounds.go).

// Answers a person can give, as the elicitation's schema offers them.
const (
	answerYes    = "yes"
	answerAlways = "always"
	answerNo     = "no"
)

// questionSchema is the form of every question: one choice.
var questionSchema = json.RawMessage(`{"type":"object","properties":{"answer":{"type":"string","title":"Answer",
"description":"yes: run it once; always: run it and every step that starts with the same command for the rest of this session; no: refuse it",
"enum":["yes","always","no"]}},"required":["answer"]}`)

// attach attaches a client to the session the first time one of its calls shows it can
// answer questions (its capabilities: per request from 2026-07-28, else from its
// initialization); the asker to use, or nil when the client cannot answer. A client of the
// older protocols has an asker of its own for the life of its connection; those of
// 2026-07-28 and later share one, which only queues the questions for their calls to hand
// out, attached until the server stops (Close).
func (x *Server) attach(req *mcp.CallToolRequest) *asker {
	caps := req.ClientCapabilities()
	if caps == nil || caps.Elicitation == nil || req.Session == nil {
		return nil
	}
	name := "mcp"
	if ci := req.ClientInfo(); ci != nil && ci.Name != "" {
		name = "mcp:" + ci.Name
	}
	rounds := req.ProtocolVersion() >= roundsVersion
	x.mu.Lock()
	defer x.mu.Unlock()
	if rounds && x.rounds != nil {
		return x.rounds
	}
	if a := x.direct[req.Session]; !rounds && a != nil {
		return a
	}
	a := &asker{s: x.s, ss: req.Session, name: name, rounds: rounds, open: map[string]context.CancelFunc{},
		pending: map[string]orchestrator.Question{}, changed: make(chan struct{})}
	detach, err := x.s.Attach(a)
	if err != nil {
		return nil // not attached: its questions are refused as unanswered
	}
	if rounds {
		x.rounds = a
		x.detach = append(x.detach, func() { a.leave(); detach() })
		return a
	}
	x.direct[req.Session] = a
	go func() {
		a.ss.Wait() // the connection ended: its questions are no longer asked there
		a.leave()
		detach()
		x.mu.Lock()
		delete(x.direct, a.ss)
		x.mu.Unlock()
	}()
	return a
}

// asker is an MCP client as a client of the session.
type asker struct {
	s    Session
	ss   *mcp.ServerSession
	name string

	// rounds: questions go out as the input requests of tool calls (rounds.go), not as
	// requests of the server's own.
	rounds bool

	mu      sync.Mutex
	gone    bool                             // guarded by mu
	open    map[string]context.CancelFunc    // guarded by mu: the requests in flight, by question
	pending map[string]orchestrator.Question // guarded by mu: rounds: the questions open (posed, not settled)
	changed chan struct{}                    // guarded by mu: rounds: closed and replaced when one is posed
}

func (a *asker) Kind() orchestrator.ClientKind { return orchestrator.Interactive }

// Notify must not block: a question is asked on a goroutine of its own.
func (a *asker) Notify(e orchestrator.Event) {
	switch {
	case e.Kind == orchestrator.EventQuestion && e.Question != nil && a.rounds:
		a.mu.Lock()
		if !a.gone {
			a.pending[e.Question.ID] = *e.Question
			close(a.changed)
			a.changed = make(chan struct{})
		}
		a.mu.Unlock()
	case e.Kind == orchestrator.EventQuestion && e.Question != nil:
		ctx, cancel := context.WithCancel(context.Background())
		a.mu.Lock()
		if a.gone {
			a.mu.Unlock()
			cancel()
			return
		}
		a.open[e.Question.ID] = cancel
		a.mu.Unlock()
		go a.ask(ctx, *e.Question)
	case e.Kind == orchestrator.EventSettled && e.Settled != nil:
		a.mu.Lock()
		cancel := a.open[e.Settled.ID]
		delete(a.open, e.Settled.ID)
		delete(a.pending, e.Settled.ID)
		a.mu.Unlock()
		if cancel != nil {
			cancel()
		}
	}
}

// leave cancels every request in flight.
func (a *asker) leave() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.gone = true
	for id, cancel := range a.open {
		cancel()
		delete(a.open, id)
	}
}

// ask puts q to the client and gives the session its answer. A request that fails or is
// cancelled gives none: the question stays for the session's other clients, and is settled
// as left when every one has gone.
func (a *asker) ask(ctx context.Context, q orchestrator.Question) {
	defer func() {
		a.mu.Lock()
		if c := a.open[q.ID]; c != nil {
			c()
			delete(a.open, q.ID)
		}
		a.mu.Unlock()
	}()
	res, err := a.ss.Elicit(ctx, elicitation(q))
	if err != nil {
		return
	}
	a.answer(q.ID, res)
}

// elicitation is the request that puts q to the person.
func elicitation(q orchestrator.Question) *mcp.ElicitParams {
	return &mcp.ElicitParams{Message: message(q), RequestedSchema: questionSchema}
}

// answer gives the session the person's answer to question id: yes or always run it;
// decline, cancel or no refuse it. An answer to a question settled meanwhile is gone, which
// is what first-answer-wins means.
func (a *asker) answer(id string, res *mcp.ElicitResult) {
	ans := orchestrator.Answer{Client: a.name}
	if res.Action == "accept" {
		switch res.Content["answer"] {
		case answerYes:
			ans.Approve = true
		case answerAlways:
			ans.Approve, ans.ForSession = true, true
		}
	}
	_ = a.s.Answer(id, ans)
}

// next is the questions open that asked does not name, or, when there are none, a channel
// closed once another is posed. A question stays open until it is settled, so a call that
// comes after one that never came back for its answer is given it again.
func (a *asker) next(asked map[string]bool) (map[string]orchestrator.Question, <-chan struct{}) {
	a.mu.Lock()
	defer a.mu.Unlock()
	qs := map[string]orchestrator.Question{}
	for id, q := range a.pending {
		if _, ok := asked[id]; !ok {
			qs[id] = q
		}
	}
	if len(qs) == 0 {
		return nil, a.changed
	}
	return qs, nil
}

// message is a question as the person reads it: what asks, the step exactly as it runs
// (escaped), its effects.
func message(q orchestrator.Question) string {
	who := "The agent"
	if q.Subagent != "" {
		who = fmt.Sprintf("Subagent %q", q.Subagent)
	}
	what := "step"
	if q.Step < 0 {
		what = "file access"
	}
	return fmt.Sprintf("%s asks to run a %s the policy does not allow on its own:\n\n    %s\n\nIts effects: %s. Run it?", who, what, q.Command, q.Effects)
}
