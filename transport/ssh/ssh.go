// Package ssh starts kernels on remote boxes over SSH, with golang.org/x/crypto/ssh rather
// than the ssh program. It honours the user's ssh configuration (aliases, users, ports,
// identity files), checks host keys against known_hosts and refuses an unknown or changed
// one, authenticates with the agent's keys and identity files only (never a prompt), and
// bounds the connect with a timeout.
//
// The kernel for the box's architecture (uname -m) is uploaded once per content hash into a
// cache directory on the box, written to a temporary name and renamed, and run on a session
// channel whose stdin and stdout are the frame pipe. Files go over SFTP, or, on a box with
// no sftp subsystem, over exec channels (cat, tar; see Box.SFTP). Closing stdin ends the
// kernel and every process group it started. Sessions on one box share one connection, a
// channel each. A connection that drops or stops answering its keepalives ends its kernels
// with an *Error of code CodeConnectionLost.
package ssh

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"sync"
	"time"

	xssh "golang.org/x/crypto/ssh"

	"github.com/paddockhq/paddock/images"
	"github.com/paddockhq/paddock/transport"
)

var _ transport.Transport = (*Transport)(nil)

// Grace is how long Kill waits after closing stdin before it kills the kernel's channel.
const Grace = 2 * time.Second

// Transport starts kernels on one box.
type Transport struct {
	// Host is an ssh configuration alias or [user@]host[:port].
	Host string
	// Pool holds the connections; nil: a pool of the transport's own, closed by Close.
	Pool *Pool
	// KernelCache is the directory on the box that holds kernels; "": ~/.cache/paddock/kernel
	// ("~/" and relative paths are under the remote home).
	KernelCache string
	// Kernels finds the kernel binary for an architecture; nil: images.Default.Find.
	Kernels func(ctx context.Context, arch string) (string, error)
	// Stderr receives the kernel's diagnostics; nil discards them.
	Stderr io.Writer
	// OrphanAfter, when set, ends a kernel that listens on the box (Spec.Listen) once no host
	// has been attached to it for this long (the kernel's -orphan-after).
	OrphanAfter time.Duration

	once sync.Once
	own  *Pool

	mu     sync.Mutex
	hashes map[string]fileHash // guarded by mu; local kernel path -> its hash
}

type fileHash struct {
	size  int64
	mtime time.Time
	sum   string
}

func (t *Transport) pool() *Pool {
	if t.Pool != nil {
		return t.Pool
	}
	t.once.Do(func() { t.own = &Pool{} })
	return t.own
}

// Close closes the connections of the transport's own pool (a Pool given is the caller's).
func (t *Transport) Close() error {
	if t.Pool == nil && t.own != nil {
		return t.own.Close()
	}
	return nil
}

// Box connects (or reuses the connection) and says what the box is.
func (t *Transport) Box(ctx context.Context) (Box, error) {
	l, err := t.pool().Get(ctx, t.Host)
	if err != nil {
		return Box{}, err
	}
	defer l.Release()
	b, err := l.Conn.probe(ctx)
	if err != nil {
		return Box{}, err
	}
	return Box{Arch: b.arch, Home: b.home, SFTP: b.noSFTP == nil}, nil
}

// sum returns the content hash of a local kernel file, remembered by size and mtime.
func (t *Transport) sum(p string) (string, error) {
	fi, err := os.Stat(p)
	if err != nil {
		return "", err
	}
	t.mu.Lock()
	h, ok := t.hashes[p]
	t.mu.Unlock()
	if ok && h.size == fi.Size() && h.mtime.Equal(fi.ModTime()) {
		return h.sum, nil
	}
	s, err := hashFile(p)
	if err != nil {
		return "", err
	}
	t.mu.Lock()
	if t.hashes == nil {
		t.hashes = map[string]fileHash{}
	}
	t.hashes[p] = fileHash{size: fi.Size(), mtime: fi.ModTime(), sum: s}
	t.mu.Unlock()
	return s, nil
}

