package integration

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	dockercontainer "github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"

	"github.com/paddockhq/paddock/internal/peer"
	"github.com/paddockhq/paddock/orchestrator"
	"github.com/paddockhq/paddock/pool"
	"github.com/paddockhq/paddock/transport"
	"github.com/paddockhq/paddock/transport/containerd"
	"github.com/paddockhq/paddock/transport/docker"
	"github.com/paddockhq/paddock/transport/environ"
	"github.com/paddockhq/paddock/transport/pathmap"
)

// poolBackend is one container backend the pool runs over.
type poolBackend struct {
	name string
	// transport returns a fresh transport of the backend (its reaper runs at its first start).
	transport func(t testing.TB) transport.Transport
	// containers returns the ids of the containers carrying a session's label.
	containers func(ctx context.Context, session string) ([]string, error)
	// hostEnv is what a host process of the test binary needs to start this backend.
	hostEnv []string
}

func dockerPoolBackend(t testing.TB) poolBackend {
	cli := engine(t)
	img := hostImage(t, cli)
	return poolBackend{
		name: "docker",
		transport: func(t testing.TB) transport.Transport {
			return &docker.Transport{Client: cli, Image: img, Mounts: hostMounts(), Stderr: testWriter{t}}
		},
		containers: func(ctx context.Context, session string) ([]string, error) {
			return docker.SessionContainers(ctx, cli, session)
		},
		hostEnv: []string{poolHostBackendEnv + "=docker", poolHostImageEnv + "=" + img},
	}
}

func containerdPoolBackend(t testing.TB) poolBackend {
	c, addr := containerdAt(t)
	img := containerdHostImage(t, c)
	return poolBackend{
		name: "containerd",
		transport: func(t testing.TB) transport.Transport {
			return containerdTransport(t, c, img, docker.Hardening{})
		},
		containers: func(ctx context.Context, session string) ([]string, error) {
			return containerd.SessionContainers(ctx, c, session)
		},
		hostEnv: []string{poolHostBackendEnv + "=containerd", poolHostImageEnv + "=" + img, poolHostAddressEnv + "=" + addr},
	}
}

// poolWorkspace is a workspace bound at /work, and the spec of the sessions that work there.
func poolWorkspace(t testing.TB) (string, *pathmap.Map, transport.Spec) {
	ws := t.TempDir()
	pm, err := pathmap.New(pathmap.Mount{Sandbox: "/work", Host: ws})
	if err != nil {
		t.Fatal(err)
	}
	return ws, pm, transport.Spec{Kernel: kernelBinary(t), Cwd: "/work", PathMap: pm}
}

// newPool is a pool of size over tr, warmed for spec and filled, closed at the test's end.
func newPool(t testing.TB, tr transport.Transport, size int, spec transport.Spec) *pool.Pool {
	t.Helper()
	p := pool.New(pool.Config{Transport: tr, Size: size, Env: append([]string{"PADDOCK_POOL_ONLY=1"}, sandboxEnv...),
		Log: slog.New(slog.NewTextHandler(testWriter{t}, nil))})
	t.Cleanup(func() { p.Close() })
	if err := p.Warm(spec); err != nil {
		t.Fatal(err)
	}
	waitPool(t, p, spec, size)
	return p
}

func waitPool(t testing.TB, p *pool.Pool, spec transport.Spec, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := p.WaitReady(ctx, spec, n); err != nil {
		t.Fatalf("the pool did not fill to %d: %v", n, err)
	}
}

