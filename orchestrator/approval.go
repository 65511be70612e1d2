package orchestrator

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"reflect"
	"sync"
	"time"

	"github.com/paddockhq/paddock/errdefs"
	"github.com/paddockhq/paddock/policy"
)

// ClientKind says how a client takes questions.
type ClientKind string

const (
	// Interactive clients (a terminal, a dashboard) are shown every question and answer it.
	Interactive ClientKind = "interactive"
	// Gateway clients (a phone, a bot) show no question: their session answers by the
	// gateway rule.
	Gateway ClientKind = "gateway"
)

// Client is one client attached to a session. Notify gets the session's events in order;
// it must not block (a client queues what it cannot take at once).
type Client interface {
	Kind() ClientKind
	Notify(Event)
}

// Event kinds.
const (
	EventQuestion = "question" // a step asks; answer with Session.Answer
	EventSettled  = "settled"  // a question is settled; answers to it are refused now
)

// Event is what a client is told.
type Event struct {
	Kind     string      `json:"kind"`
	Question *Question   `json:"question,omitempty"`
	Settled  *Settlement `json:"settled,omitempty"`
}

// Question is a step (or a file access) that asks.
type Question struct {
	ID       string         `json:"id"`
	Session  string         `json:"session"`            // the session whose step asks
	Subagent string         `json:"subagent,omitempty"` // the asking subagent's name, when a child asks
	Step     int            `json:"step"`               // the step's index in its script
	Command  string         `json:"command"`            // the step exactly as it runs, escaped
	Effects  policy.Effects `json:"effects"`
	// Connect, for a connection that asks (effect net), is its target, host:port.
	Connect string `json:"connect,omitempty"`
}

// Outcomes of a question.
const (
	Approved  = "approved"
	Denied    = "denied"
	Cancelled = "cancelled" // the step ended or was cancelled first
	Left      = "left"      // every interactive client left without answering
)

// Settlement says how a question was settled.
type Settlement struct {
	ID      string `json:"id"`
	Outcome string `json:"outcome"`
	By      string `json:"by,omitempty"` // the client that answered
}

// Answer is a client's answer to a question.
type Answer struct {
	Approve bool
	// ForSession adds a session rule allowing steps that start with the same command.
	ForSession bool
	// Client names who answered, for the audit record.
	Client string
}

// GoneError is an answer to a question that is settled or unknown.
type GoneError struct{ ID string }

func (e *GoneError) Error() string { return fmt.Sprintf("question %s is settled or unknown", e.ID) }

// Code is the stable code of the error.
func (e *GoneError) Code() string { return "shell_approval_gone" }

// Class is the error's class.
func (e *GoneError) Class() errdefs.Class { return errdefs.Gone }

// clients holds a session's attached clients and the questions shown to them.
type clients struct {
	mu       sync.Mutex
	attached map[string]Client    // guarded by mu
	open     map[string]*question // guarded by mu: questions shown to this session's clients
	changed  chan struct{}        // guarded by mu: closed and replaced when a client leaves
	joined   chan struct{}        // guarded by mu: closed and replaced when a client attaches
	nextID   int                  // guarded by mu
	// testAwaiting, a test's hook, is called (with mu held) each time a question begins to
	// wait for a client to attach to the session.
	testAwaiting func() // guarded by mu
}

// question is one open question at a session.
type question struct {
	q      Question
	answer chan Answer // gets the first answer
}

// Attach attaches a client; detach removes it. A client attached while questions are open
// is shown them.
func (s *Session) Attach(c Client) (detach func()) {
	cl := &s.clients
	cl.mu.Lock()
	if cl.attached == nil {
		cl.attached = map[string]Client{}
	}
	cl.nextID++
	id := fmt.Sprintf("c%d", cl.nextID)
	cl.attached[id] = c
	if cl.joined != nil {
		close(cl.joined)
		cl.joined = nil
	}
	var open []Question
	for _, q := range cl.open {
		open = append(open, q.q)
	}
	cl.mu.Unlock()
	if c.Kind() == Interactive {
		for _, q := range open {
			c.Notify(Event{Kind: EventQuestion, Question: &q})
		}
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			cl.mu.Lock()
			delete(cl.attached, id)
			if cl.changed != nil {
				close(cl.changed)
				cl.changed = nil
			}
			cl.mu.Unlock()
		})
	}
}

// joining returns a channel closed when a client next attaches.
func (cl *clients) joining() <-chan struct{} {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	if cl.joined == nil {
		cl.joined = make(chan struct{})
	}
	if cl.testAwaiting != nil {
		cl.testAwaiting()
	}
	return cl.joined
}

// presence counts the session's clients by kind.
func (cl *clients) presence() policy.Presence {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	var p policy.Presence
	for _, c := range cl.attached {
		if c.Kind() == Interactive {
			p.Interactive++
		} else {
			p.Gateways++
		}
	}
	return p
}

// Answer answers an open question of this session. The first answer decides; a later one,
// or one to an unknown question, gets a *GoneError.
func (s *Session) Answer(id string, a Answer) error {
	cl := &s.clients
	cl.mu.Lock()
	q := cl.open[id]
	delete(cl.open, id)
	cl.mu.Unlock()
	if q == nil {
		return &GoneError{ID: id}
	}
	q.answer <- a
	return nil
}

