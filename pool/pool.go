// Package pool keeps warm kernels: a transport.Transport that wraps another (docker,
// containerd, any) and keeps, for each kind of sandbox sessions ask for, Size kernels
// started ahead, running and answering. A session's Start claims one instead of starting
// from nothing, and the pool refills in the background. A claimed kernel is the session's
// alone: it is never handed out again, and it ends with the session. Closing the pool
// removes the kernels it still holds; the sandboxes of a host process that died carry the
// wrapped transport's labels (and Label), so its reaper finds them at the next start.
//
// Which kernel may serve a session is Key's rule: the same kernel, arguments, working
// directory, path map and labels. What is the session's own is applied at claim: its
// session label (on the sandbox, where the backend can relabel it) and its environment,
// which reaches every command through the session's requests; a warm kernel's own
// environment is the pool's (Config.Env, empty by default), never a session's.
package pool

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/paddockhq/paddock/transport"
	"github.com/paddockhq/paddock/transport/wire"
)

var _ transport.Transport = (*Pool)(nil)

// ErrClosed is returned by Start on a closed pool.
var ErrClosed = errors.New("pool: closed")

// Relabeler is a kernel whose sandbox takes on a session's labels at claim.
type Relabeler interface {
	Relabel(ctx context.Context, labels map[string]string) error
}

// Config says what a pool wraps and keeps.
type Config struct {
	// Transport starts the kernels, warm and cold.
	Transport transport.Transport
	// Size is how many warm kernels are kept per Key; 0 keeps none (every Start is cold).
	Size int
	// Env is the warm kernels' own environment; nil is empty. A session's environment
	// reaches its commands through its requests, never through this.
	Env []string
	// Parallel bounds the starts in flight per Key while filling; 0 is DefaultParallel.
	Parallel int
	// ReadyTimeout bounds a warm kernel's start and first answer; 0 is a minute.
	ReadyTimeout time.Duration
	// Log receives the pool's diagnostics; nil discards them.
	Log *slog.Logger
	// ListenIn, when set, is a private host directory (0700) the warm kernels listen in,
	// each in a directory of its own made beneath it (see transport.Spec.Listen), so that
	// a claimed kernel outlives its host as its session's own would: a new host reattaches
	// to it with the kernel's ListenSpec. The pool removes the directory of every warm
	// kernel it ends; a claimed one's is its session's owner's to remove. "": warm kernels
	// serve their standard streams.
	ListenIn string
	// Egress: each warm sandbox binds a directory of its own for its session's proxy
	// (transport.Spec.Egress), beside the one it listens in, else in a private temporary
	// directory; a claimed kernel says which (transport.Egressed).
	Egress bool
}

// DefaultParallel is how many kernels per Key are started at once while filling.
const DefaultParallel = 4

// Pool keeps warm kernels for the transport it wraps.
type Pool struct {
	cfg Config
	id  string
	log *slog.Logger
	wg  sync.WaitGroup // the fillers

	mu      sync.Mutex
	buckets map[string]*bucket // guarded by mu; by Key
	closed  bool               // guarded by mu
}

// bucket is the warm kernels of one Key.
type bucket struct {
	spec     transport.Spec // what its kernels start with
	ready    []*kernel      // guarded by Pool.mu; oldest first
	starting int            // guarded by Pool.mu
	waiting  int            // guarded by Pool.mu: sessions waiting for a start in flight
	failures int            // guarded by Pool.mu: starts failed in a row
	lastErr  error          // guarded by Pool.mu: the last start's error
	changed  chan struct{}  // guarded by Pool.mu; closed and replaced when ready or starting change
}

// New returns a pool over cfg.Transport. It starts nothing until Warm names a kind of
// sandbox.
func New(cfg Config) *Pool {
	if cfg.Parallel <= 0 {
		cfg.Parallel = DefaultParallel
	}
	if cfg.ReadyTimeout <= 0 {
		cfg.ReadyTimeout = time.Minute
	}
	log := cfg.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	p := &Pool{cfg: cfg, id: hex.EncodeToString(b[:]), log: log, buckets: map[string]*bucket{}}
	return p
}

