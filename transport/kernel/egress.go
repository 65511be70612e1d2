//go:build linux

package kernel

import (
	"encoding/json"
	"io"
	"net"
	"sync"

	"github.com/paddockhq/paddock/transport/wire"
)

// forwarder carries the connections a sandbox's programs make to a TCP address on its
// loopback to the host's proxy, a unix socket the transport bound into the sandbox. It
// judges nothing: the host's proxy does, on the connection's own first bytes.
type forwarder struct {
	mu     sync.Mutex
	l      net.Listener      // guarded by mu; nil until the first egress request
	socket string            // guarded by mu
	conns  map[net.Conn]bool // guarded by mu
	closed bool              // guarded by mu
	wg     sync.WaitGroup
}

// egress serves the egress request: it listens at Listen (once; a second request for the same
// socket is answered with the same address) and forwards each connection to Socket.
func (s *server) egress(raw json.RawMessage) (any, error) {
	var e wire.Egress
	if err := body(raw, &e); err != nil {
		return nil, err
	}
	if e.Socket == "" || e.Listen == "" {
		return nil, errorf(CodeBadRequest, "egress: socket and listen are required")
	}
	f := &s.forward
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return nil, errorf(CodeIO, "the kernel is shutting down")
	}
	if f.l != nil {
		if f.socket != e.Socket {
			return nil, errorf(CodeBadRequest, "egress: already forwarding to another socket")
		}
		return wire.EgressReply{Addr: f.l.Addr().String()}, nil
	}
	l, err := net.Listen("tcp", e.Listen)
	if err != nil {
		return nil, errorf(CodeIO, "egress: %v", err)
	}
	f.l, f.socket, f.conns = l, e.Socket, map[net.Conn]bool{}
	f.wg.Add(1)
	go f.accept(l, e.Socket)
	return wire.EgressReply{Addr: l.Addr().String()}, nil
}

func (f *forwarder) accept(l net.Listener, socket string) {
	defer f.wg.Done()
	for {
		c, err := l.Accept()
		if err != nil {
			return
		}
		if !f.add(c) {
			c.Close()
			return
		}
		f.wg.Add(1)
		go func() {
			defer f.wg.Done()
			defer f.drop(c)
			up, err := net.Dial("unix", socket)
			if err != nil {
				return
			}
			if !f.add(up) {
				up.Close()
				return
			}
			defer f.drop(up)
			pipe(c, up)
		}()
	}
}

// pipe copies both ways until both directions have ended, passing each end on as a half
// close.
func pipe(a, b net.Conn) {
	done := make(chan struct{})
	go func() {
		io.Copy(b, a)
		closeWrite(b)
		close(done)
	}()
	io.Copy(a, b)
	closeWrite(a)
	<-done
}

func closeWrite(c net.Conn) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		cw.CloseWrite()
		return
	}
	c.Close()
}

func (f *forwarder) add(c net.Conn) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return false
	}
	f.conns[c] = true
	return true
}

func (f *forwarder) drop(c net.Conn) {
	c.Close()
	f.mu.Lock()
	delete(f.conns, c)
	f.mu.Unlock()
}

// close stops listening, closes every connection and waits for their goroutines.
func (f *forwarder) close() {
	f.mu.Lock()
	f.closed = true
	if f.l != nil {
		f.l.Close()
	}
	for c := range f.conns {
		c.Close()
	}
	f.mu.Unlock()
	f.wg.Wait()
}
