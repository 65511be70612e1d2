package orchestrator

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/paddockhq/paddock/images"
	"github.com/paddockhq/paddock/internal/await"
	"github.com/paddockhq/paddock/transport"
	"github.com/paddockhq/paddock/transport/local"
	"github.com/paddockhq/paddock/transport/wire"
)

// listenTransport runs a listening kernel as a host process in its own session, the way a
// container transport runs one in a container: it outlives the connection of the host that
// started it, and Reattach connects to it again.
type listenTransport struct {
	mu    sync.Mutex
	procs map[string]*proc // by listening directory
}

type proc struct {
	cmd  *exec.Cmd
	done chan struct{}
	spec transport.Spec // what it was started with
}

// killAll kills every kernel the transport started.
func (t *listenTransport) killAll() {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, p := range t.procs {
		p.cmd.Process.Kill()
		<-p.done
	}
}

func (t *listenTransport) Start(ctx context.Context, spec transport.Spec) (transport.Kernel, error) {
	if err := transport.PrepareListen(spec, os.Getuid(), os.Getgid()); err != nil {
		return nil, err
	}
	args := []string{"-listen", filepath.Join(spec.Listen, transport.ListenSocket), "-key-file", filepath.Join(spec.Listen, transport.ListenKey)}
	if spec.Once {
		args = append(args, "-once")
	}
	cmd := exec.Command(spec.Kernel, args...)
	cmd.Dir, cmd.Env, cmd.Stderr = spec.Cwd, spec.Env, os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	t.mu.Lock()
	if t.procs == nil {
		t.procs = map[string]*proc{}
	}
	p := &proc{cmd: cmd, done: done, spec: spec}
	t.procs[spec.Listen] = p
	t.mu.Unlock()
	return t.attach(ctx, spec, p)
}

func (t *listenTransport) Reattach(ctx context.Context, spec transport.Spec) (transport.Kernel, error) {
	t.mu.Lock()
	p := t.procs[spec.Listen]
	t.mu.Unlock()
	if p == nil {
		return nil, transport.ErrGone
	}
	return t.attach(ctx, spec, p)
}

func (t *listenTransport) attach(ctx context.Context, spec transport.Spec, p *proc) (transport.Kernel, error) {
	a, err := transport.Attach(ctx, spec.Listen, spec.Key, p.done)
	if err != nil {
		p.cmd.Process.Kill()
		return nil, err
	}
	return &listenKernel{Attached: a, cmd: p.cmd, done: p.done}, nil
}

// listenKernel is a listening kernel process reached over its socket.
type listenKernel struct {
	*transport.Attached // frames, and the resume frame
	cmd                 *exec.Cmd
	done                chan struct{} // closed when the process has ended
}

func (k *listenKernel) Wait() error { <-k.done; return nil }

// Kill ends the kernel as a container transport does: TERM, and it kills what it started.
func (k *listenKernel) Kill() error {
	k.Conn.Close()
	k.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-k.done:
	case <-time.After(5 * time.Second):
		k.cmd.Process.Kill()
		<-k.done
	}
	return nil
}

// disconnect cuts the connection, as the death of its host does.
func (k *listenKernel) disconnect() { k.Conn.Close() }

