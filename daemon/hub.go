package daemon

import (
	"sync"

	"github.com/paddockhq/paddock/daemon/api"
	"github.com/paddockhq/paddock/orchestrator"
)

// maxQueue and maxQueueBytes bound the events a stream holds for a slow reader, in number
// and in the output they carry (a kernel sends what output it likes, up to a frame's 32 MiB
// at a time); past either the stream is cut (the reader sees the stream end and can
// reconnect and inspect the session).
const (
	maxQueue      = 1 << 14
	maxQueueBytes = 64 << 20
)

// eventCost is what an event counts against maxQueueBytes: its output, and a fixed part for
// the rest (a job's result is bounded by the output windows).
func eventCost(e api.Event) int {
	n := 256
	if e.Output != nil {
		n += len(e.Output.Data)
	}
	return n
}

// hub is a session's event stream: every subscriber gets the session's output and job
// events; subscribers that are the session's clients also get its questions.
type hub struct {
	session string

	mu     sync.Mutex
	seq    int64                    // guarded by mu
	subs   map[*subscriber]struct{} // guarded by mu
	asked  map[string]string        // guarded by mu: questions open at some subscriber -> the asking session
	closed bool                     // guarded by mu

	onQuestion func()               // counts a question once, however many clients see it
	onSettled  func(outcome string) // counts a settlement once
}

func newHub(session string) *hub {
	return &hub{session: session, subs: map[*subscriber]struct{}{}, asked: map[string]string{}}
}

// subscriber is one open stream.
type subscriber struct {
	h    *hub
	kind string

	mu    sync.Mutex
	queue []api.Event // guarded by mu
	bytes int         // guarded by mu: the queue's cost (eventCost)
	cut   bool        // guarded by mu: over maxQueue or maxQueueBytes, or the hub closed
	wake  chan struct{}
}

// subscribe adds a stream.
func (h *hub) subscribe(kind string) *subscriber {
	s := &subscriber{h: h, kind: kind, wake: make(chan struct{}, 1)}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		s.cut = true
	} else {
		h.subs[s] = struct{}{}
	}
	return s
}

// unsubscribe removes a stream.
func (h *hub) unsubscribe(s *subscriber) {
	h.mu.Lock()
	delete(h.subs, s)
	h.mu.Unlock()
}

// publish sends an event to every stream.
func (h *hub) publish(e api.Event) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return
	}
	h.seq++
	e.Seq, e.Session = h.seq, h.session
	for s := range h.subs {
		s.push(e)
	}
}

// close sends the closed event and ends every stream.
func (h *hub) close() {
	h.publish(api.Event{Kind: api.EventClosed})
	h.mu.Lock()
	defer h.mu.Unlock()
	h.closed = true
	for s := range h.subs {
		s.mu.Lock()
		s.cut = true
		s.mu.Unlock()
		s.signal()
	}
	h.subs = map[*subscriber]struct{}{}
}

// Kind makes an interactive or gateway stream a client of the session.
func (s *subscriber) Kind() orchestrator.ClientKind {
	if s.kind == api.StreamGateway {
		return orchestrator.Gateway
	}
	return orchestrator.Interactive
}

// Notify takes a question or settlement meant for this stream's client. It never blocks.
func (s *subscriber) Notify(e orchestrator.Event) {
	h := s.h
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return
	}
	h.seq++
	ev := api.Event{Seq: h.seq, Session: h.session, Kind: e.Kind, Question: e.Question.API(), Settled: e.Settled.API()}
	var counted, settled bool
	switch {
	case e.Question != nil:
		if _, seen := h.asked[e.Question.ID]; !seen {
			h.asked[e.Question.ID], counted = e.Question.Session, true
		}
	case e.Settled != nil:
		if _, seen := h.asked[e.Settled.ID]; seen {
			delete(h.asked, e.Settled.ID)
			settled = true
		}
	}
	h.mu.Unlock()
	if counted && h.onQuestion != nil {
		h.onQuestion()
	}
	if settled && h.onSettled != nil {
		h.onSettled(e.Settled.Outcome)
	}
	s.push(ev)
}

func (s *subscriber) push(e api.Event) {
	s.mu.Lock()
	if !s.cut {
		if c := eventCost(e); len(s.queue) >= maxQueue || s.bytes+c > maxQueueBytes {
			s.cut, s.queue, s.bytes = true, nil, 0
		} else {
			s.queue = append(s.queue, e)
			s.bytes += c
		}
	}
	s.mu.Unlock()
	s.signal()
}

func (s *subscriber) signal() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// take returns the queued events, and whether the stream is cut (after these).
func (s *subscriber) take() ([]api.Event, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	q := s.queue
	s.queue, s.bytes = nil, 0
	return q, s.cut
}
