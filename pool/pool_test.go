package pool_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/paddockhq/paddock/images"
	"github.com/paddockhq/paddock/orchestrator"
	"github.com/paddockhq/paddock/pool"
	"github.com/paddockhq/paddock/transport"
	"github.com/paddockhq/paddock/transport/local"
	"github.com/paddockhq/paddock/transport/wire"
)

// The pool over the local transport: kernels are host processes, so the pool's rules are
// seen without a container engine. The integration tests run it over docker and containerd.

func kernelBinary(t *testing.T) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	k, err := images.Default.Find(ctx, runtime.GOARCH)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// countingTransport counts the kernels started through it.
type countingTransport struct {
	local.Transport
	mu      sync.Mutex
	started int
}

func (c *countingTransport) Start(ctx context.Context, spec transport.Spec) (transport.Kernel, error) {
	c.mu.Lock()
	c.started++
	c.mu.Unlock()
	return c.Transport.Start(ctx, spec)
}

func (c *countingTransport) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.started
}

func newPool(t *testing.T, size int) (*pool.Pool, *countingTransport, transport.Spec) {
	t.Helper()
	tr := &countingTransport{}
	p := pool.New(pool.Config{Transport: tr, Size: size, Env: []string{"PADDOCK_POOL_ONLY=1"}})
	t.Cleanup(func() { p.Close() })
	ws := t.TempDir()
	spec := transport.Spec{Kernel: kernelBinary(t), Cwd: ws}
	return p, tr, spec
}

