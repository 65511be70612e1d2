package ssh

import (
	"context"
	"net"
	"sync"
)

// ListenEgress asks the box's sshd to listen on the box's loopback, on a port it chooses,
// and to carry every connection made there back over the ssh connection (a remote
// forward, `ssh -R`): the listener returned accepts them on the host. A box's network is
// its own; this offers its programs the host's proxy as well, for those that use it.
// Closing the listener cancels the forward and releases the connection.
func (t *Transport) ListenEgress(ctx context.Context) (net.Listener, error) {
	l, err := t.pool().Get(ctx, t.Host)
	if err != nil {
		return nil, err
	}
	ln, err := l.Conn.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		l.Release()
		return nil, &Error{Code: CodeForwardRefused, Host: t.Host, Err: err}
	}
	return &forwarded{Listener: ln, lease: l}, nil
}

// forwarded is a remote forward's listener that holds its connection's lease.
type forwarded struct {
	net.Listener
	lease *Lease
	once  sync.Once
}

func (f *forwarded) Close() error {
	err := f.Listener.Close()
	f.once.Do(f.lease.Release)
	return err
}