// ID is the pool's id, the value of Label on what it starts.
func (p *Pool) ID() string { return p.id }

// Session is the session label of the pool's warm kernels until a session claims one.
func (p *Pool) Session() string { return "pool-" + p.id }

// Warm starts filling the pool for sessions like spec (its session and environment do not
// matter), without waiting.
func (p *Pool) Warm(spec transport.Spec) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return ErrClosed
	}
	b := p.bucket(spec)
	b.failures = 0
	p.refill(b)
	return nil
}

// Ready is how many warm kernels for sessions like spec are ready to be claimed.
func (p *Pool) Ready(spec transport.Spec) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	b := p.buckets[Key(spec)]
	if b != nil && spec.PathMap != nil {
		if _, ok := spec.PathMap.Mount(spec.Cwd); !ok {
			b = nil // the wrapped transport refuses a directory under no mount
		}
	}
	if b == nil {
		return 0
	}
	n := 0
	for _, k := range b.ready {
		if k.alive() {
			n++
		}
	}
	return n
}

// WaitReady waits until n warm kernels for sessions like spec are ready, or ctx ends, or
// the pool stopped refilling them after failures.
func (p *Pool) WaitReady(ctx context.Context, spec transport.Spec, n int) error {
	for {
		p.mu.Lock()
		b := p.buckets[Key(spec)]
		if b == nil {
			p.mu.Unlock()
			return errors.New("pool: nothing warmed for this spec")
		}
		ready := 0
		for _, k := range b.ready {
			if k.alive() {
				ready++
			}
		}
		if ready >= n {
			p.mu.Unlock()
			return nil
		}
		if b.starting == 0 && b.failures >= MaxFailures {
			p.mu.Unlock()
			return fmt.Errorf("pool: %d warm kernels ready of %d, and the last %d starts failed: %w", ready, n, MaxFailures, b.lastErr)
		}
		ch := b.changed
		p.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second): // a warm kernel may die unseen: count again
		}
	}
}

// Start claims a warm kernel for spec when one is ready (or waits for one in flight, when
// Wait says so), else starts one cold through the wrapped transport; the pool then refills
// behind it. A spec like none Warm named starts cold, and is not kept warm.
func (p *Pool) Start(ctx context.Context, spec transport.Spec) (transport.Kernel, error) {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil, ErrClosed
	}
	if p.cfg.Size <= 0 {
		p.mu.Unlock()
		return p.cfg.Transport.Start(ctx, spec)
	}
	b := p.buckets[Key(spec)]
	if b != nil && spec.PathMap != nil {
		if _, ok := spec.PathMap.Mount(spec.Cwd); !ok {
			b = nil // the wrapped transport refuses a directory under no mount
		}
	}
	if b == nil {
		// Nothing was warmed for this sandbox: a one-off (an isolated child's own copy, say)
		// starts cold, and starts no pool of its own.
		p.mu.Unlock()
		return p.cfg.Transport.Start(ctx, spec)
	}
	b.failures = 0
	for {
		if k := b.pop(); k != nil {
			p.mu.Unlock()
			// The refill begins once the claimed kernel has answered its session (or after
			// RefillAfter): the sandboxes it starts do not compete with the claim.
			refill := sync.OnceFunc(func() {
				p.mu.Lock()
				p.refill(b)
				p.mu.Unlock()
			})
			if err := k.claim(spec, p.log, refill); errors.Is(err, errSessionDir) {
				// The session's directory is not there in the sandbox: the kernel is as it
				// was, and a cold start says what is wrong.
				p.mu.Lock()
				b.ready = append(b.ready, k)
				p.mu.Unlock()
				return p.cfg.Transport.Start(ctx, spec)
			} else if err != nil {
				p.log.Warn("a warm kernel could not be claimed; it is removed", "err", err)
				k.discard()
				refill()
				p.mu.Lock()
				continue
			}
			return k, nil
		}
		if !Wait(b.starting, b.waiting) {
			break
		}
		b.waiting++
		ch := b.changed
		p.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			p.mu.Lock()
			b.waiting--
			p.mu.Unlock()
			return nil, ctx.Err()
		}
		p.mu.Lock()
		b.waiting--
		if p.closed {
			p.mu.Unlock()
			return nil, ErrClosed
		}
	}
	p.refill(b)
	p.mu.Unlock()
	return p.cfg.Transport.Start(ctx, spec)
}

