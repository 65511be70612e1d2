package egress

import (
	"context"
	"net"
	"sync"
)

// Limits bound what the proxies of one session tree (a session and the children it
// spawns, each with a proxy of its own) hold at once, together: a sandbox that spawns
// children does not multiply its share of the host.
type Limits struct {
	conns     chan struct{} // a slot per connection a listener holds
	questions chan struct{} // a slot per target being asked about
	forwards  chan struct{} // a slot per plain-HTTP request being forwarded
}

// Defaults of NewLimits's arguments (0).
const (
	// MaxConns: the connections held at once; past it the next is accepted only when one
	// ends (the sandbox waits, as on a full backlog), so that no sandbox runs its host out
	// of descriptors.
	MaxConns = 1024
	// MaxQuestions: the targets asked about at once; a connection to one more is refused
	// (busy) rather than adding to what a person is shown.
	MaxQuestions = 32
	// MaxForwards: the plain-HTTP requests forwarded at once (each holds its buffers); the
	// next waits for one to end.
	MaxForwards = 64
)

// NewLimits makes the bounds of a session tree; 0 takes the default.
func NewLimits(conns, questions, forwards int) *Limits {
	or := func(n, d int) int {
		if n <= 0 {
			return d
		}
		return n
	}
	return &Limits{conns: make(chan struct{}, or(conns, MaxConns)), questions: make(chan struct{}, or(questions, MaxQuestions)),
		forwards: make(chan struct{}, or(forwards, MaxForwards))}
}

// ask takes a question's slot, or says there is none.
func (l *Limits) ask() (release func(), ok bool) {
	select {
	case l.questions <- struct{}{}:
		return func() { <-l.questions }, true
	default:
		return nil, false
	}
}

// forward waits for a plain-HTTP request's slot, or ctx's end.
func (l *Limits) forward(ctx context.Context) (release func(), err error) {
	select {
	case l.forwards <- struct{}{}:
		return func() { <-l.forwards }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// listener accepts a connection only when the tree holds fewer than its bound.
func (l *Limits) listener(inner net.Listener) net.Listener {
	return &limited{Listener: inner, slots: l.conns, done: make(chan struct{})}
}

// limited is a listener whose connections hold a slot each until closed (as
// golang.org/x/net/netutil's LimitListener, with slots shared between listeners).
type limited struct {
	net.Listener
	slots chan struct{}
	once  sync.Once
	done  chan struct{}
}

func (l *limited) Accept() (net.Conn, error) {
	select {
	case l.slots <- struct{}{}:
	case <-l.done:
		return nil, net.ErrClosed
	}
	c, err := l.Listener.Accept()
	if err != nil {
		<-l.slots
		return nil, err
	}
	return &slotConn{Conn: c, release: func() { <-l.slots }}, nil
}

func (l *limited) Close() error {
	err := l.Listener.Close()
	l.once.Do(func() { close(l.done) })
	return err
}

// slotConn gives its slot back once closed.
type slotConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *slotConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}

// NetConn is the connection the slot is held for.
func (c *slotConn) NetConn() net.Conn { return c.Conn }

// CloseWrite ends the writing half, as the connection it wraps can (a tunnel passes each
// end on as a half close).
func (c *slotConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return c.Close()
}
