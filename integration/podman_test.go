package integration

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types"
	"github.com/docker/docker/client"

	"github.com/paddockhq/paddock/config"
	"github.com/paddockhq/paddock/daemon/api"
	"github.com/paddockhq/paddock/orchestrator"
	"github.com/paddockhq/paddock/session"
	"github.com/paddockhq/paddock/transport"
	"github.com/paddockhq/paddock/transport/docker"
)

// Podman as the docker transport's engine, through its Docker-compatible service
// (podman system service): the same transport, labels, reaper, host image and suites.

// podmanEngine returns a client of a Podman service: the one PADDOCK_PODMAN_HOST names
// (.ci/run starts one), else root's usual socket. Without one, it skips.
func podmanEngine(t testing.TB) (*client.Client, string) {
	t.Helper()
	host := os.Getenv("PADDOCK_PODMAN_HOST")
	if host == "" {
		host = "unix:///run/podman/podman.sock"
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cli, err := docker.ConnectTo(ctx, host)
	if err != nil {
		needPeer(t, "no Podman service at %s (PADDOCK_PODMAN_HOST; podman system service): %v", host, err)
	}
	t.Cleanup(func() { cli.Close() })
	v, err := cli.ServerVersion(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !isPodman(v.Components) {
		needPeer(t, "the engine at %s is not Podman: %+v", host, v)
	}
	return cli, host
}

// isPodman reports whether an engine's version components name Podman.
func isPodman(cs []types.ComponentVersion) bool {
	for _, c := range cs {
		if strings.Contains(strings.ToLower(c.Name), "podman") {
			return true
		}
	}
	return false
}

func TestConformancePodman(t *testing.T) {
	cli, _ := podmanEngine(t)
	kernel := kernelBinary(t)
	img := hostImage(t, cli)
	containerConformance(t, kernel, false, func(t *testing.T) transport.Transport {
		return &docker.Transport{Client: cli, Image: img, Mounts: hostMounts(), Stderr: testWriter{t}}
	}, func(ctx context.Context, session string) ([]string, error) {
		return docker.SessionContainers(ctx, cli, session)
	})
}

func TestSecurityPodman(t *testing.T) {
	cli, _ := podmanEngine(t)
	img := hostImage(t, cli)
	RunSecurity(t, func(t *testing.T, ctx context.Context, h docker.Hardening, names []string) *orchestrator.Session {
		s, _ := dockerSession(t, ctx, cli, img, h, names)
		return s
	}, "host", "eth0")
}

// The reaper removes a dead host's containers from Podman as from Docker: the labels are the
// same, and Podman's service filters on them.
func TestReaperPodman(t *testing.T) {
	cli, host := podmanEngine(t)
	testReaper(t, cli, []string{"DOCKER_HOST=" + host})
}

// Podman's reapers that run at once agree as Docker's do.
func TestConcurrentReapersPodman(t *testing.T) {
	t.Parallel()
	cli, host := podmanEngine(t)
	testConcurrentReapers(t, cli, []string{"DOCKER_HOST=" + host})
}

// kernelTransport.docker.host makes Podman the engine of a session opened from the
// settings, whatever DOCKER_HOST says: its container is Podman's, labelled as Docker's are.
func TestSettingsDockerHostPodman(t *testing.T) {
	pcli, host := podmanEngine(t)
	ws, conf := t.TempDir(), t.TempDir()
	settings := filepath.Join(conf, "settings.yaml")
	os.WriteFile(settings, []byte("kernelTransport:\n  kind: docker\n  docker:\n    host: "+host+"\n"), 0o600)
	t.Setenv("DOCKER_HOST", "")
	ctx := testContext(t)
	l, err := session.Load(config.Options{Workspace: ws, GlobalFile: settings})
	if err != nil {
		t.Fatal(err)
	}
	s, p, err := session.Open(ctx, session.Options{Workspace: ws, Settings: l})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close(); p.Finish(context.Background()) })
	if out := stdout(bash(t, ctx, s, `echo hi`)); out != "hi\n" {
		t.Fatalf("echo hi: %q", out)
	}
	ids, err := docker.SessionContainers(ctx, pcli, s.ID())
	if err != nil || len(ids) != 1 {
		t.Fatalf("Podman's containers of the session: %v, %v", ids, err)
	}
}

// A daemon's session on Podman, left by a host that died, is looked for on the engine its
// request named (kernelTransport.docker.host), not the environment's: recovery finds its
// container on Podman and removes it while DOCKER_HOST names Docker's engine.
func TestRecoverPodman(t *testing.T) {
	pcli, host := podmanEngine(t)
	img := hostImage(t, pcli)
	dead := deadHost(t, pcli, img, []string{"DOCKER_HOST=" + host})
	t.Setenv("DOCKER_HOST", "")              // the environment's engine: Docker's default socket
	t.Setenv("XDG_CONFIG_HOME", t.TempDir()) // no user settings
	ctx := testContext(t)
	req := &api.OpenRequest{Workspace: t.TempDir(), Transport: "docker", Settings: map[string]string{"kernelTransport.docker.host": host}}
	got := session.Recover(ctx, "docker", session.Left{Session: dead, Request: req})
	if !strings.Contains(got, "1 container(s) removed") {
		t.Errorf("recovery said %q; want its container removed", got)
	}
	if ids, err := docker.SessionContainers(ctx, pcli, dead); err != nil || len(ids) != 0 {
		t.Fatalf("after recovery the dead host's session has containers on Podman %v, %v", ids, err)
	}
}