// Reattach reaches a kernel an earlier host left listening through the wrapped transport
// (transport.Reattacher): a session's, or a warm kernel's a session had claimed. The kernel
// keeps spec as its ListenSpec, where it listens.
func (p *Pool) Reattach(ctx context.Context, spec transport.Spec) (transport.Kernel, error) {
	ra, ok := p.cfg.Transport.(transport.Reattacher)
	if !ok {
		return nil, fmt.Errorf("pool: the transport it keeps kernels of (%T) cannot reattach", p.cfg.Transport)
	}
	k, err := ra.Reattach(ctx, spec)
	if err != nil {
		return nil, err
	}
	r := &reattached{Kernel: k, at: transport.Spec{Session: spec.Session, Listen: spec.Listen, Key: spec.Key}}
	if p.cfg.ListenIn != "" && filepath.Dir(spec.Listen) == p.cfg.ListenIn {
		r.own = spec.Listen // a warm kernel's a session had claimed
	}
	return r, nil
}

// reattached is a kernel reached again, and where it listens.
type reattached struct {
	transport.Kernel
	at  transport.Spec
	own string // the directory it listens in, when the pool's: it goes with the kernel
}

func (k *reattached) Kill() error {
	err := k.Kernel.Kill()
	removeListen(k.own)
	return err
}

func (k *reattached) Resume() (wire.Resume, bool) { return resumeOf(k.Kernel) }
func (k *reattached) ListenSpec() transport.Spec  { return k.at }

// resumeOf is a kernel's resume frame, when it is a listening kernel's.
func resumeOf(k transport.Kernel) (wire.Resume, bool) {
	if r, ok := k.(transport.Resuming); ok {
		return r.Resume()
	}
	return wire.Resume{}, false
}

// listenSpecOf is where a kernel the pool handed out listens, when it says (Relocated).
func listenSpecOf(k transport.Kernel) transport.Spec {
	if r, ok := k.(transport.Relocated); ok {
		return r.ListenSpec()
	}
	return transport.Spec{}
}

// egressDirOf is the directory a kernel the pool handed out binds for its session's proxy,
// when it says (Egressed); "" when it binds its start's.
func egressDirOf(k transport.Kernel) string {
	if e, ok := k.(transport.Egressed); ok {
		return e.EgressDir()
	}
	return ""
}

// Close removes every warm kernel the pool holds and waits for the starts in flight, whose
// kernels are removed too. Kernels sessions claimed are theirs, and stay.
func (p *Pool) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	var held []*kernel
	for _, b := range p.buckets {
		held = append(held, b.ready...)
		b.ready = nil
		b.signal()
	}
	p.mu.Unlock()
	var g errgroup.Group
	g.SetLimit(8)
	for _, k := range held {
		g.Go(k.end)
	}
	err := g.Wait()
	p.wg.Wait()
	return err
}

// bucket returns the bucket of spec's Key, made on first use. Called with mu held.
func (p *Pool) bucket(spec transport.Spec) *bucket {
	key := Key(spec)
	b := p.buckets[key]
	if b == nil {
		s := spec
		s.Session = p.Session()
		s.Env = append([]string{}, p.cfg.Env...)
		s.Labels = maps.Clone(spec.Labels)
		if s.Labels == nil {
			s.Labels = map[string]string{}
		}
		s.Labels[SessionLabel] = s.Session
		s.Labels[Label] = p.id
		b = &bucket{spec: s, changed: make(chan struct{})}
		p.buckets[key] = b
	}
	return b
}