// poolSession opens a session on p in ws, with env, closed at the test's end.
func poolSession(t testing.TB, ctx context.Context, p *pool.Pool, ws string, pm *pathmap.Map, env []string) *orchestrator.Session {
	t.Helper()
	s, err := orchestrator.Open(ctx, orchestrator.Config{Workspace: ws, Transport: p, Kernel: kernelBinary(t), Env: env, PathMap: pm, Ephemeral: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestPoolDocker(t *testing.T)     { runPool(t, dockerPoolBackend(t)) }
func TestPoolContainerd(t *testing.T) { runPool(t, containerdPoolBackend(t)) }

func runPool(t *testing.T, be poolBackend) {
	t.Run("DistinctSandboxes", func(t *testing.T) { testPoolDistinct(t, be) })
	t.Run("SessionsOwn", func(t *testing.T) { testPoolSessionsOwn(t, be) })
	t.Run("Refills", func(t *testing.T) { testPoolRefills(t, be) })
	t.Run("Conformance", func(t *testing.T) {
		RunConformance(t, func(t *testing.T) Env {
			ws, pm, spec := poolWorkspace(t)
			p := pool.New(pool.Config{Transport: be.transport(t), Size: 1})
			t.Cleanup(func() { p.Close() })
			if err := p.Warm(spec); err != nil {
				t.Fatal(err)
			}
			return containerEnv(p, spec.Kernel, ws, pm, be.containers)
		})
	})
}

// law: pool_claim_once — sessions opened at once from a pool each get a sandbox of their
// own; a sandbox a session ended is gone, never handed to the next.
func testPoolDistinct(t *testing.T, be poolBackend) {
	ws, pm, spec := poolWorkspace(t)
	p := newPool(t, be.transport(t), 4, spec)
	ctx := testContext(t)
	const sessions = 8
	hosts := make([]string, sessions)
	var wg sync.WaitGroup
	for i := range sessions {
		wg.Go(func() {
			s, err := orchestrator.Open(ctx, orchestrator.Config{Workspace: ws, Transport: p, Kernel: spec.Kernel, Env: sandboxEnv, PathMap: pm})
			if err != nil {
				t.Error(err)
				return
			}
			defer s.Close()
			res, err := s.Bash(ctx, `cat /proc/sys/kernel/hostname`)
			if err != nil {
				t.Error(err)
				return
			}
			hosts[i] = strings.TrimSpace(stdout(res))
		})
	}
	wg.Wait()
	seen := map[string]bool{}
	for _, h := range hosts {
		if h == "" || seen[h] {
			t.Fatalf("sandboxes of the sessions: %q; want one each", hosts)
		}
		seen[h] = true
	}
	// The sessions ended: their sandboxes went with them, and the pool's own are fresh.
	waitPool(t, p, spec, 4)
	for range 4 {
		s := poolSession(t, ctx, p, ws, pm, sandboxEnv)
		h := strings.TrimSpace(stdout(bash(t, ctx, s, `cat /proc/sys/kernel/hostname`)))
		if seen[h] {
			t.Fatalf("the sandbox %s served a session that ended, and then another", h)
		}
		seen[h] = true
	}
}

// law: pool_session_own — a sandbox from the pool runs the session's commands in the
// session's working directory with the session's environment, and nothing of the pool's.
func testPoolSessionsOwn(t *testing.T, be poolBackend) {
	ws, pm, spec := poolWorkspace(t)
	p := newPool(t, be.transport(t), 1, spec)
	ctx := testContext(t)
	t.Setenv("PADDOCK_SESSION_ONLY", "mine")
	env, _ := environ.Sandbox(os.Environ(), []string{"PADDOCK_SESSION_ONLY"}, sandboxEnv, pm)
	s := poolSession(t, ctx, p, ws, pm, env)
	h, err := s.Ping(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// It is a warm sandbox: its kernel started with the pool's own environment.
	kenv := stdout(bash(t, ctx, s, fmt.Sprintf(`tr '\0' '\n' < /proc/%d/environ`, h.PID)))
	if !strings.Contains(kenv, "PADDOCK_POOL_ONLY=1") || strings.Contains(kenv, "PADDOCK_SESSION_ONLY") {
		t.Fatalf("the session's kernel is not a warm one; its environment:\n%s", kenv)
	}
	res := bash(t, ctx, s, fmt.Sprintf(`pwd; readlink /proc/%d/cwd; env`, h.PID))
	if res.Steps[0].Stdout.Text != "/work\n" || res.Steps[1].Stdout.Text != "/work\n" {
		t.Errorf("working directories %q and %q, want /work", res.Steps[0].Stdout.Text, res.Steps[1].Stdout.Text)
	}
	out := res.Steps[2].Stdout.Text
	if !strings.Contains(out, "PADDOCK_SESSION_ONLY=mine") || strings.Contains(out, "PADDOCK_POOL_ONLY") {
		t.Errorf("the session's commands see:\n%s", out)
	}
	bash(t, ctx, s, `touch made-here`)
	if _, err := os.Stat(ws + "/made-here"); err != nil {
		t.Errorf("a file made in the session's working directory is not in its workspace: %v", err)
	}
}

// law: pool_refills — after sessions claim from the pool it holds its size again.
func testPoolRefills(t *testing.T, be poolBackend) {
	ws, pm, spec := poolWorkspace(t)
	p := newPool(t, be.transport(t), 3, spec)
	ctx := testContext(t)
	for range 3 {
		poolSession(t, ctx, p, ws, pm, sandboxEnv)
	}
	waitPool(t, p, spec, 3)
	ids, err := be.containers(ctx, p.Session())
	if err != nil {
		t.Fatal(err)
	}
	// The warm sandboxes carry the pool's session label until claimed (docker keeps it on a
	// claimed one too: its labels are fixed at creation).
	if len(ids) < 3 {
		t.Errorf("the pool's sandboxes: %v, want 3 at least", ids)
	}
}

// Environment of the test binary when it plays a host process that fills a pool and waits
// to be killed.
const (
	poolHostEnv        = "PADDOCK_TEST_POOL_HOST" // the pool's size
	poolHostBackendEnv = "PADDOCK_TEST_POOL_BACKEND"
	poolHostImageEnv   = "PADDOCK_TEST_POOL_IMAGE"
	poolHostAddressEnv = "PADDOCK_TEST_POOL_CONTAINERD"
	poolHostKernelEnv  = "PADDOCK_TEST_POOL_KERNEL"
	poolHostWorkEnv    = "PADDOCK_TEST_POOL_WORKDIR"
)

func init() {
	if os.Getenv(poolHostEnv) != "" {
		os.Exit(playPoolHost())
	}
}

// playPoolHost fills a pool, prints "ready POOL-SESSION" and waits to be killed.
func playPoolHost() int {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var size int
	fmt.Sscan(os.Getenv(poolHostEnv), &size)
	var tr transport.Transport
	switch os.Getenv(poolHostBackendEnv) {
	case "docker":
		cli, err := docker.Connect(ctx)
		if err != nil {
			fmt.Println("error", err)
			return 1
		}
		tr = &docker.Transport{Client: cli, Image: os.Getenv(poolHostImageEnv), Mounts: hostMounts(), NoReap: true}
	case "containerd":
		c, err := containerd.Connect(ctx, os.Getenv(poolHostAddressEnv))
		if err != nil {
			fmt.Println("error", err)
			return 1
		}
		tr = &containerd.Transport{Client: c, Image: os.Getenv(poolHostImageEnv), Mounts: hostMounts(), NoReap: true}
	}
	pm, err := pathmap.New(pathmap.Mount{Sandbox: "/work", Host: os.Getenv(poolHostWorkEnv)})
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	spec := transport.Spec{Kernel: os.Getenv(poolHostKernelEnv), Cwd: "/work", PathMap: pm}
	p := pool.New(pool.Config{Transport: tr, Size: size})
	p.Warm(spec)
	if err := p.WaitReady(ctx, spec, size); err != nil {
		fmt.Println("error", err)
		return 1
	}
	fmt.Println("ready", p.Session())
	select {}
}

// law: pool_reaped — a host process killed with a full pool (SIGKILL: no cleanup of its
// own) leaves its warm sandboxes; the next start of the transport removes every one.
func TestPoolHostKilledDocker(t *testing.T)     { testPoolHostKilled(t, dockerPoolBackend(t)) }
func TestPoolHostKilledContainerd(t *testing.T) { testPoolHostKilled(t, containerdPoolBackend(t)) }

func testPoolHostKilled(t *testing.T, be poolBackend) {
	ctx := testContext(t)
	host := exec.Command(os.Args[0], "-test.run=^$")
	host.Env = append(append(os.Environ(), be.hostEnv...), poolHostEnv+"=3", poolHostKernelEnv+"="+kernelBinary(t), poolHostWorkEnv+"="+t.TempDir())
	line := peer.StartHost(t, host)
	word, session, _ := strings.Cut(line, " ")
	if word != "ready" {
		t.Fatalf("the host process said %q", line)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		ids, _ := be.containers(ctx, session)
		if len(ids) > 0 {
			t.Errorf("left at the end: %v", ids)
		}
	})
	if ids, err := be.containers(ctx, session); err != nil || len(ids) != 3 {
		t.Fatalf("the live host's pool has containers %v, %v; want 3", ids, err)
	}
	host.Process.Signal(syscall.SIGKILL)
	host.Wait()
	if ids, err := be.containers(ctx, session); err != nil || len(ids) != 3 {
		t.Fatalf("after the host's death its pool has containers %v, %v; want its 3 leftovers", ids, err)
	}
	// The next start: a session through a fresh transport, whose reaper runs first.
	s, _ := transportSession(t, ctx, be.transport(t), nil)
	if _, err := s.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	if ids, err := be.containers(ctx, session); err != nil || len(ids) != 0 {
		t.Fatalf("after the next start the dead host's pool still has containers %v, %v", ids, err)
	}
	if be.name == "containerd" {
		if fifos, _ := filepath.Glob("/run/containerd/fifo/*/" + containerdIDPrefix(session) + "*"); len(fifos) != 0 {
			t.Fatalf("the dead host's standard-stream FIFOs are left: %v", fifos)
		}
	}
}

// containerdIDPrefix is the prefix of the ids of a session's containers.
func containerdIDPrefix(session string) string { return "paddock-" + session + "-" }

// paddock run --pool N keeps N sandboxes warm for the command's sessions, runs in one of them
// (on containerd its host name is its container's id, a pool's), and leaves none behind.
func TestRunPool(t *testing.T) {
	for _, kind := range []string{"docker", "containerd"} {
		t.Run(kind, func(t *testing.T) {
			var left func(ctx context.Context, pid int) ([]string, error)
			var env []string
			switch kind {
			case "docker":
				cli := engine(t)
				left = func(ctx context.Context, pid int) ([]string, error) {
					list, err := cli.ContainerList(ctx, dockercontainer.ListOptions{All: true, Filters: filters.NewArgs(filters.Arg("label", docker.LabelPID+"="+strconv.Itoa(pid)))})
					var ids []string
					for _, c := range list {
						ids = append(ids, c.ID)
					}
					return ids, err
				}
			case "containerd":
				c, addr := containerdAt(t)
				env = []string{"PADDOCK_CONTAINERD_ADDRESS=" + addr}
				left = func(ctx context.Context, pid int) ([]string, error) {
					list, err := c.Containers(containerdNS(ctx), fmt.Sprintf(`labels."%s"==%d`, docker.LabelPID, pid))
					var ids []string
					for _, c := range list {
						ids = append(ids, c.ID())
					}
					return ids, err
				}
			}
			bin := paddockBinary(t)
			dir := t.TempDir()
			ctx := testContext(t)
			cmd := exec.CommandContext(ctx, bin, "run", "--transport", kind, "--pool", "2", `cat /proc/sys/kernel/hostname; pwd`)
			cmd.Dir = dir
			cmd.Env = append(append(os.Environ(), "XDG_CONFIG_HOME="+t.TempDir()), env...)
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("paddock run --pool: %v\n%s", err, out)
			}
			lines := strings.Split(strings.TrimSpace(string(out)), "\n")
			if len(lines) != 2 || lines[1] != dir {
				t.Fatalf("paddock run --pool printed %q", out)
			}
			if kind == "containerd" && !strings.HasPrefix(lines[0], "paddock-pool-") {
				t.Errorf("the session ran in %s, not a pool's sandbox", lines[0])
			}
			if ids, err := left(ctx, cmd.Process.Pid); err != nil || len(ids) != 0 {
				t.Errorf("left behind by paddock run --pool: %v, %v", ids, err)
			}
		})
	}
}
