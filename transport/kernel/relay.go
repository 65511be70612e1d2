//go:build linux

package kernel

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/paddockhq/paddock/transport/wire"
)

// maxSocketPath is the longest path a unix socket address holds (sun_path, with its NUL).
const maxSocketPath = 107

// socketName is the host socket's name in its private directory.
const socketName = "host.sock"

// relay carries the requests of programs in the sandbox to the host. A program connects to
// the host socket and writes one JSON line {"type": ..., "body": ...}; the relay gives it a
// fresh id, sends it to the host as a host_request frame, and writes the host's reply frame
// back as one line. A connection's requests go one after another; connections run at once.
type relay struct {
	dir  string // private directory, 0700
	path string // the socket in it
	ln   *net.UnixListener
	out  *output
	log  *slog.Logger

	prefix string // makes this kernel's host-request ids unlike another kernel's
	seq    atomic.Uint64

	mu      sync.Mutex
	pending map[string]chan wire.Frame // host replies awaited, by id; guarded by mu
	// slots holds a token for each request sent and not yet answered: at most
	// wire.MaxHostRequests, the host's own bound, so a sandbox with many programs asking at
	// once waits here instead of being refused busy.
	slots  chan struct{}
	conns  map[net.Conn]bool // guarded by mu
	closed bool              // guarded by mu

	stop chan struct{} // closed by close
	wg   sync.WaitGroup
}

// listenRelay makes the private directory under tmp (or /tmp when a socket path there would
// be too long) and listens on the socket in it.
func listenRelay(tmp string, out *output, log *slog.Logger) (*relay, error) {
	if len(filepath.Join(tmp, "paddock-kernel-0123456789", socketName)) > maxSocketPath {
		tmp = "/tmp"
	}
	dir, err := os.MkdirTemp(tmp, "paddock-kernel-") // 0700
	if err != nil {
		return nil, errors.New("host socket: " + err.Error())
	}
	path := filepath.Join(dir, socketName)
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		os.RemoveAll(dir)
		return nil, errors.New("host socket: " + err.Error())
	}
	var b [4]byte
	rand.Read(b[:])
	r := &relay{
		dir:     dir,
		path:    path,
		ln:      ln,
		out:     out,
		log:     log,
		prefix:  "h" + hex.EncodeToString(b[:]) + "-",
		pending: make(map[string]chan wire.Frame),
		slots:   make(chan struct{}, wire.MaxHostRequests),
		conns:   make(map[net.Conn]bool),
		stop:    make(chan struct{}),
	}
	r.wg.Add(1)
	go r.accept()
	return r, nil
}

func (r *relay) accept() {
	defer r.wg.Done()
	for {
		c, err := r.ln.Accept()
		if err != nil {
			return // closed
		}
		r.mu.Lock()
		if r.closed {
			r.mu.Unlock()
			c.Close()
			return
		}
		r.conns[c] = true
		r.wg.Add(1)
		r.mu.Unlock()
		go func() {
			defer r.wg.Done()
			r.serveConn(c)
			r.mu.Lock()
			delete(r.conns, c)
			r.mu.Unlock()
			c.Close()
		}()
	}
}

// request is what a program writes on the host socket.
type request struct {
	Type string          `json:"type"`
	Body json.RawMessage `json:"body,omitempty"`
}

// serveConn relays one connection's requests, one after another.
func (r *relay) serveConn(c net.Conn) {
	lines := wire.NewReader(c)
	w := wire.NewWriter(c)
	for {
		line, err := lines.Next()
		if err != nil {
			return
		}
		f := r.relayLine(line)
		if w.Write(&f) != nil {
			return
		}
	}
}

// relayLine sends one program's request to the host and gives the reply for it.
func (r *relay) relayLine(line wire.Line) wire.Frame {
	refuse := func(code, msg string) wire.Frame {
		return *wire.ErrorReply("", wire.StatusError, code, msg)
	}
	if line.Oversize() {
		return refuse(CodeBadRequest, "request of "+strconv.FormatInt(line.Size, 10)+" bytes is over the limit")
	}
	// Decoding would hide invalid UTF-8 in the type (replaced by U+FFFD) and pass it on in
	// the body (kept raw): the host would get a line it does not take.
	if !utf8.Valid(line.Bytes) {
		return refuse(CodeBadRequest, "the request is not UTF-8")
	}
	var req request
	if err := json.Unmarshal(line.Bytes, &req); err != nil {
		return refuse(CodeBadRequest, "not a request: "+err.Error())
	}
	if req.Type == "" {
		return refuse(CodeBadRequest, "request without a type")
	}
	select {
	case r.slots <- struct{}{}:
		defer func() { <-r.slots }()
	case <-r.stop:
		return refuse(CodeIO, "the kernel is shutting down")
	}
	id := r.prefix + strconv.FormatUint(r.seq.Add(1), 10)
	ch := make(chan wire.Frame, 1)
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return refuse(CodeIO, "the kernel is shutting down")
	}
	r.pending[id] = ch
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		delete(r.pending, id)
		r.mu.Unlock()
	}()
	if err := r.out.write(&wire.Frame{Event: wire.EventHostRequest, ID: id, Type: req.Type, Body: req.Body}); err != nil {
		return refuse(CodeIO, "the host cannot be reached")
	}
	select {
	case f := <-ch:
		return f
	case <-r.stop:
		return refuse(CodeIO, "the kernel is shutting down")
	}
}

// deliver hands the host's reply to the program waiting for it; false when none waits.
func (r *relay) deliver(f wire.Frame) bool {
	r.mu.Lock()
	ch, ok := r.pending[f.ID]
	delete(r.pending, f.ID)
	r.mu.Unlock()
	if ok {
		ch <- f // buffered, and delivered once
	}
	return ok
}

// abandon fails every request waiting for the host's reply: a new host connection does not
// know them.
func (r *relay) abandon(msg string) {
	r.mu.Lock()
	pending := r.pending
	r.pending = make(map[string]chan wire.Frame)
	r.mu.Unlock()
	for id, ch := range pending {
		ch <- *wire.ErrorReply(id, wire.StatusError, CodeIO, msg)
	}
}

// close stops accepting, fails the requests in flight and ends every connection.
func (r *relay) close() {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return
	}
	r.closed = true
	close(r.stop)
	r.ln.Close()
	// Reads end now; a reply being written still gets out, unless the program stops reading.
	now := time.Now()
	for c := range r.conns {
		c.SetReadDeadline(now)
		c.SetWriteDeadline(now.Add(time.Second))
	}
	r.mu.Unlock()
	r.wg.Wait()
}

// remove deletes the socket's directory.
func (r *relay) remove() {
	if err := os.RemoveAll(r.dir); err != nil {
		r.log.Warn("removing the host socket directory", "err", err)
	}
}