// pop takes the oldest live ready kernel, dropping dead ones. Called with mu held.
func (b *bucket) pop() *kernel {
	for len(b.ready) > 0 {
		k := b.ready[0]
		b.ready = b.ready[1:]
		if k.alive() {
			return k
		}
		k.discard() // it ended on its own: make sure its sandbox goes
	}
	return nil
}

// signal wakes whoever waits on the bucket. Called with mu held.
func (b *bucket) signal() {
	close(b.changed)
	b.changed = make(chan struct{})
}

// refill starts what ToStart says. Called with mu held.
func (p *Pool) refill(b *bucket) {
	if p.closed {
		return
	}
	live := 0
	for _, k := range b.ready {
		if k.alive() {
			live++
		}
	}
	for n := ToStart(p.cfg.Size, live, b.starting, p.cfg.Parallel, b.failures); n > 0; n-- {
		b.starting++
		p.wg.Add(1)
		go p.fill(b)
	}
}

// fill starts one warm kernel for b and adds it to the ready ones.
func (p *Pool) fill(b *bucket) {
	defer p.wg.Done()
	// A start in flight is not cancelled by Close, which waits for it and removes what it
	// made: cancelled midway, a backend may not learn the id of what it created.
	ctx, cancel := context.WithTimeout(context.Background(), p.cfg.ReadyTimeout)
	k, err := p.startWarm(ctx, b.spec)
	cancel()
	p.mu.Lock()
	defer p.mu.Unlock()
	b.starting--
	defer b.signal()
	if err != nil {
		if !p.closed {
			b.failures++
			b.lastErr = err
			p.log.Warn("a warm kernel did not start", "failures", b.failures, "err", err)
			// Another start takes its place after a pause, until MaxFailures in a row have
			// failed: a backend's passing fault (its API server restarting, say) leaves the
			// pool full again, and a WaitReady is answered either way.
			if b.failures < MaxFailures {
				time.AfterFunc(RetryAfter<<(b.failures-1), func() {
					p.mu.Lock()
					defer p.mu.Unlock()
					p.refill(b)
				})
			}
		}
		return
	}
	if p.closed {
		p.mu.Unlock()
		k.end()
		p.mu.Lock()
		return
	}
	b.failures = 0
	b.ready = append(b.ready, k)
	p.refill(b)
}

// startWarm starts a kernel with spec and waits for its answer to ping; on any error nothing
// is left running.
func (p *Pool) startWarm(ctx context.Context, spec transport.Spec) (*kernel, error) {
	if p.cfg.ListenIn != "" {
		spec.Listen, spec.Key = filepath.Join(p.cfg.ListenIn, p.id+"-"+randomHex(6)), randomHex(16)
	}
	var gone string
	if p.cfg.Egress {
		var err error
		if spec.Egress, gone, err = egressDir(spec.Listen); err != nil {
			removeListen(spec.Listen)
			return nil, err
		}
	}
	inner, err := p.cfg.Transport.Start(ctx, spec)
	if err != nil {
		removeListen(spec.Listen)
		os.RemoveAll(gone)
		return nil, err
	}
	k := &kernel{inner: inner, done: make(chan struct{}), egress: spec.Egress, egressGone: gone}
	if spec.Listen != "" {
		k.at = transport.Spec{Session: spec.Session, Listen: spec.Listen, Key: spec.Key}
	}
	go func() {
		k.err = inner.Wait()
		close(k.done)
	}()
	prefix, err := ask(ctx, inner, wire.TypePing, struct{}{})
	if err != nil {
		k.discard()
		return nil, fmt.Errorf("pool: the warm kernel did not answer: %w", err)
	}
	k.answers++
	k.prefix = prefix
	k.stdout = inner.Stdout()
	return k, nil
}

