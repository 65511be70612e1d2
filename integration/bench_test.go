package integration

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/paddockhq/paddock/orchestrator"
	"github.com/paddockhq/paddock/transport"
	"github.com/paddockhq/paddock/transport/docker"
	"github.com/paddockhq/paddock/transport/environ"
	"github.com/paddockhq/paddock/transport/pathmap"
)

// The docker transport's benchmarks, each against what a user would run instead, in the same
// run and on the same image (the host image with the host's system directories):
//
//	go test ./integration -run '^$' -bench . -benchtime 20x
//
// BenchmarkDockerSessionReady (a cold session: container created, attached, started, the
// kernel answered ping) against BenchmarkDockerRunTrue (`docker run --rm IMG true`), and
// BenchmarkDockerStepTrue (a `true` step in an open session) against BenchmarkDockerExecTrue
// (`docker exec BOX true`).

// benchEnv is what every docker benchmark shares.
type benchEnv struct {
	img    string
	kernel string
	ws     string
	pm     *pathmap.Map
	tr     *docker.Transport
}

func newBenchEnv(b *testing.B) *benchEnv {
	cli := engine(b)
	e := &benchEnv{img: hostImage(b, cli), kernel: kernelBinary(b), ws: b.TempDir()}
	var err error
	if e.pm, err = pathmap.New(pathmap.Mount{Sandbox: "/work", Host: e.ws}); err != nil {
		b.Fatal(err)
	}
	e.tr = &docker.Transport{Client: cli, Image: e.img, Mounts: hostMounts(), NoReap: true}
	return e
}

func (e *benchEnv) open(b *testing.B, ctx context.Context) *orchestrator.Session {
	env, _ := environ.Sandbox(os.Environ(), nil, sandboxEnv, e.pm)
	s, err := orchestrator.Open(ctx, orchestrator.Config{Workspace: e.ws, Transport: e.tr, Kernel: e.kernel, Env: env, PathMap: e.pm})
	if err != nil {
		b.Fatal(err)
	}
	return s
}

// mountFlags are the docker command's flags for the same mounts and confinement.
func (e *benchEnv) mountFlags() []string {
	flags := []string{"--network", "none", "--label", "paddock=1", "--label", "paddock.test=integration"}
	for _, m := range hostMounts() {
		flags = append(flags, "-v", m.Host+":"+m.Sandbox+":ro")
	}
	return append(flags, "-v", e.ws+":/work")
}

func BenchmarkDockerSessionReady(b *testing.B) {
	e := newBenchEnv(b)
	ctx := context.Background()
	b.ResetTimer()
	for range b.N {
		s := e.open(b, ctx)
		b.StopTimer()
		s.Close()
		b.StartTimer()
	}
}

// BenchmarkDockerKernelReady is the transport alone: the container started, the kernel
// answered ping, no session around it.
func BenchmarkDockerKernelReady(b *testing.B) {
	e := newBenchEnv(b)
	ctx := context.Background()
	b.ResetTimer()
	for range b.N {
		k, err := e.tr.Start(ctx, transport.Spec{Session: "bench", Kernel: e.kernel, Cwd: "/work", PathMap: e.pm})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := newClient(k).ping(ctx); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		k.Kill()
		b.StartTimer()
	}
}

func BenchmarkDockerRunTrue(b *testing.B) {
	e := newBenchEnv(b)
	args := append(append([]string{"run", "--rm"}, e.mountFlags()...), e.img, "true")
	b.ResetTimer()
	for range b.N {
		if out, err := exec.Command("docker", args...).CombinedOutput(); err != nil {
			b.Fatalf("docker run: %v: %s", err, out)
		}
	}
}

func BenchmarkDockerStepTrue(b *testing.B) {
	e := newBenchEnv(b)
	ctx := context.Background()
	s := e.open(b, ctx)
	b.Cleanup(func() { s.Close() })
	b.ResetTimer()
	for range b.N {
		res, err := s.Bash(ctx, "true")
		if err != nil || res.End.Status != 0 {
			b.Fatalf("true: %v %v", res, err)
		}
	}
}