func open(t *testing.T, ctx context.Context, p *pool.Pool, spec transport.Spec, env []string) *orchestrator.Session {
	t.Helper()
	s, err := orchestrator.Open(ctx, orchestrator.Config{Workspace: spec.Cwd, Transport: p, Kernel: spec.Kernel, Env: env})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func waitReady(t *testing.T, p *pool.Pool, spec transport.Spec, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := p.WaitReady(ctx, spec, n); err != nil {
		t.Fatalf("the pool did not fill to %d: %v (ready %d)", n, err, p.Ready(spec))
	}
}

// law: pool_claim_once — sessions claiming at once each get a kernel of their own, the
// warm ones first; none is handed out twice.
func TestClaimsAreDistinct(t *testing.T) {
	p, tr, spec := newPool(t, 6)
	if err := p.Warm(spec); err != nil {
		t.Fatal(err)
	}
	waitReady(t, p, spec, 6)
	if n := tr.count(); n != 6 {
		t.Fatalf("warming started %d kernels, want 6", n)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const sessions = 10
	pids := make(chan int, sessions)
	var wg sync.WaitGroup
	for range sessions {
		wg.Go(func() {
			s, err := orchestrator.Open(ctx, orchestrator.Config{Workspace: spec.Cwd, Transport: p, Kernel: spec.Kernel, Env: os.Environ()})
			if err != nil {
				t.Error(err)
				return
			}
			h, err := s.Ping(ctx)
			if err != nil {
				t.Error(err)
			}
			pids <- h.PID
			t.Cleanup(func() { s.Close() })
		})
	}
	wg.Wait()
	close(pids)
	seen := map[int]bool{}
	for pid := range pids {
		if seen[pid] {
			t.Fatalf("two sessions got the kernel %d", pid)
		}
		seen[pid] = true
	}
	if len(seen) != sessions {
		t.Fatalf("%d kernels for %d sessions", len(seen), sessions)
	}
}

// law: pool_refills — after claims the pool starts kernels until it holds Size again.
func TestRefills(t *testing.T) {
	p, tr, spec := newPool(t, 3)
	p.Warm(spec)
	waitReady(t, p, spec, 3)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	open(t, ctx, p, spec, nil)
	open(t, ctx, p, spec, nil)
	waitReady(t, p, spec, 3)
	if n := tr.count(); n != 5 {
		t.Fatalf("%d kernels started, want 3 warmed and 2 refilled", n)
	}
}

// failingTransport fails its first fail starts, then starts kernels locally.
type failingTransport struct {
	local.Transport
	mu   sync.Mutex
	fail int
}

func (f *failingTransport) Start(ctx context.Context, spec transport.Spec) (transport.Kernel, error) {
	f.mu.Lock()
	fail := f.fail > 0
	f.fail--
	f.mu.Unlock()
	if fail {
		return nil, errors.New("the backend does not answer")
	}
	return f.Transport.Start(ctx, spec)
}

// law: pool_refills — a warm start that failed is tried again (a backend's passing fault
// leaves the pool full), until MaxFailures in a row have failed: then WaitReady says so.
func TestRefillsAfterAFailure(t *testing.T) {
	for _, c := range []struct {
		fail int
		full bool
	}{{1, true}, {pool.MaxFailures - 1, true}, {pool.MaxFailures, false}} {
		tr := &failingTransport{fail: c.fail}
		p := pool.New(pool.Config{Transport: tr, Size: 1})
		defer p.Close()
		spec := transport.Spec{Kernel: kernelBinary(t), Cwd: t.TempDir()}
		p.Warm(spec)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		err := p.WaitReady(ctx, spec, 1)
		cancel()
		if c.full && err != nil {
			t.Errorf("%d failures: %v, want the pool full", c.fail, err)
		}
		if !c.full && (err == nil || errors.Is(err, context.DeadlineExceeded)) {
			t.Errorf("%d failures: %v, want the failures told", c.fail, err)
		}
	}
}

// law: pool_session_own — a session from the pool runs its commands in its own working
// directory with its own environment and nothing of the pool's.
func TestSessionGetsItsOwnEnvironment(t *testing.T) {
	p, _, spec := newPool(t, 1)
	p.Warm(spec)
	waitReady(t, p, spec, 1)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s := open(t, ctx, p, spec, []string{"PATH=" + os.Getenv("PATH"), "PADDOCK_SESSION_ONLY=yes"})
	h, err := s.Ping(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// The kernel is a warm one: it runs with the pool's own environment, in the working
	// directory the session asked for.
	if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", h.PID)); err != nil || !strings.Contains(string(b), "PADDOCK_POOL_ONLY=1") {
		t.Fatalf("the session's kernel is not a warm one: %q, %v", b, err)
	}
	if cwd, err := os.Readlink(fmt.Sprintf("/proc/%d/cwd", h.PID)); err != nil || cwd != spec.Cwd {
		t.Errorf("the kernel runs in %q, want %q (%v)", cwd, spec.Cwd, err)
	}
	res, err := s.Bash(ctx, `pwd; env`)
	if err != nil {
		t.Fatal(err)
	}
	out := res.Steps[0].Stdout.Text + res.Steps[1].Stdout.Text
	if want := spec.Cwd + "\n"; res.Steps[0].Stdout.Text != want {
		t.Errorf("pwd %q, want %q", res.Steps[0].Stdout.Text, want)
	}
	if !strings.Contains(out, "PADDOCK_SESSION_ONLY=yes") || strings.Contains(out, "PADDOCK_POOL_ONLY") {
		t.Errorf("the session's commands see:\n%s", out)
	}
}

// law: pool_close_removes — closing the pool ends every warm kernel it held; a claimed one
// is the session's and goes on.
func TestCloseEndsWarmKernels(t *testing.T) {
	tr := &recordingTransport{}
	p := pool.New(pool.Config{Transport: tr, Size: 3})
	spec := transport.Spec{Kernel: kernelBinary(t), Cwd: t.TempDir()}
	p.Warm(spec)
	waitReady(t, p, spec, 3)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := orchestrator.Open(ctx, orchestrator.Config{Workspace: spec.Cwd, Transport: p, Kernel: spec.Kernel})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	// Every kernel started but the claimed one has ended by the time Close returns.
	if started, ended := tr.counts(); ended != started-1 || started < 3 {
		t.Errorf("after Close %d of %d kernels ended, want all but the claimed one", ended, started)
	}
	if _, err := s.Ping(ctx); err != nil {
		t.Errorf("the claimed kernel ended with the pool: %v", err)
	}
	if _, err := p.Start(ctx, spec); !errors.Is(err, pool.ErrClosed) {
		t.Errorf("Start on a closed pool: %v", err)
	}
}

// recordingTransport counts the kernels it started and those that ended.
type recordingTransport struct {
	local.Transport
	mu             sync.Mutex
	started, ended int
}

func (r *recordingTransport) Start(ctx context.Context, spec transport.Spec) (transport.Kernel, error) {
	k, err := r.Transport.Start(ctx, spec)
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	r.started++
	r.mu.Unlock()
	return &recordedKernel{Kernel: k, r: r}, nil
}

func (r *recordingTransport) counts() (started, ended int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.started, r.ended
}

type recordedKernel struct {
	transport.Kernel
	r *recordingTransport
}

func (k *recordedKernel) Wait() error {
	err := k.Kernel.Wait()
	k.r.mu.Lock()
	k.r.ended++
	k.r.mu.Unlock()
	return err
}

// law: pool_scoped — a scoped pool closes with its first session: its warm kernels end, and
// later sessions still start, cold.
func TestScopedClosesWithItsFirstSession(t *testing.T) {
	tr := &recordingTransport{}
	p := pool.New(pool.Config{Transport: tr, Size: 2})
	sp := pool.Scope(p)
	spec := transport.Spec{Kernel: kernelBinary(t), Cwd: t.TempDir()}
	p.Warm(spec)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	root, err := orchestrator.Open(ctx, orchestrator.Config{Workspace: spec.Cwd, Transport: sp, Kernel: spec.Kernel})
	if err != nil {
		t.Fatal(err)
	}
	child, err := orchestrator.Open(ctx, orchestrator.Config{Workspace: spec.Cwd, Transport: sp, Kernel: spec.Kernel})
	if err != nil {
		t.Fatal(err)
	}
	waitReady(t, p, spec, 2)
	root.Close()
	if started, ended := tr.counts(); ended != started-1 {
		t.Errorf("after the root session closed %d of %d kernels ended, want all but the child's", ended, started)
	}
	if _, err := child.Ping(ctx); err != nil {
		t.Errorf("the child's kernel ended with the pool: %v", err)
	}
	child.Close()
	late, err := orchestrator.Open(ctx, orchestrator.Config{Workspace: spec.Cwd, Transport: sp, Kernel: spec.Kernel})
	if err != nil {
		t.Fatalf("a session after the pool closed: %v", err)
	}
	late.Close()
}

// law: pool_only_warmed — a session whose sandbox no Warm named starts cold and leaves no
// warm kernels behind it.
func TestUnwarmedStartsCold(t *testing.T) {
	p, tr, spec := newPool(t, 3)
	p.Warm(spec)
	waitReady(t, p, spec, 3)
	other := spec // another kernel binary: another sandbox
	other.Kernel = filepath.Join(t.TempDir(), "paddock-kernel")
	if b, err := os.ReadFile(spec.Kernel); err != nil || os.WriteFile(other.Kernel, b, 0o755) != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	open(t, ctx, p, other, nil)
	if n := tr.count(); n != 4 {
		t.Fatalf("%d kernels started, want the 3 warm and 1 cold", n)
	}
	if n := p.Ready(other); n != 0 {
		t.Fatalf("%d warm kernels for a sandbox nobody warmed", n)
	}
	if n := p.Ready(spec); n != 3 {
		t.Fatalf("the warmed sandbox's pool holds %d, want 3 untouched", n)
	}
}

// A warm kernel serves a session in another directory of the same sandbox: the session's
// directory becomes the kernel's own at claim.
func TestClaimTakesTheSessionsDirectory(t *testing.T) {
	p, tr, spec := newPool(t, 2)
	if err := p.Warm(spec); err != nil {
		t.Fatal(err)
	}
	waitReady(t, p, spec, 2)
	other := spec
	other.Cwd = t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s := open(t, ctx, p, other, nil)
	h, err := s.Ping(ctx)
	if err != nil {
		t.Fatal(err)
	}
	cwd, err := os.Readlink(filepath.Join("/proc", strconv.Itoa(h.PID), "cwd"))
	if err != nil || cwd != other.Cwd {
		t.Fatalf("the claimed kernel runs in %q (%v), want the session's %q", cwd, err, other.Cwd)
	}
	// It is a warm kernel: its own environment is the pool's.
	env, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(h.PID), "environ"))
	if err != nil || !strings.Contains(string(env), "PADDOCK_POOL_ONLY=1") {
		t.Fatalf("the session started cold (kernel environment %q, %v; %d started)", env, err, tr.count())
	}
	res, err := s.Bash(ctx, "pwd")
	if err != nil || res.Steps[0].Stdout.Text != other.Cwd+"\n" {
		t.Fatalf("%v %s", err, res)
	}
}