// ask sends the kernel one request of the pool's own (a ping, a chdir) and reads its output
// up to the answer, a byte at a time so that nothing after the answer is taken from the
// session; any other line read on the way is returned, for the session to read first.
func ask(ctx context.Context, k transport.Kernel, typ string, v any) ([]byte, error) {
	id := "paddock-pool-" + typ
	body, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	if err := wire.NewWriter(k.Stdin()).Write(&wire.Frame{Event: wire.EventRequest, ID: id, Type: typ, Body: body}); err != nil {
		return nil, err
	}
	type result struct {
		before []byte
		err    error
	}
	done := make(chan result, 1)
	go func() {
		var before, line []byte
		var one [1]byte
		for {
			if _, err := io.ReadFull(k.Stdout(), one[:]); err != nil {
				done <- result{err: err}
				return
			}
			if one[0] != '\n' {
				if len(line) >= wire.MaxHead*16 {
					done <- result{err: errors.New("an over-long line before the answer")}
					return
				}
				line = append(line, one[0])
				continue
			}
			f, err := wire.Decode(line)
			if err == nil && f.Event == wire.EventReply && f.ID == id {
				if f.Status != wire.StatusOK {
					done <- result{before: before, err: fmt.Errorf("%s: %w", typ, f.Error)}
					return
				}
				done <- result{before: before}
				return
			}
			before = append(append(before, line...), '\n')
			line = line[:0]
		}
	}()
	select {
	case r := <-done:
		return r.before, r.err
	case <-ctx.Done():
		return nil, ctx.Err() // the caller kills the kernel, which ends the reader
	}
}

// kernel is a warm kernel: the wrapped transport's, with what the ping left unread ahead of
// its output.
type kernel struct {
	inner  transport.Kernel
	prefix []byte // output read on the way to the pool's own answers, the session's first
	stdout io.Reader
	done   chan struct{} // closed when inner.Wait returned
	err    error         // set before done closes

	// relabeled is closed when the relabelling started at claim has ended (nil: none was
	// started); Wait and Kill wait for it, so it never outlives the kernel's owner.
	relabeled chan struct{}

	// at is where the kernel listens (Config.ListenIn), zero when it does not; answers
	// counts the frames of the pool's own requests read, which a listening kernel numbers
	// with the session's.
	at      transport.Spec
	answers uint64
	// egress is the directory its sandbox binds for the proxy (Config.Egress); gone is what
	// to remove with it.
	egress, egressGone string
}

// EgressDir is the host directory the kernel's sandbox binds for its session's proxy.
func (k *kernel) EgressDir() string { return k.egress }

// end kills the kernel, waits until it has ended, and removes the directory it listened in.
func (k *kernel) end() error {
	err := k.inner.Kill()
	<-k.done
	removeListen(k.at.Listen)
	os.RemoveAll(k.egressGone)
	return err
}

// discard kills a kernel no session holds, without waiting, and removes the directory it
// listened in.
func (k *kernel) discard() {
	k.inner.Kill()
	removeListen(k.at.Listen)
	os.RemoveAll(k.egressGone)
}

// egressDir makes a warm sandbox's egress directory: beside the one it listens in (where a
// new host finds it), else in a private temporary directory; gone is what to remove when
// the kernel ends without a session.
func egressDir(listen string) (dir, gone string, err error) {
	if listen != "" {
		dir = transport.EgressBeside(listen)
		if err := os.Mkdir(dir, 0o755); err != nil {
			return "", "", fmt.Errorf("pool: %w", err)
		}
		return dir, dir, nil
	}
	parent, err := os.MkdirTemp("", "paddock-egress-")
	if err != nil {
		return "", "", fmt.Errorf("pool: %w", err)
	}
	dir = filepath.Join(parent, "sandbox")
	if err := os.Mkdir(dir, 0o755); err != nil {
		os.RemoveAll(parent)
		return "", "", fmt.Errorf("pool: %w", err)
	}
	return dir, parent, nil
}

