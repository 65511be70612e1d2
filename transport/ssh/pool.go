package ssh

import (
	"context"
	"errors"
	"sync"
	"time"

	xssh "golang.org/x/crypto/ssh"
)

// DefaultIdle is how long a pooled connection no session uses stays open.
const DefaultIdle = 30 * time.Second

// Pool shares connections: sessions on the same box (the same user, address and keys) use
// one SSH connection, a channel each, so only the first pays the handshake. When the server
// refuses one more channel (its MaxSessions), the pool opens another connection.
type Pool struct {
	// Dialer connects; nil: the zero Dialer.
	Dialer *Dialer
	// Idle is how long a connection no session uses stays open; 0: DefaultIdle; below 0:
	// it closes as soon as its last session ends.
	Idle time.Duration

	mu      sync.Mutex
	entries map[string]*entry // guarded by mu; by Target.key
	closed  bool              // guarded by mu
}

type entry struct {
	conns   []*pooled
	dialing chan struct{} // non-nil while a connection is being dialled
}

type pooled struct {
	c    *Conn
	refs int
	full bool        // the server refused another channel on it
	idle *time.Timer // running while refs is 0
}

// ErrPoolClosed is the error of a Pool used after Close.
var ErrPoolClosed = errors.New("ssh: connection pool closed")

func (p *Pool) dialer() *Dialer {
	if p.Dialer == nil {
		return &Dialer{}
	}
	return p.Dialer
}

// Lease is one use of a pooled connection; Release ends it.
type Lease struct {
	Conn   *Conn
	kernel string // the kernel's path on the box, once known
	p      *Pool
	key    string
	pc     *pooled
	once   sync.Once
}

// Get returns a lease on a live connection to the host named, dialling one if none is free.
func (p *Pool) Get(ctx context.Context, name string) (*Lease, error) {
	d := p.dialer()
	t, err := d.resolve(name)
	if err != nil {
		return nil, err
	}
	key := t.key()
	for {
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			return nil, ErrPoolClosed
		}
		if p.entries == nil {
			p.entries = map[string]*entry{}
		}
		e := p.entries[key]
		if e == nil {
			e = &entry{}
			p.entries[key] = e
		}
		for _, pc := range e.conns {
			if pc.full || pc.c.Lost() != nil || isDone(pc.c.done) {
				continue
			}
			pc.refs++
			if pc.idle != nil {
				pc.idle.Stop()
				pc.idle = nil
			}
			p.mu.Unlock()
			return &Lease{Conn: pc.c, p: p, key: key, pc: pc}, nil
		}
		if e.dialing != nil {
			wait := e.dialing
			p.mu.Unlock()
			select {
			case <-wait:
				continue
			case <-ctx.Done():
				return nil, &Error{Code: CodeConnectTimeout, Host: name, Err: ctx.Err()}
			}
		}
		e.dialing = make(chan struct{})
		p.mu.Unlock()

		c, err := d.dial(ctx, t)

		p.mu.Lock()
		close(e.dialing)
		e.dialing = nil
		if err != nil {
			p.mu.Unlock()
			return nil, err
		}
		if p.closed {
			p.mu.Unlock()
			c.Close()
			return nil, ErrPoolClosed
		}
		pc := &pooled{c: c, refs: 1}
		e.conns = append(e.conns, pc)
		p.mu.Unlock()
		return &Lease{Conn: c, p: p, key: key, pc: pc}, nil
	}
}

func isDone(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// Release ends the lease. The connection closes when it is lost, or after the pool's idle
// time with no lease on it.
func (l *Lease) Release() {
	l.once.Do(func() { l.p.release(l.key, l.pc) })
}

// full marks the lease's connection as refusing more channels.
func (l *Lease) full() {
	l.p.mu.Lock()
	l.pc.full = true
	l.p.mu.Unlock()
}

func (p *Pool) release(key string, pc *pooled) {
	p.mu.Lock()
	defer p.mu.Unlock()
	pc.refs--
	if pc.refs > 0 {
		return
	}
	idle := p.Idle
	if idle == 0 {
		idle = DefaultIdle
	}
	if idle < 0 || pc.c.Lost() != nil || p.closed {
		p.remove(key, pc)
		go pc.c.Close()
		return
	}
	pc.idle = time.AfterFunc(idle, func() {
		p.mu.Lock()
		if pc.refs > 0 || pc.idle == nil {
			p.mu.Unlock()
			return
		}
		p.remove(key, pc)
		p.mu.Unlock()
		pc.c.Close()
	})
}

// remove drops pc from its entry. p.mu is held.
func (p *Pool) remove(key string, pc *pooled) {
	e := p.entries[key]
	if e == nil {
		return
	}
	for i, x := range e.conns {
		if x == pc {
			e.conns = append(e.conns[:i], e.conns[i+1:]...)
			break
		}
	}
	if len(e.conns) == 0 && e.dialing == nil {
		delete(p.entries, key)
	}
}

// Conns returns how many connections the pool holds (for tests and benchmarks).
func (p *Pool) Conns() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, e := range p.entries {
		n += len(e.conns)
	}
	return n
}

// Close closes every connection; the sessions on them end.
func (p *Pool) Close() error {
	p.mu.Lock()
	p.closed = true
	var all []*pooled
	for _, e := range p.entries {
		all = append(all, e.conns...)
	}
	p.entries = nil
	p.mu.Unlock()
	for _, pc := range all {
		if pc.idle != nil {
			pc.idle.Stop()
		}
		pc.c.Close()
	}
	return nil
}

// Session opens a session channel to the host on a pooled connection. The lease must be
// released once the channel is done with.
func (p *Pool) Session(ctx context.Context, name string) (*Lease, *xssh.Session, error) {
	return openOn(ctx, p, name, func(c *Conn) (*xssh.Session, error) { return c.NewSession() })
}

// openOn opens something on a pooled connection, moving to a new connection when the
// server refuses another channel on the one it got.
func openOn[T any](ctx context.Context, p *Pool, name string, open func(*Conn) (T, error)) (*Lease, T, error) {
	var zero T
	for tries := 0; ; tries++ {
		l, err := p.Get(ctx, name)
		if err != nil {
			return nil, zero, err
		}
		v, err := open(l.Conn)
		if err == nil {
			return l, v, nil
		}
		var oe *xssh.OpenChannelError
		if errors.As(err, &oe) && tries < 4 {
			l.full()
			l.Release()
			continue
		}
		if lost := l.Conn.Lost(); lost != nil {
			err = lost
		} else {
			err = &Error{Code: CodeConnectionLost, Host: name, Err: err}
		}
		l.Release()
		return nil, zero, err
	}
}