// Start starts a kernel on the box: in spec.Cwd (a path on the box), with exactly spec.Env.
// spec.Kernel is used when the box has the host's architecture; otherwise, or when it is
// "", the Kernels finder gives one for the box's.
func (t *Transport) Start(ctx context.Context, spec transport.Spec) (transport.Kernel, error) {
	if spec.PathMap != nil {
		if _, ok := spec.PathMap.Mount(spec.Cwd); !ok {
			return nil, &OutsideError{Cwd: spec.Cwd}
		}
	}
	if spec.Listen != "" {
		return t.startListening(ctx, spec)
	}
	// Opening channels waits for the box's answers, which a box that stopped answering never
	// gives (until the keepalives drop its connection): the start gives up when ctx ends,
	// and the abandoned opening cleans up after itself.
	type opened struct {
		l   *Lease
		s   *xssh.Session
		err error
	}
	ch := make(chan opened, 1)
	go func() {
		l, s, err := t.session(ctx, spec)
		ch <- opened{l, s, err}
	}()
	var o opened
	select {
	case o = <-ch:
	case <-ctx.Done():
		go func() {
			if o := <-ch; o.err == nil {
				o.s.Close()
				o.l.Release()
			}
		}()
		return nil, fmt.Errorf("ssh: start a kernel on %s: %w", t.Host, ctx.Err())
	}
	if o.err != nil {
		return nil, o.err
	}
	l, s := o.l, o.s
	var err error
	k := &kernel{host: t.Host, lease: l, s: s, done: make(chan struct{})}
	if k.stdin, err = s.StdinPipe(); err == nil {
		var out io.Reader
		if out, err = s.StdoutPipe(); err == nil {
			k.stdout = &stdout{r: out, k: k}
		}
	}
	if err != nil {
		s.Close()
		l.Release()
		return nil, &Error{Code: CodeBox, Host: t.Host, Err: err}
	}
	k.stderr.w = t.Stderr
	s.Stderr = &k.stderr
	if err := s.Start(kernelCommand(spec.Cwd, spec.Env, l.kernel, spec.Args)); err != nil {
		s.Close()
		l.Release()
		if lost := l.Conn.Lost(); lost != nil {
			return nil, lost
		}
		return nil, &Error{Code: CodeBox, Host: t.Host, Err: fmt.Errorf("start the kernel: %w", err)}
	}
	go k.wait()
	return k, nil
}

// session returns a lease on a connection to the box that holds the kernel, and a new
// session channel on it. A connection whose server refuses one more channel (its
// MaxSessions) is marked full, and the next one tried.
func (t *Transport) session(ctx context.Context, spec transport.Spec) (*Lease, *xssh.Session, error) {
	p := t.pool()
	local := ""
	for tries := 0; ; tries++ {
		l, err := p.Get(ctx, t.Host)
		if err != nil {
			return nil, nil, err
		}
		s, err := t.prepare(ctx, l, spec, &local)
		if err == nil {
			return l, s, nil
		}
		var oe *xssh.OpenChannelError
		if errors.As(err, &oe) && tries < 4 && l.Conn.Lost() == nil {
			l.full()
			l.Release()
			continue
		}
		l.Release()
		if lost := l.Conn.Lost(); lost != nil {
			return nil, nil, lost
		}
		if CodeOf(err) == "" {
			err = &Error{Code: CodeBox, Host: t.Host, Err: err}
		}
		return nil, nil, err
	}
}