// BenchmarkDockerStepTrueListening is BenchmarkDockerStepTrue with the kernel listening on a
// socket bound into the container (as a daemon's sessions do) rather than on the stdio the
// engine relays: the frames reach the kernel without passing through the engine.
func BenchmarkDockerStepTrueListening(b *testing.B) {
	e := newBenchEnv(b)
	ctx := context.Background()
	env, _ := environ.Sandbox(os.Environ(), nil, sandboxEnv, e.pm)
	dir, err := os.MkdirTemp("", "pd-bench-")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { os.RemoveAll(dir) })
	s, err := orchestrator.Open(ctx, orchestrator.Config{Workspace: e.ws, Transport: e.tr, Kernel: e.kernel, Env: env, PathMap: e.pm,
		Listen: filepath.Join(dir, "kernel"), Key: randomName("key-") + randomName("")})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	if s.Listening().Key == "" {
		b.Fatal("the kernel does not listen")
	}
	b.ResetTimer()
	for range b.N {
		res, err := s.Bash(ctx, "true")
		if err != nil || res.End.Status != 0 {
			b.Fatalf("true: %v %v", res, err)
		}
	}
}

func BenchmarkDockerExecTrue(b *testing.B) {
	e := newBenchEnv(b)
	box := longLived(b, e.tr.Client, e.img, e.kernel, e.ws)
	b.ResetTimer()
	for range b.N {
		if out, err := exec.Command("docker", "exec", box, "true").CombinedOutput(); err != nil {
			b.Fatalf("docker exec: %v: %s", err, out)
		}
	}
}

// BenchmarkDockerReadyVsRun interleaves a cold session (ready when the kernel answered ping)
// and `docker run --rm IMG true`, one of each per iteration, so that both meet the same
// load; it reports each one's mean and their ratio (goal: ratio ≤ 1.2).
func BenchmarkDockerReadyVsRun(b *testing.B) {
	e := newBenchEnv(b)
	ctx := context.Background()
	e.vsRun(b, func() *orchestrator.Session { return e.open(b, ctx) })
}

// vsRun interleaves a cold session (open makes it; ready when its kernel answered ping,
// closed untimed) and `docker run --rm IMG true`, one of each per iteration, so that both
// meet the same load; it reports each one's mean and their ratio.
func (e *benchEnv) vsRun(b *testing.B, open func() *orchestrator.Session) {
	args := append(append([]string{"run", "--rm"}, e.mountFlags()...), e.img, "true")
	var ready, run time.Duration
	b.ResetTimer()
	for range b.N {
		t0 := time.Now()
		s := open()
		ready += time.Since(t0)
		s.Close()
		t0 = time.Now()
		if out, err := exec.Command("docker", args...).CombinedOutput(); err != nil {
			b.Fatalf("docker run: %v: %s", err, out)
		}
		run += time.Since(t0)
	}
	b.ReportMetric(float64(ready.Milliseconds())/float64(b.N), "ready-ms/op")
	b.ReportMetric(float64(run.Milliseconds())/float64(b.N), "run-ms/op")
	b.ReportMetric(float64(ready)/float64(run), "ready/run")
}

// BenchmarkDockerStepVsExec interleaves a `true` step in an open session and
// `docker exec BOX true` on the same image; it reports each one's mean and how many times
// faster the step is (goal: ≥ 20).
func BenchmarkDockerStepVsExec(b *testing.B) {
	e := newBenchEnv(b)
	ctx := context.Background()
	s := e.open(b, ctx)
	b.Cleanup(func() { s.Close() })
	e.vsExec(b, "step", func() { stepTrue(b, ctx, s) })
}

