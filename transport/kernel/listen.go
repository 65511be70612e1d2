//go:build linux

package kernel

import (
	"context"
	"crypto/hmac"
	"encoding/json"
	"errors"
	"net"
	"os"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/paddockhq/paddock/transport/wire"
)

// attachTimeout is how long a new connection has to send its attach line.
const attachTimeout = 10 * time.Second

// maxAttaching bounds the connections that have not yet proven their key.
const maxAttaching = 4

// Listen is the kernel for a host that may go away and come back: it serves the frames of
// one host connection at a time, taken from l, and lives on when a connection ends (its
// sandbox and the programs in it keep running). A connection's first line must be an attach
// frame with key, and nothing follows it before the host has read the resume frame; any
// other connection is closed. Its first frame back is a resume frame, then
// what the journal kept (see journal); a new connection replaces the one before. The kernel
// ends as Run does (a shutdown request, SIGTERM or SIGHUP, ctx's end), not at a disconnect
// (unless opts.Once).
func Listen(ctx context.Context, l *net.UnixListener, key string, opts Options) error {
	opts.fill()
	if key == "" {
		return errors.New("listen: no key")
	}
	// The key is in this process's memory only: not readable by the sandbox's programs,
	// which run as the same user, through /proc.
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		opts.Log.Warn("cannot make the kernel undumpable", "err", err)
	}
	j := newJournal()
	s := newServer(opts, &output{j: j})
	slots := make(chan struct{}, maxAttaching)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if opts.Once && opts.OrphanAfter <= 0 {
		opts.OrphanAfter = onceWait
	}
	orphan := newOrphanage(opts.OrphanAfter, func() {
		s.log.Warn("no host attached for the orphan bound: ending", "after", opts.OrphanAfter)
		cancel()
	})
	defer orphan.stop()
	return run(ctx, s, func() {
		for {
			c, err := l.AcceptUnix()
			if err != nil {
				return // closed at the end
			}
			select {
			case slots <- struct{}{}:
			default:
				s.log.Warn("connection refused: too many attaching")
				c.Close()
				continue
			}
			go func() {
				lines, ok := s.attach(c, key)
				<-slots
				if !ok {
					c.Close()
					return
				}
				if opts.Once {
					// Its one host is here: nobody else connects, not even to try a key.
					l.Close()
				}
				if s.relay != nil {
					s.relay.abandon("the host reconnected; ask again")
				}
				orphan.attached()
				j.attach(c)
				s.serveLines(lines)
				j.detach(c)
				if opts.Once {
					s.log.Info("the host's connection ended: ending (once)")
					cancel()
					return
				}
				orphan.detached()
			}()
		}
	}, func() bool {
		l.Close()
		j.close()
		return false
	})
}

// orphanage ends a listening kernel once no host has been attached for its bound: from the
// start until the first host attaches, and from each host's leaving until another comes.
type orphanage struct {
	after time.Duration
	t     *time.Timer // nil when there is no bound

	mu    sync.Mutex
	hosts int // guarded by mu: hosts attached now (a new one may come before the old one has gone)
}

func newOrphanage(after time.Duration, end func()) *orphanage {
	o := &orphanage{after: after}
	if after > 0 {
		o.t = time.AfterFunc(after, end)
	}
	return o
}

func (o *orphanage) attached() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.hosts++
	if o.t != nil {
		o.t.Stop()
	}
}

func (o *orphanage) detached() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.hosts--
	if o.t != nil && o.hosts == 0 {
		o.t.Reset(o.after)
	}
}

func (o *orphanage) stop() {
	if o.t != nil {
		o.t.Stop()
	}
}

// attach attaches a connection's host: its attach line, the kernel's challenge (its proof
// of the key over both nonces), the host's proof of the key. Anyone in the sandbox can
// connect: every line is untrusted, and the key itself is never sent.
func (s *server) attach(c *net.UnixConn, key string) (*wire.Reader, bool) {
	c.SetDeadline(time.Now().Add(attachTimeout))
	lines := wire.NewReaderSize(c, wire.MaxHead)
	line, err := lines.Next()
	if err != nil || line.Oversize() {
		s.log.Warn("connection closed: no attach line", "err", err)
		return nil, false
	}
	hostNonce, ok := attachNonce(line.Bytes)
	line.Release()
	if !ok {
		s.log.Warn("connection closed: the first line is not an attach frame")
		return nil, false
	}
	kernelNonce := wire.NewNonce()
	body, _ := json.Marshal(wire.Challenge{Nonce: kernelNonce, Proof: wire.Proof(key, wire.ProofKernel, hostNonce, kernelNonce)})
	if err := wire.NewWriter(c).Write(&wire.Frame{Event: wire.EventChallenge, Body: body}); err != nil {
		s.log.Warn("connection closed: the challenge could not be written", "err", err)
		return nil, false
	}
	line, err = lines.Next()
	if err != nil || line.Oversize() {
		s.log.Warn("connection closed: no answer to the challenge", "err", err)
		return nil, false
	}
	ok = proves(line.Bytes, wire.Proof(key, wire.ProofHost, hostNonce, kernelNonce))
	line.Release()
	if !ok {
		s.log.Warn("connection closed: not attached with the kernel's key")
		return nil, false
	}
	c.SetDeadline(time.Time{})
	// The host writes nothing more before it has read the resume frame, so nothing is left
	// in the small reader: the rest of the connection is read with the full line limit.
	return wire.NewReader(c), true
}

// attachNonce is the host's nonce of line, the first of a connection, when it is an attach
// frame with a well-formed one.
func attachNonce(line []byte) (string, bool) {
	f, err := wire.Decode(line)
	var a wire.Attach
	if err != nil || f.Event != wire.EventAttach || json.Unmarshal(f.Body, &a) != nil || !wire.ValidNonce(a.Nonce) {
		return "", false
	}
	return a.Nonce, true
}

// proves reports whether line is a prove frame with the proof want.
func proves(line []byte, want string) bool {
	f, err := wire.Decode(line)
	var p wire.Prove
	return err == nil && f.Event == wire.EventProve && json.Unmarshal(f.Body, &p) == nil &&
		hmac.Equal([]byte(p.Proof), []byte(want))
}

// ReadKeyFile reads a listening kernel's key from a file and removes the file, so that the
// programs in the sandbox never see it.
func ReadKeyFile(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	if err := os.Remove(path); err != nil {
		return "", err
	}
	return string(b), nil
}