// A job outlives its host: the host's connection is cut while the job's script is in its
// middle, twice; each new host reopens the session on the same kernel and the job goes on
// from where it was — its exec's whole output once, in its artifact and its window, then its next
// steps with the variables and directory the script had set — and a new step runs.
//
// law: job_no_silent_loss
func TestReopenTakesUpJobs(t *testing.T) {
	ctx := context.Background()
	kbin, err := images.Default.Find(ctx, runtime.GOARCH)
	if err != nil {
		t.Fatal(err)
	}
	ws := t.TempDir()
	os.Mkdir(filepath.Join(ws, "sub"), 0o755)
	state := t.TempDir()
	lt := &listenTransport{}
	t.Cleanup(lt.killAll)
	cfg := Config{Workspace: ws, Transport: lt, Kernel: kbin, Listen: filepath.Join(state, "kernel"), Key: "k3y",
		Env: []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + ws, "LC_ALL=C"}}
	s, err := Open(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	art := filepath.Join(state, "job.out")
	// The exec prints its lines in three parts; after each of the first two it opens the
	// named pipe partK, which the test reads, and waits on goK, which the test opens once
	// that host has died and another took the job up: each host dies within the exec, after
	// some of its output, however slow the machine.
	for k := 1; k <= 2; k++ {
		fifo(t, ws, fmt.Sprintf("part%d", k))
		fifo(t, ws, fmt.Sprintf("go%d", k))
	}
	src := "cd sub; export GREETING=hi; sh -c 'for i in $(seq 1 20); do echo line$i; done; : > ../part1; : < ../go1; " +
		"for i in $(seq 21 30); do echo line$i; done; : > ../part2; : < ../go2; " +
		"for i in $(seq 31 40); do echo line$i; done'; echo $GREETING $PWD > ../after.txt; echo end"
	res, err := s.Run(ctx, Call{Script: src, Budget: 150 * time.Millisecond, Artifact: art})
	if err != nil || res.End.Kind != Detached {
		t.Fatalf("%v %+v", err, res.End)
	}
	j, err := s.Job(res.End.Job)
	if err != nil {
		t.Fatal(err)
	}
	// Two hosts die in turn, each while the job's exec runs; the third sees its end.
	for k := 1; k <= 2; k++ {
		var dead atomic.Bool
		var mu sync.Mutex
		var last JobState
		running := make(chan struct{})
		var once sync.Once
		j.Persist(func(st JobState) {
			if !dead.Load() {
				mu.Lock()
				last = st
				mu.Unlock()
				if st.Exec != "" {
					once.Do(func() { close(running) })
				}
			}
		})
		// Once the job's exec runs, and has written part k of its output, the host dies: its
		// connection ends, and nothing it holds counts any more.
		hear(t, filepath.Join(ws, fmt.Sprintf("part%d", k)))
		select {
		case <-running:
		case <-time.After(guard):
			t.Fatalf("the job's exec is not running after part %d", k)
		}
		mu.Lock()
		dead.Store(true)
		js := last
		mu.Unlock()
		cut(s)
		if js.Exec == "" || js.Cwd != filepath.Join(ws, "sub") {
			t.Fatalf("the state when the host died: %+v", js)
		}
		s = takeUp(t, lt, cfg, nil, js)
		if j, err = s.Job(js.ID); err != nil {
			t.Fatal(err)
		}
		release(t, filepath.Join(ws, fmt.Sprintf("go%d", k)), "")
	}
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	end, err := j.Wait(wctx)
	if err != nil {
		t.Fatal(err)
	}
	var lines strings.Builder
	for i := 1; i <= 40; i++ {
		fmt.Fprintf(&lines, "line%d\n", i)
	}
	if end.End.Kind != Finished || end.End.Status != 0 || len(end.Steps) != 5 {
		t.Fatalf("the job's end: %+v", end)
	}
	if got := end.Steps[2].Stdout; got.Text != lines.String() || got.DroppedBytes != 0 {
		t.Errorf("the exec's window: %q (dropped %d)", got.Text, got.DroppedBytes)
	}
	if got := end.Steps[4].Stdout.Text; got != "end\n" {
		t.Errorf("the last step: %q", got)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "after.txt")); string(b) != "hi "+filepath.Join(ws, "sub")+"\n" {
		t.Errorf("the step after the restart did not see the script's state: %q", b)
	}
	if b, _ := os.ReadFile(art); string(b) != lines.String()+"end\n" {
		t.Errorf("the artifact holds:\n%q", b)
	}
	if r, err := s.Bash(ctx, "echo new"); err != nil || r.Steps[0].Stdout.Text != "new\n" {
		t.Errorf("a new step: %v %+v", err, r)
	}
}