// pose shows q to the session's interactive clients and waits for the first answer, for
// every interactive client to leave, or for ctx to end. Every client is told how it settled.
func (cl *clients) pose(ctx context.Context, q Question) (Answer, string) {
	qq := &question{q: q, answer: make(chan Answer, 1)}
	cl.mu.Lock()
	if cl.open == nil {
		cl.open = map[string]*question{}
	}
	cl.open[q.ID] = qq
	targets := cl.snapshot()
	cl.mu.Unlock()
	for _, c := range targets {
		if c.Kind() == Interactive {
			c.Notify(Event{Kind: EventQuestion, Question: &q})
		}
	}
	for {
		cl.mu.Lock()
		if cl.changed == nil {
			cl.changed = make(chan struct{})
		}
		changed := cl.changed
		interactive := 0
		for _, c := range cl.attached {
			if c.Kind() == Interactive {
				interactive++
			}
		}
		cl.mu.Unlock()
		if interactive == 0 {
			if cl.withdraw(q.ID) {
				cl.settle(Settlement{ID: q.ID, Outcome: Left})
				return Answer{}, Left
			}
		}
		select {
		case a := <-qq.answer:
			outcome := Denied
			if a.Approve {
				outcome = Approved
			}
			cl.settle(Settlement{ID: q.ID, Outcome: outcome, By: a.Client})
			return a, outcome
		case <-changed:
		case <-ctx.Done():
			if cl.withdraw(q.ID) {
				cl.settle(Settlement{ID: q.ID, Outcome: Cancelled})
				return Answer{}, Cancelled
			}
		}
	}
}

// withdraw removes an open question; false when an answer took it first (it is then on the
// question's channel).
func (cl *clients) withdraw(id string) bool {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	if _, ok := cl.open[id]; !ok {
		return false
	}
	delete(cl.open, id)
	return true
}

// settle tells every attached client how a question settled.
func (cl *clients) settle(st Settlement) {
	cl.mu.Lock()
	targets := cl.snapshot()
	cl.mu.Unlock()
	for _, c := range targets {
		c.Notify(Event{Kind: EventSettled, Settled: &st})
	}
}

// snapshot lists the attached clients; the caller holds mu.
func (cl *clients) snapshot() []Client {
	out := make([]Client, 0, len(cl.attached))
	for _, c := range cl.attached {
		out = append(out, c)
	}
	return out
}

// chain is the session and its ancestors, up to the root.
// firstRoute is where a question of this session's would go first, as its clients stand
// now.
func (s *Session) firstRoute() policy.RouteKind {
	chain := s.chain()
	presence := make([]policy.Presence, len(chain))
	for i, x := range chain {
		presence[i] = x.clients.presence()
	}
	return policy.NextRoute(presence, 0).Kind
}

func (s *Session) chain() []*Session {
	var out []*Session
	for x := s; x != nil; x = x.parent {
		out = append(out, x)
	}
	return out
}

// Routed is how a question was answered.
type Routed struct {
	Run     bool
	Code    string // when not run: denied, unanswered, gateway_refused, cancelled
	Outcome string // approved, denied, gateway, unanswered, cancelled
	At      string // the session that answered
	By      string // the client that answered
	Answer  Answer
}

// route takes a question up the chain (policy.NextRoute decides each move) until a session
// answers it, by a client or by the gateway rule, or none can.
func (s *Session) route(ctx context.Context, q Question, e policy.Effects) Routed {
	s.questions.Add(1) // the asking session's calls wait with it
	defer s.questions.Add(-1)
	chain := s.chain()
	from := 0
	for {
		presence := make([]policy.Presence, len(chain))
		for i, x := range chain {
			presence[i] = x.clients.presence()
		}
		r := policy.NextRoute(presence, from)
		at := chain[r.Session]
		switch r.Kind {
		case policy.NoAnswer:
			if awaitClient(ctx, chain, from) {
				continue // a client attached: the route is taken again
			}
			return Routed{Code: "unanswered", Outcome: "unanswered", At: at.id}
		case policy.ByGateway:
			if policy.GatewayRule(e) {
				return Routed{Run: true, Outcome: "gateway", At: at.id}
			}
			return Routed{Code: "gateway_refused", Outcome: "gateway", At: at.id}
		}
		a, outcome := at.clients.pose(ctx, q)
		switch outcome {
		case Approved:
			return Routed{Run: true, Outcome: outcome, At: at.id, By: a.Client, Answer: a}
		case Denied:
			return Routed{Code: "denied", Outcome: outcome, At: at.id, By: a.Client, Answer: a}
		case Cancelled:
			return Routed{Code: "cancelled", Outcome: outcome, At: at.id}
		}
		from = r.Session // every interactive client left: take the route again from here
	}
}

// awaitClient waits, while a session of chain was taken up again a moment ago (its attachBy
// has not passed), for a client to attach to a session the route looks at (chain[from:]):
// true when one did; false at once otherwise, or when the time passes or ctx ends first.
func awaitClient(ctx context.Context, chain []*Session, from int) bool {
	by := int64(0)
	for _, x := range chain {
		by = max(by, x.attachBy.Load())
	}
	chain = chain[min(max(from, 0), len(chain)):]
	wait := time.Until(time.Unix(0, by))
	if by == 0 || wait <= 0 {
		return false
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	cases := []reflect.SelectCase{
		{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(t.C)},
		{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(ctx.Done())},
	}
	for _, x := range chain {
		cases = append(cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(x.clients.joining())})
	}
	// A client that attached between the route's look and now is seen by the next look.
	for _, x := range chain {
		if p := x.clients.presence(); p.Interactive > 0 || p.Gateways > 0 {
			return true
		}
	}
	i, _, _ := reflect.Select(cases)
	return i >= 2
}

func newQuestionID() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return "q" + hex.EncodeToString(b[:])
}