// resumingTransport starts local kernels that say they listen, as a container transport's
// do: each makes the directory its spec names and opens with a resume frame whose last
// handled frame is resumeLast.
type resumingTransport struct{ local.Transport }

const resumeLast = 5

func (r *resumingTransport) Start(ctx context.Context, spec transport.Spec) (transport.Kernel, error) {
	if spec.Listen == "" || spec.Key == "" {
		return nil, errors.New("the pool did not ask this kernel to listen")
	}
	if err := os.Mkdir(spec.Listen, 0o700); err != nil {
		return nil, err
	}
	k, err := r.Transport.Start(ctx, spec)
	if err != nil {
		return nil, err
	}
	return resumingKernel{k}, nil
}

type resumingKernel struct{ transport.Kernel }

func (resumingKernel) Resume() (wire.Resume, bool) { return wire.Resume{Last: resumeLast}, true }

// A pool given ListenIn starts each warm kernel listening in a directory of its own there,
// with a key of its own; a claimed kernel says where (ListenSpec: the pool's session label,
// its directory, its key) for a new host to reattach to it, and its resume frame counts the
// two frames the pool's own requests (the ping, the chdir) were answered with as handled, so
// that the session's acks number the frames as the kernel does. Closing the pool removes
// the directories of the kernels it ended, not the claimed one's.
func TestWarmKernelsListen(t *testing.T) {
	in := t.TempDir()
	p := pool.New(pool.Config{Transport: &resumingTransport{}, Size: 2, ListenIn: in})
	spec := transport.Spec{Kernel: kernelBinary(t), Cwd: t.TempDir()}
	p.Warm(spec)
	waitReady(t, p, spec, 2)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	k, err := p.Start(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	defer k.Kill()
	at := k.(transport.Relocated).ListenSpec()
	if filepath.Dir(at.Listen) != in || at.Session != p.Session() || len(at.Key) < 32 {
		t.Errorf("the claimed kernel listens at %+v", at)
	}
	if res, ok := k.(transport.Resuming).Resume(); !ok || res.Last != resumeLast+2 {
		t.Errorf("the claimed kernel's resume frame: %+v %v, want last %d", res, ok, resumeLast+2)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	left, _ := os.ReadDir(in)
	if len(left) != 1 || filepath.Join(in, left[0].Name()) != at.Listen {
		t.Errorf("after Close the pool's directory holds %v, want only the claimed kernel's %s", left, at.Listen)
	}
}

// A scoped pool's root kernel keeps what the claimed kernel says of itself: the directory
// its sandbox binds for the session's proxy (a warm kernel's own, not its session's), so
// the proxy listens where the sandbox looks.
func TestScopedKeepsEgressDir(t *testing.T) {
	p := pool.New(pool.Config{Transport: &local.Transport{}, Size: 1, Egress: true})
	t.Cleanup(func() { p.Close() })
	spec := transport.Spec{Kernel: kernelBinary(t), Cwd: t.TempDir()}
	if err := p.Warm(spec); err != nil {
		t.Fatal(err)
	}
	waitReady(t, p, spec, 1)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	k, err := pool.Scope(p).Start(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	defer k.Kill()
	e, ok := k.(transport.Egressed)
	if !ok || e.EgressDir() == "" {
		t.Fatalf("the root kernel (%T) does not say the directory its warm sandbox binds", k)
	}
	if fi, err := os.Stat(e.EgressDir()); err != nil || !fi.IsDir() {
		t.Errorf("the warm sandbox's egress directory %s: %v", e.EgressDir(), err)
	}
}