// gateFunc decides each step with a function.
type gateFunc func(ctx context.Context, st Step) Verdict

func (g gateFunc) Decide(ctx context.Context, st Step) Verdict { return g(ctx, st) }

// listenConfig is a session's configuration on a listening kernel run by lt.
func listenConfig(t *testing.T, lt *listenTransport, ws string) Config {
	t.Helper()
	kbin, err := images.Default.Find(context.Background(), runtime.GOARCH)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(lt.killAll) // whatever a failed test left running
	return Config{Workspace: ws, Transport: lt, Kernel: kbin, Listen: filepath.Join(t.TempDir(), "kernel"), Key: "k3y",
		Env: []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + ws, "LC_ALL=C"}}
}

// cut ends a session's connection to its kernel, as its host's death does, and waits until
// nothing it read is handled any more (a dead host writes nothing after its death).
func cut(s *Session) {
	s.mu.Lock()
	c := s.c
	s.mu.Unlock()
	c.k.(*listenKernel).disconnect()
	<-c.done
}

// takeUp is a new host: it reattaches to the kernel of cfg's session, hands check (when
// set) the resume frame, and reopens the session with the jobs; it closes at the test's end.
func takeUp(t *testing.T, lt *listenTransport, cfg Config, check func(wire.Resume), jobs ...JobState) *Session {
	t.Helper()
	k, err := lt.Reattach(context.Background(), transport.Spec{Listen: cfg.Listen, Key: cfg.Key})
	if err != nil {
		t.Fatal(err)
	}
	if check != nil {
		res, _ := k.(transport.Resuming).Resume()
		check(res)
	}
	var restores []Restore
	for _, js := range jobs {
		restores = append(restores, Restore{State: js})
	}
	s, err := Reopen(context.Background(), cfg, k, restores)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// endOf waits for the end of a session's job.
func endOf(t *testing.T, s *Session, id string) *Result {
	t.Helper()
	j, err := s.Job(id)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	end, err := j.Wait(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return end
}

// A job whose host died while its step waited for a decision goes on at that step, decided
// again by the new host: the steps before it do not run again, the step and those after
// it run once.
func TestReopenDecidesAgain(t *testing.T) {
	ctx := context.Background()
	ws := t.TempDir()
	lt := &listenTransport{}
	cfg := listenConfig(t, lt, ws)
	asked := make(chan struct{}, 1)
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop) })
	cfg.Gatekeeper = gateFunc(func(ctx context.Context, st Step) Verdict {
		if len(st.Argv) > 0 && st.Argv[0] == "touch" {
			asked <- struct{}{}
			select { // nobody answers before the host dies
			case <-stop:
			case <-ctx.Done():
			}
			return Verdict{Code: "unanswered"}
		}
		return Verdict{Run: true}
	})
	s, err := Open(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	res, err := s.Run(ctx, Call{Script: "echo before >> log; touch marked; echo after >> log", Budget: 50 * time.Millisecond,
		Artifact: filepath.Join(t.TempDir(), "job.out")})
	if err != nil || res.End.Kind != Detached {
		t.Fatalf("%v %+v", err, res.End)
	}
	<-asked
	j, _ := s.Job(res.End.Job)
	var js JobState
	var dead atomic.Bool
	j.Persist(func(st JobState) {
		if !dead.Load() {
			js = st
		}
	})
	dead.Store(true)
	cut(s)
	if js.Exec != "" || js.Stmt != 1 {
		t.Fatalf("the state when the host died: %+v", js)
	}
	cfg.Gatekeeper = gateFunc(func(context.Context, Step) Verdict { return Verdict{Run: true} })
	end := endOf(t, takeUp(t, lt, cfg, nil, js), js.ID)
	if end.End.Kind != Finished || len(end.Steps) != 3 {
		t.Fatalf("%+v", end)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "log")); string(b) != "before\nafter\n" {
		t.Errorf("the log: %q", b)
	}
	if _, err := os.Stat(filepath.Join(ws, "marked")); err != nil {
		t.Errorf("the step decided again did not run: %v", err)
	}
}