// The docker provider's reaper (a daemon's, at its start) reaps the engine the user's
// settings name as well as the environment's: a dead host's container on Podman is removed
// while DOCKER_HOST names Docker's engine.
func TestProviderReapPodman(t *testing.T) {
	pcli, host := podmanEngine(t)
	img := hostImage(t, pcli)
	dead := deadHost(t, pcli, img, []string{"DOCKER_HOST=" + host})
	conf := t.TempDir()
	os.MkdirAll(filepath.Join(conf, "paddock"), 0o700)
	os.WriteFile(filepath.Join(conf, "paddock", "settings.yaml"), []byte("kernelTransport:\n  docker:\n    host: "+host+"\n"), 0o600)
	t.Setenv("XDG_CONFIG_HOME", conf)
	t.Setenv("DOCKER_HOST", "")
	ctx := testContext(t)
	p, ok := session.Lookup("docker")
	if !ok {
		t.Fatal("no docker provider")
	}
	if n, err := p.Reap(ctx); err != nil || n < 1 {
		t.Errorf("the provider's reap removed %d, %v; want the dead host's container", n, err)
	}
	if ids, err := docker.SessionContainers(ctx, pcli, dead); err != nil || len(ids) != 0 {
		t.Fatalf("after the reap the dead host's session has containers on Podman %v, %v", ids, err)
	}
}

// gVisor through Podman. Podman's Docker-compatible API ignores a container's runtime
// (HostConfig.Runtime) and runs the service's default: a service whose default is runsc
// (.ci/run starts one, PADDOCK_PODMAN_RUNSC_HOST) runs every sandbox under gVisor, and a
// session asking for runsc on any other Podman service is refused, not run under runc.