// removeListen removes a warm kernel's listening directory and the log a backend keeps
// beside it.
func removeListen(dir string) {
	if dir != "" {
		os.RemoveAll(dir)
		os.Remove(dir + ".log")
		os.RemoveAll(transport.EgressBeside(dir))
	}
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func (k *kernel) alive() bool {
	select {
	case <-k.done:
		return false
	default:
		return true
	}
}

// RetryAfter is the pause before a warm kernel's start that failed is tried again; it
// doubles at each failure in a row.
const RetryAfter = time.Second

// RefillAfter is how long after a claim the pool refills when the claimed kernel has not
// answered its session before.
const RefillAfter = time.Second

// firstRead calls first once, when the first bytes are read through it.
type firstRead struct {
	r     io.Reader
	first func()
}

func (f *firstRead) Read(p []byte) (int, error) {
	n, err := f.r.Read(p)
	if n > 0 || err != nil {
		f.first()
	}
	return n, err
}

// errSessionDir is a claim refused because the session's directory is not in the sandbox.
var errSessionDir = errors.New("pool: the session's directory is not in the sandbox")

// RelabelTimeout bounds the relabelling of a claimed kernel's sandbox.
const RelabelTimeout = 30 * time.Second

// claim hands the kernel to spec's session. Where the backend can relabel the sandbox, it
// takes on the session's labels in the background: the session does not wait on the
// backend's store for a label only the reaper and the tools read (the host labels, which
// the reaper decides by, are the pool's host's from the start).
func (k *kernel) claim(spec transport.Spec, log *slog.Logger, answered func()) error {
	if !k.alive() {
		return fmt.Errorf("pool: the warm kernel ended: %v", k.err)
	}
	// The session's working directory becomes the kernel's own.
	ctx, cancel := context.WithTimeout(context.Background(), RelabelTimeout)
	before, err := ask(ctx, k.inner, wire.TypeChdir, wire.Path{Path: spec.Cwd})
	cancel()
	var we *wire.Error
	if errors.As(err, &we) {
		// Answered, with a refusal: the kernel is as it was, its answer read.
		k.answers++
		k.prefix = append(k.prefix, before...)
		return fmt.Errorf("%w: %v", errSessionDir, we)
	}
	if err != nil {
		return fmt.Errorf("pool: the warm kernel could not take the session's directory: %w", err)
	}
	k.answers++
	k.prefix = append(k.prefix, before...)
	k.stdout = &firstRead{r: io.MultiReader(bytes.NewReader(k.prefix), k.stdout), first: answered}
	time.AfterFunc(RefillAfter, answered)
	r, ok := k.inner.(Relabeler)
	if !ok {
		return nil
	}
	labels := maps.Clone(spec.Labels)
	if labels == nil {
		labels = map[string]string{}
	}
	if spec.Session != "" {
		labels[SessionLabel] = spec.Session
	}
	k.relabeled = make(chan struct{})
	go func() {
		defer close(k.relabeled)
		ctx, cancel := context.WithTimeout(context.Background(), RelabelTimeout)
		defer cancel()
		if err := r.Relabel(ctx, labels); err != nil && k.alive() {
			log.Warn("a claimed sandbox kept the pool's labels", "session", spec.Session, "err", err)
		}
	}()
	return nil
}

// Resume is the listening kernel's resume frame as its session reads on: the frames the
// pool's own requests were answered with are counted as handled, so that the session's acks
// number the frames as the kernel does.
func (k *kernel) Resume() (wire.Resume, bool) {
	res, ok := resumeOf(k.inner)
	if ok {
		res.Last += k.answers
	}
	return res, ok
}

// ListenSpec is where the kernel listens, for a new host to reattach to it; zero when it
// does not listen.
func (k *kernel) ListenSpec() transport.Spec {
	if _, ok := k.Resume(); !ok {
		return transport.Spec{}
	}
	return k.at
}

func (k *kernel) Stdin() io.WriteCloser { return k.inner.Stdin() }
func (k *kernel) Stdout() io.Reader     { return k.stdout }

// Kill ends a claimed kernel, and removes the directory it listened in: its session ends.
func (k *kernel) Kill() error {
	err := k.inner.Kill()
	k.waitRelabel()
	removeListen(k.at.Listen)
	os.RemoveAll(k.egressGone)
	return err
}

func (k *kernel) Wait() error {
	<-k.done
	k.waitRelabel()
	return k.err
}

func (k *kernel) waitRelabel() {
	if k.relabeled != nil {
		<-k.relabeled
	}
}

// Inner is the wrapped transport's kernel.
func (k *kernel) Inner() transport.Kernel { return k.inner }
