package daemon

import (
	"github.com/paddockhq/paddock/daemon/api"
	"github.com/paddockhq/paddock/egress"
	"github.com/paddockhq/paddock/orchestrator"
)

// egress has a session's proxy report each connection to the daemon: counted in the
// metrics and published on the stream of the session that made it (a child's on its own).
func (s *Server) egress(e *orchestrator.Egress) *orchestrator.Egress {
	if e == nil {
		return nil
	}
	c := *e
	c.Record = s.connected
	return &c
}

// connected counts a connection's record and publishes it.
func (s *Server) connected(session string, r egress.Record) {
	s.metrics.add(func(m *metrics) {
		m.connections[r.Verdict+"/"+r.DecidedBy]++
		m.netSent += r.Sent
		m.netReceived += r.Received
	})
	s.mu.Lock()
	e := s.sessions[session]
	s.mu.Unlock()
	if e != nil {
		c := ConnectionOf(r)
		e.hub.publish(api.Event{Kind: api.EventConnection, Connection: &c})
	}
}

// ConnectionOf is a connection's record in the API's form.
func ConnectionOf(r egress.Record) api.Connection {
	return api.Connection{Time: r.Time, Method: r.Method, Target: r.Target, Host: r.Host, Port: r.Port, Addr: r.Addr,
		Verdict: r.Verdict, DecidedBy: r.DecidedBy, Rule: r.Rule, Code: r.Code, Question: r.Question, At: r.At, By: r.By,
		Sent: r.Sent, Received: r.Received, Duration: int64(r.Duration)}
}