// podmanRunscEngine returns a client of a Podman service whose default runtime is runsc, and
// its address. Without one, it skips.
func podmanRunscEngine(t testing.TB) (*client.Client, string) {
	t.Helper()
	runsc(t)
	host := os.Getenv("PADDOCK_PODMAN_RUNSC_HOST")
	if host == "" {
		needPeer(t, "no Podman service running gVisor (PADDOCK_PODMAN_RUNSC_HOST; .ci/run starts one)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cli, err := docker.ConnectTo(ctx, host)
	if err != nil {
		needPeer(t, "no Podman service at %s (PADDOCK_PODMAN_RUNSC_HOST): %v", host, err)
	}
	t.Cleanup(func() { cli.Close() })
	v, err := cli.ServerVersion(ctx)
	if err != nil {
		t.Fatal(err)
	}
	info, err := cli.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !isPodman(v.Components) || info.DefaultRuntime != "runsc" {
		t.Fatalf("the engine at %s (PADDOCK_PODMAN_RUNSC_HOST) is not Podman running runsc by default: %+v, default runtime %q", host, v.Components, info.DefaultRuntime)
	}
	return cli, host
}

// podmanRunsc is a docker transport of a host image of its own on Podman's gVisor service.
func podmanRunsc(t testing.TB, cli *client.Client, img string, h docker.Hardening) *docker.Transport {
	return &docker.Transport{Client: cli, Image: img, Mounts: hostMounts(), Hardening: h, Runtime: "runsc", Stderr: testWriter{t}}
}

func TestConformancePodmanRunsc(t *testing.T) {
	cli, _ := podmanRunscEngine(t)
	kernel := kernelBinary(t)
	img := hostImage(t, cli)
	containerConformance(t, kernel, true, func(t *testing.T) transport.Transport {
		return podmanRunsc(t, cli, img, docker.Hardening{})
	}, func(ctx context.Context, session string) ([]string, error) {
		return docker.SessionContainers(ctx, cli, session)
	})
}

func TestSecurityPodmanRunsc(t *testing.T) {
	cli, host := podmanRunscEngine(t)
	img := hostImage(t, cli)
	RunSecurityOn(t, func(t *testing.T, ctx context.Context, h docker.Hardening, names []string) *orchestrator.Session {
		s, _ := transportSession(t, ctx, podmanRunsc(t, cli, img, h), names)
		return s
	}, Security{Network: "none", Iface: "lo", Pids: gvisorPids, Limits: podmanHostLimits(cli, host)}) // the service's wrapper runs runsc with --network=none
}

func TestDifferentialPodmanRunsc(t *testing.T) {
	cli, _ := podmanRunscEngine(t)
	runDifferential(t, dockerRunc(t, engine(t)), podmanRunsc(t, cli, hostImage(t, cli), docker.Hardening{}))
}

// kernelTransport.runtime runsc with kernelTransport.docker.host naming Podman's gVisor
// service opens a session whose kernel runs on gVisor's kernel; on a Podman service whose
// default is runc the same settings are refused (that service would run runc, whatever the
// container asks), with how to start one for gVisor.
func TestSettingsRuntimeRunscPodman(t *testing.T) {
	_, rhost := podmanRunscEngine(t)
	_, phost := podmanEngine(t)
	open := func(host string) (*orchestrator.Session, error) {
		ws, conf := t.TempDir(), t.TempDir()
		settings := filepath.Join(conf, "settings.yaml")
		os.WriteFile(settings, []byte("kernelTransport:\n  kind: docker\n  runtime: runsc\n  docker:\n    host: "+host+"\n"), 0o600)
		l, err := session.Load(config.Options{Workspace: ws, GlobalFile: settings})
		if err != nil {
			t.Fatal(err)
		}
		s, p, err := session.Open(testContext(t), session.Options{Workspace: ws, Settings: l})
		if err == nil {
			t.Cleanup(func() { s.Close(); p.Finish(context.Background()) })
		}
		return s, err
	}
	s, err := open(rhost)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(stdout(bash(t, testContext(t), s, `uname -r`))); got == hostRelease(t) {
		t.Errorf("the session's kernel runs on the host's kernel (%s)", got)
	}
	_, err = open(phost)
	var oe *session.OptionError
	if !errors.As(err, &oe) || !strings.Contains(err.Error(), "Podman") || !strings.Contains(err.Error(), `runtime = "runsc"`) {
		t.Fatalf("runsc on a Podman service running runc: %v; want it refused with how to start one for gVisor", err)
	}
}

// podmanHostLimits reads a Podman sandbox's process and memory limits from its cgroup on the
// host (Podman's cgroupfs parent, libpod_parent/libpod-ID, v2 or v1), checking through
// Podman's own API that it runs under runsc (its Docker-compatible inspect does not say).
func podmanHostLimits(cli *client.Client, host string) func(t *testing.T, ctx context.Context, s *orchestrator.Session) (string, string) {
	return func(t *testing.T, ctx context.Context, s *orchestrator.Session) (string, string) {
		ids, err := docker.SessionContainers(ctx, cli, s.ID())
		if err != nil || len(ids) != 1 {
			t.Fatalf("the session's containers: %v, %v", ids, err)
		}
		if rt := podmanRuntime(t, ctx, host, ids[0]); rt != "runsc" {
			t.Fatalf("the container runs under %q", rt)
		}
		read := func(paths ...string) string {
			for _, p := range paths {
				if b, err := os.ReadFile(p); err == nil {
					return strings.TrimSpace(string(b))
				}
			}
			t.Fatalf("none of %v can be read", paths)
			return ""
		}
		dir := "libpod_parent/libpod-" + ids[0]
		return read("/sys/fs/cgroup/"+dir+"/pids.max", "/sys/fs/cgroup/pids/"+dir+"/pids.max"),
			read("/sys/fs/cgroup/"+dir+"/memory.max", "/sys/fs/cgroup/memory/"+dir+"/memory.limit_in_bytes")
	}
}

// podmanRuntime is the OCI runtime a Podman container runs under, from Podman's own API.
func podmanRuntime(t *testing.T, ctx context.Context, host, id string) string {
	sock := strings.TrimPrefix(host, "unix://")
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", sock)
	}}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://podman/v4.0.0/libpod/containers/"+id+"/json", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var c struct{ OCIRuntime string }
	if err := json.NewDecoder(resp.Body).Decode(&c); err != nil {
		t.Fatal(err)
	}
	return c.OCIRuntime
}

// `paddock doctor` checks the engine the user's settings name, and on Podman says the one
// runtime a session gets there, its service's default: gVisor's service says runsc; runc's
// says runc, with how to start a service for gVisor.
func TestDoctorPodmanRuntime(t *testing.T) {
	_, rhost := podmanRunscEngine(t)
	_, phost := podmanEngine(t)
	p, ok := session.Lookup("docker")
	if !ok {
		t.Fatal("no docker provider")
	}
	t.Setenv("DOCKER_HOST", "") // the environment's engine: Docker's default socket
	for _, tc := range []struct {
		host, detail string
		fix          bool
	}{{rhost, "runtime (--runtime): runsc alone", false}, {phost, "runtime (--runtime): runc alone", true}} {
		conf := t.TempDir()
		os.MkdirAll(filepath.Join(conf, "paddock"), 0o700)
		os.WriteFile(filepath.Join(conf, "paddock", "settings.yaml"), []byte("kernelTransport:\n  docker:\n    host: "+tc.host+"\n"), 0o600)
		t.Setenv("XDG_CONFIG_HOME", conf)
		c := p.Check(testContext(t))
		if !strings.Contains(c.Detail, "Podman") || !strings.Contains(c.Detail, tc.detail) {
			t.Errorf("%s: %s", tc.host, c)
		}
		if got := strings.Contains(c.Fix, `runtime = "runsc"`); got != tc.fix {
			t.Errorf("%s: the fix says how to run gVisor: %v, want %v: %s", tc.host, got, tc.fix, c)
		}
	}
}