// A call that was no job when its host died has no one to answer: the new host kills its
// exec, and the next job's ids do not repeat the old ones.
func TestReopenKillsOrphans(t *testing.T) {
	ctx := context.Background()
	ws := t.TempDir()
	lt := &listenTransport{}
	cfg := listenConfig(t, lt, ws)
	s, err := Open(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	fifo(t, ws, "pid")
	go s.Run(ctx, Call{Script: "sh -c 'echo $$ > pid; exec sleep 30'", Budget: -1})
	pid, _ := strconv.Atoi(strings.TrimSpace(hear(t, filepath.Join(ws, "pid"))))
	if pid <= 0 {
		t.Fatal("the call did not start")
	}
	cut(s)
	s2 := takeUp(t, lt, cfg, func(res wire.Resume) {
		if len(res.Execs) != 1 || !res.Execs[0].Running {
			t.Fatalf("the kernel holds %+v", res.Execs)
		}
	})
	gctx, cancel := context.WithTimeout(ctx, guard)
	defer cancel()
	if err := await.Exit(gctx, pid); err != nil {
		t.Fatalf("the orphan %d still runs: %v", pid, err)
	}
	if r, err := s2.Bash(ctx, "echo new"); err != nil || r.Steps[0].Stdout.Text != "new\n" {
		t.Errorf("a new step: %v %+v", err, r)
	}
}

// A job whose output outgrows what the kernel keeps: the host dies while the job writes
// about 90 MB; the kernel holds what was not acknowledged (its writers waiting at the bound)
// and no more than its bound of what was; the new host takes the rest from the artifact.
// The artifact and the step's window each hold the whole output, once, in order.
//
// law: job_no_silent_loss
func TestReopenBigOutput(t *testing.T) {
	if testing.Short() {
		t.Skip("90 MB through a kernel twice: skipped with -short")
	}
	ctx := context.Background()
	ws := t.TempDir()
	lt := &listenTransport{}
	cfg := listenConfig(t, lt, ws)
	s, err := Open(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	const n = 12_000_000
	art := filepath.Join(t.TempDir(), "job.out")
	res, err := s.Run(ctx, Call{Script: fmt.Sprintf("seq 1 %d", n), Budget: 50 * time.Millisecond, Artifact: art})
	if err != nil || res.End.Kind != Detached {
		t.Fatalf("%v %+v", err, res.End)
	}
	j, _ := s.Job(res.End.Job)
	var mu sync.Mutex
	var dead bool
	var js JobState
	j.Persist(func(st JobState) {
		mu.Lock()
		if !dead {
			js = st
		}
		mu.Unlock()
	})
	// Cut once the acknowledged output is past the kernel's bound of what it keeps.
	for {
		if fi, err := os.Stat(art); err == nil && fi.Size() > 70<<20 {
			break
		}
		select {
		case <-j.Done():
			t.Fatal("the job ended before the host died")
		case <-time.After(5 * time.Millisecond):
		}
	}
	mu.Lock()
	dead = true
	mu.Unlock()
	cut(s)
	s2 := takeUp(t, lt, cfg, func(r wire.Resume) {
		if len(r.Execs) != 1 || r.Execs[0].Skipped == 0 {
			t.Errorf("the kernel kept all of it: %+v", r.Execs)
		}
	}, js)
	end := endOf(t, s2, js.ID)
	if end.End.Kind != Finished {
		t.Fatalf("%+v", end)
	}
	var want strings.Builder
	for i := 1; i <= n; i++ {
		want.WriteString(strconv.Itoa(i))
		want.WriteByte('\n')
	}
	b, err := os.ReadFile(art)
	if err != nil || string(b) != want.String() {
		t.Errorf("the artifact: %d bytes of %d (%v)", len(b), want.Len(), err)
	}
	if out := end.Steps[0].Stdout; out.Text != want.String() || out.DroppedBytes != 0 {
		t.Errorf("the window: %d bytes of %d, %d dropped", len(out.Text), want.Len(), out.DroppedBytes)
	}
}

// The host dies after its job's step named no command, and after it wrote bash's message
// for it to the artifact, but before it saved the job's next place: the new host takes the
// step's end again from the kernel, and the message is not written twice.
func TestReopenAfterTheReply(t *testing.T) {
	ctx := context.Background()
	ws := t.TempDir()
	lt := &listenTransport{}
	cfg := listenConfig(t, lt, ws)
	s, err := Open(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	art := filepath.Join(t.TempDir(), "job.out")
	res, err := s.Run(ctx, Call{Script: "sleep 0.3 && nosuchcommand; echo after", Budget: 100 * time.Millisecond, Artifact: art})
	if err != nil || res.End.Kind != Detached {
		t.Fatalf("%v %+v", err, res.End)
	}
	j, _ := s.Job(res.End.Job)
	var js JobState
	blocked, release := make(chan struct{}), make(chan struct{})
	j.Persist(func(st JobState) {
		if st.Exec == "" && st.Stmt == 2 { // `echo after`: the host dies as it saves this
			close(blocked)
			<-release
			return
		}
		js = st
	})
	select {
	case <-blocked:
	case <-time.After(30 * time.Second):
		t.Fatal("the job did not reach its last step")
	}
	cut(s)
	t.Cleanup(func() {
		s.mu.Lock()
		s.state = sessionClosed // the dead host starts no kernel of its own
		s.mu.Unlock()
		close(release)
	})
	if len(js.Running) != 1 || js.Running[0].Index != 1 {
		t.Fatalf("the state when the host died: %+v", js)
	}
	end := endOf(t, takeUp(t, lt, cfg, nil, js), js.ID)
	if end.End.Kind != Finished || len(end.Steps) != 3 {
		t.Fatalf("%+v", end)
	}
	want := "bash: line 1: nosuchcommand: command not found\nafter\n"
	if b, _ := os.ReadFile(art); string(b) != want {
		t.Errorf("the artifact holds %q, want %q", b, want)
	}
}

// A session opened with ListenOnce on a transport whose kernels can listen starts its
// kernel listening in a private directory of its own, for this host only: steps run, the
// session is not offered for reattaching, the kernel ends when its host's connection is
// cut, and the directory goes at the close. A directory given (a daemon's) is not replaced.
func TestListenOnce(t *testing.T) {
	ctx := context.Background()
	kbin, err := images.Default.Find(ctx, runtime.GOARCH)
	if err != nil {
		t.Fatal(err)
	}
	ws := t.TempDir()
	lt := &listenTransport{}
	t.Cleanup(lt.killAll)
	env := []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + ws, "LC_ALL=C"}
	s, err := Open(ctx, Config{Workspace: ws, Transport: lt, Kernel: kbin, Env: env, ListenOnce: true})
	if err != nil {
		t.Fatal(err)
	}
	lt.mu.Lock()
	var p *proc
	for _, q := range lt.procs {
		p = q
	}
	lt.mu.Unlock()
	if p == nil || !p.spec.Once || p.spec.Key == "" {
		t.Fatalf("the kernel was not started listening once: %+v", p)
	}
	dir := filepath.Dir(p.spec.Listen)
	if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("the listening directory %s: %v %v", dir, fi, err)
	}
	if at := s.Listening(); at.Listen != "" || at.Key != "" {
		t.Errorf("a kernel listening once is offered for reattaching: %+v", at)
	}
	if res, err := s.Bash(ctx, "echo hi"); err != nil || !strings.Contains(res.String(), "\nhi\n") || res.End.Status != 0 {
		t.Fatalf("a step: %q %v", res.String(), err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	<-p.done
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("the listening directory is left after the close: %v", err)
	}

	// Cut, the connection ends the kernel: nothing is left waiting for a host.
	s2, err := Open(ctx, Config{Workspace: ws, Transport: lt, Kernel: kbin, Env: env, ListenOnce: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	var k *listenKernel
	s2.mu.Lock()
	k, _ = s2.c.k.(*listenKernel)
	s2.mu.Unlock()
	if k == nil {
		t.Fatalf("the kernel is a %T", s2.c.k)
	}
	k.disconnect()
	<-k.done

	// A daemon's directory stays its own: the kernel outlives the host.
	state := t.TempDir()
	s3, err := Open(ctx, Config{Workspace: ws, Transport: lt, Kernel: kbin, Env: env, ListenOnce: true,
		Listen: filepath.Join(state, "kernel"), Key: "k3y"})
	if err != nil {
		t.Fatal(err)
	}
	defer s3.Close()
	if at := s3.Listening(); at.Listen != filepath.Join(state, "kernel") || at.Key != "k3y" {
		t.Errorf("a daemon's listening kernel: %+v", at)
	}
	lt.mu.Lock()
	q := lt.procs[filepath.Join(state, "kernel")]
	lt.mu.Unlock()
	if q == nil || q.spec.Once {
		t.Errorf("a daemon's kernel was started once: %+v", q)
	}
}

// cannotListen is a transport whose kernels could listen but whose engine cannot bind the
// directory (one that does not see this host's temporary directory): it refuses a start
// with Listen.
type cannotListen struct{ local.Transport }

func (t *cannotListen) Start(ctx context.Context, spec transport.Spec) (transport.Kernel, error) {
	if spec.Listen != "" {
		return nil, fmt.Errorf("bind %s: no such file or directory", spec.Listen)
	}
	return t.Transport.Start(ctx, spec)
}

func (t *cannotListen) Reattach(context.Context, transport.Spec) (transport.Kernel, error) {
	return nil, transport.ErrGone
}

// Listening once is for speed only: a kernel that cannot listen serves its standard
// streams, and the session works. A directory a killed host left is swept at the next
// session's start; a live host's is not, nor any other directory whose name could be read
// as a dead pid's (a kernel's own, paddock-kernel-NNN, which it binds its host socket in).
func TestListenOnceFallsBackAndSweeps(t *testing.T) {
	ctx := context.Background()
	kbin, err := images.Default.Find(ctx, runtime.GOARCH)
	if err != nil {
		t.Fatal(err)
	}
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	left := filepath.Join(os.TempDir(), fmt.Sprintf("%s%d-test", oncePrefix, dead.Process.Pid))
	live := filepath.Join(os.TempDir(), fmt.Sprintf("%s%d-test", oncePrefix, os.Getpid()))
	kernels := filepath.Join(os.TempDir(), fmt.Sprintf("paddock-kernel-%d", dead.Process.Pid))
	noDash := filepath.Join(os.TempDir(), fmt.Sprintf("%s%d", oncePrefix, dead.Process.Pid))
	for _, d := range []string{left, live, kernels, noDash} {
		if err := os.MkdirAll(filepath.Join(d, "kernel"), 0o700); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(d) })
	}
	ws := t.TempDir()
	s, err := Open(ctx, Config{Workspace: ws, Transport: &cannotListen{local.Transport{Stderr: os.Stderr}}, Kernel: kbin,
		Env: []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + ws, "LC_ALL=C"}, ListenOnce: true})
	if err != nil {
		t.Fatalf("a kernel that cannot listen: %v", err)
	}
	defer s.Close()
	if res, err := s.Bash(ctx, "echo hi"); err != nil || !strings.Contains(res.String(), "\nhi\n") {
		t.Fatalf("a step: %q %v", res.String(), err)
	}
	if _, err := os.Stat(left); !os.IsNotExist(err) {
		t.Errorf("a dead host's directory is left: %v", err)
	}
	for _, d := range []string{live, kernels, noDash} {
		if _, err := os.Stat(d); err != nil {
			t.Errorf("%s was swept: %v", d, err)
		}
	}
}