// prepare makes sure the box behind l holds the kernel (its architecture learnt, the
// binary uploaded), and opens a session channel. *local is the host's kernel binary, found
// on the first call.
func (t *Transport) prepare(ctx context.Context, l *Lease, spec transport.Spec, local *string) (*xssh.Session, error) {
	b, err := l.Conn.probe(ctx)
	if err != nil {
		return nil, err
	}
	if *local == "" {
		*local = spec.Kernel
		if *local == "" || b.arch != runtime.GOARCH {
			find := t.Kernels
			if find == nil {
				find = images.Default.Find
			}
			if *local, err = find(ctx, b.arch); err != nil {
				return nil, &Error{Code: CodeBox, Host: t.Host, Err: fmt.Errorf("%w for linux/%s: %w", errNoKernel, b.arch, err)}
			}
		}
	}
	sum, err := t.sum(*local)
	if err != nil {
		return nil, &Error{Code: CodeBox, Host: t.Host, Err: err}
	}
	if l.kernel, err = l.Conn.upload(ctx, b, *local, sum, t.KernelCache); err != nil {
		return nil, err
	}
	s, err := l.Conn.NewSession()
	if err != nil {
		return nil, fmt.Errorf("open a session channel: %w", err)
	}
	return s, nil
}

type kernel struct {
	host   string
	lease  *Lease
	s      *xssh.Session
	stdin  io.WriteCloser
	stdout io.Reader
	stderr tail

	done chan struct{}
	err  error // set before done closes

	killOnce sync.Once
}

func (k *kernel) Stdin() io.WriteCloser { return k.stdin }
func (k *kernel) Stdout() io.Reader     { return k.stdout }

func (k *kernel) Wait() error {
	<-k.done
	return k.err
}

// wait waits for the session to end and says how: nil, an exit error with the kernel's last
// diagnostics, or the connection's loss.
func (k *kernel) wait() {
	err := k.s.Wait()
	var ee *xssh.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		if msg := bytes.TrimSpace(k.stderr.last()); len(msg) > 0 {
			err = fmt.Errorf("ssh: kernel on %s: %w: %s", k.host, err, msg)
		} else {
			err = fmt.Errorf("ssh: kernel on %s: %w", k.host, err)
		}
	default:
		// No exit status: the channel closed under the kernel. Ask the connection.
		if cerr := k.lease.Conn.Check(2 * time.Second); cerr != nil {
			err = cerr
		} else {
			err = &Error{Code: CodeConnectionLost, Host: k.host, Err: fmt.Errorf("the kernel's channel closed without an exit status: %w", err)}
		}
	}
	k.err = err
	k.s.Close()
	k.lease.Release()
	close(k.done)
}

// Kill closes stdin (the kernel then ends and kills what it started), and when the kernel
// has not ended within Grace, signals it KILL and closes its channel.
func (k *kernel) Kill() error {
	k.killOnce.Do(func() {
		k.stdin.Close()
		t := time.NewTimer(Grace)
		defer t.Stop()
		select {
		case <-k.done:
			return
		case <-t.C:
		}
		_ = k.s.Signal(xssh.SIGKILL)
		k.s.Close()
		<-k.done
	})
	return nil
}

// stdout is the kernel's output; where the connection was lost, its end is that error
// rather than io.EOF.
type stdout struct {
	r io.Reader
	k *kernel
}

func (o *stdout) Read(p []byte) (int, error) {
	n, err := o.r.Read(p)
	if err == io.EOF {
		t := time.NewTimer(5 * time.Second)
		defer t.Stop()
		select {
		case <-o.k.done:
			if CodeOf(o.k.err) == CodeConnectionLost {
				return n, o.k.err
			}
		case <-t.C:
		}
	}
	return n, err
}

// tail keeps the last bytes the kernel wrote to stderr, passing them on to w.
type tail struct {
	mu  sync.Mutex
	buf []byte    // guarded by mu
	w   io.Writer // set before the first Write
}

const tailSize = 4 << 10

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	t.buf = append(t.buf, p...)
	if len(t.buf) > tailSize {
		t.buf = append(t.buf[:0], t.buf[len(t.buf)-tailSize:]...)
	}
	t.mu.Unlock()
	if t.w != nil {
		t.w.Write(p)
	}
	return len(p), nil
}

func (t *tail) last() []byte {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]byte(nil), t.buf...)
}