// stepTrue runs a `true` step in s.
func stepTrue(b *testing.B, ctx context.Context, s *orchestrator.Session) {
	res, err := s.Bash(ctx, "true")
	if err != nil || res.End.Status != 0 {
		b.Fatalf("true: %v %v", res, err)
	}
}

// vsExec interleaves op and `docker exec BOX true` in a long-lived container of the same
// image, one of each per iteration, so that both meet the same load; it reports each one's
// mean and how many times faster op is.
func (e *benchEnv) vsExec(b *testing.B, name string, op func()) {
	box := longLived(b, e.tr.Client, e.img, e.kernel, e.ws)
	var mine, ex time.Duration
	b.ResetTimer()
	for range b.N {
		t0 := time.Now()
		op()
		mine += time.Since(t0)
		t0 = time.Now()
		if out, err := exec.Command("docker", "exec", box, "true").CombinedOutput(); err != nil {
			b.Fatalf("docker exec: %v: %s", err, out)
		}
		ex += time.Since(t0)
	}
	b.StopTimer()
	b.ReportMetric(float64(mine.Microseconds())/float64(b.N), name+"-µs/op")
	b.ReportMetric(float64(ex.Microseconds())/float64(b.N), "exec-µs/op")
	b.ReportMetric(float64(ex)/float64(mine), "exec/"+name)
}

// openListening opens a session whose kernel listens in a directory of its own, as a
// daemon's sessions are, and returns its configuration too.
func (e *benchEnv) openListening(b *testing.B, ctx context.Context) (*orchestrator.Session, orchestrator.Config) {
	env, _ := environ.Sandbox(os.Environ(), nil, sandboxEnv, e.pm)
	cfg := orchestrator.Config{Workspace: e.ws, Transport: e.tr, Kernel: e.kernel, Env: env, PathMap: e.pm,
		Listen: filepath.Join(b.TempDir(), "kernel"), Key: "bench-key"}
	s, err := orchestrator.Open(ctx, cfg)
	if err != nil {
		b.Fatal(err)
	}
	return s, cfg
}

// BenchmarkDockerListenStepVsExec is BenchmarkDockerStepVsExec with the session's kernel
// listening (a daemon's session: frames over its socket, acknowledged, kept until then).
func BenchmarkDockerListenStepVsExec(b *testing.B) {
	e := newBenchEnv(b)
	ctx := context.Background()
	s, _ := e.openListening(b, ctx)
	b.Cleanup(func() { s.Close() })
	e.vsExec(b, "step", func() { stepTrue(b, ctx, s) })
}

// BenchmarkDockerReattachVsExec interleaves taking a session up again on its running
// container (the kernel reattached, the session reopened, a `true` step run) and
// `docker exec BOX true`, which is what reaching a running container costs otherwise.
func BenchmarkDockerReattachVsExec(b *testing.B) {
	e := newBenchEnv(b)
	ctx := context.Background()
	s, cfg := e.openListening(b, ctx)
	spec := transport.Spec{Session: s.ID(), Listen: cfg.Listen, Key: cfg.Key}
	cfg.ID = s.ID()
	e.vsExec(b, "reattach", func() {
		k, err := e.tr.Reattach(ctx, spec) // the kernel drops the connection before
		if err != nil {
			b.Fatal(err)
		}
		if s, err = orchestrator.Reopen(ctx, cfg, k, nil); err != nil {
			b.Fatal(err)
		}
		stepTrue(b, ctx, s)
	})
	s.Close()
}

// BenchmarkDockerListenReadyVsRun is BenchmarkDockerReadyVsRun with the session's kernel
// listening (a daemon's session: ready once the kernel answered ping over its socket).
func BenchmarkDockerListenReadyVsRun(b *testing.B) {
	e := newBenchEnv(b)
	ctx := context.Background()
	e.vsRun(b, func() *orchestrator.Session {
		s, _ := e.openListening(b, ctx)
		return s
	})
}
