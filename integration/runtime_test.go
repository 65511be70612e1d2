package integration

import (
	cdclient "github.com/containerd/containerd/v2/client"
	"github.com/docker/docker/client"

	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/paddockhq/paddock/config"
	"github.com/paddockhq/paddock/internal/peer"
	"github.com/paddockhq/paddock/orchestrator"
	"github.com/paddockhq/paddock/session"
	"github.com/paddockhq/paddock/transport"
	"github.com/paddockhq/paddock/transport/containerd"
	"github.com/paddockhq/paddock/transport/docker"
)

// The suites under gVisor (kernelTransport.runtime runsc): containerd runs the sandbox with
// runsc, through gVisor's shim or its runc shim running Paddock's wrapper; Docker runs it
// under the runtime the engine registered as runsc (.ci/run registers it).

// runsc skips (or fails) a test where gVisor is not installed.
func runsc(t testing.TB) {
	t.Helper()
	peer.Program(t, "runsc", "runsc")
}

// runscContainerd is a containerd transport of the host image under gVisor.
func runscContainerd(t testing.TB, c *cdclient.Client, img string, h docker.Hardening) *containerd.Transport {
	tr := containerdTransport(t, c, img, h)
	tr.Runtime = "runsc"
	return tr
}

func TestConformanceContainerdRunsc(t *testing.T) {
	runsc(t)
	c := containerdDaemon(t)
	kernel := kernelBinary(t)
	img := containerdHostImage(t, c)
	containerConformance(t, kernel, true, func(t *testing.T) transport.Transport {
		return runscContainerd(t, c, img, docker.Hardening{})
	}, func(ctx context.Context, session string) ([]string, error) {
		return containerd.SessionContainers(ctx, c, session)
	})
}

func TestSecurityContainerdRunsc(t *testing.T) {
	runsc(t)
	c := containerdDaemon(t)
	img := containerdHostImage(t, c)
	RunSecurityOn(t, func(t *testing.T, ctx context.Context, h docker.Hardening, names []string) *orchestrator.Session {
		s, _ := transportSession(t, ctx, runscContainerd(t, c, img, h), names)
		return s
	}, Security{Network: "host", Iface: "eth0", Pids: gvisorPids, Limits: containerdHostLimits(c)})
}

// A sandbox under runsc runs on gVisor's kernel, not the host's: the release it reports is
// gVisor's (4.4.0), not the host's.
func TestContainerdRunscIsGVisor(t *testing.T) {
	runsc(t)
	c := containerdDaemon(t)
	img := containerdHostImage(t, c)
	ctx := testContext(t)
	s, _ := transportSession(t, ctx, runscContainerd(t, c, img, docker.Hardening{}), nil)
	res := bash(t, ctx, s, `uname -r`)
	if got, host := strings.TrimSpace(stdout(res)), hostRelease(t); got == host || got == "" {
		t.Fatalf("uname -r under runsc: %s (the host's: %s)", res, host)
	}
}

// hostRelease is the host kernel's release.
func hostRelease(t testing.TB) string {
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		t.Fatal(err)
	}
	return unix.ByteSliceToString(u.Release[:])
}

// gvisorPids is the process limit the security suite asks for under gVisor: the host's
// limit bounds gVisor's own threads too (its sentry's, its gofer's, one per sandbox thread
// on the ptrace platform), and 77 would not leave it room to start.
const gvisorPids = 400

// containerdHostLimits reads a containerd sandbox's process and memory limits from its cgroup
// on the host (v2, else v1), where runsc sets them: gVisor's own cgroup file system in the
// sandbox does not show them.
func containerdHostLimits(c *cdclient.Client) func(t *testing.T, ctx context.Context, s *orchestrator.Session) (string, string) {
	return func(t *testing.T, ctx context.Context, s *orchestrator.Session) (string, string) {
		ids, err := containerd.SessionContainers(ctx, c, s.ID())
		if err != nil || len(ids) != 1 {
			t.Fatalf("the session's containers: %v, %v", ids, err)
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
		dir := containerd.Namespace + "/" + ids[0]
		return read("/sys/fs/cgroup/"+dir+"/pids.max", "/sys/fs/cgroup/pids/"+dir+"/pids.max"),
			read("/sys/fs/cgroup/"+dir+"/memory.max", "/sys/fs/cgroup/memory/"+dir+"/memory.limit_in_bytes")
	}
}

// dockerRunsc returns a client of a Docker engine that has gVisor registered as runsc.
func dockerRunsc(t testing.TB) *client.Client {
	t.Helper()
	runsc(t)
	cli := engine(t)
	info, err := cli.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := info.Runtimes["runsc"]; !ok {
		needPeer(t, "the Docker engine has no runtime runsc registered (daemon.json runtimes; .ci/run registers it)")
	}
	return cli
}

func TestSecurityDockerRunsc(t *testing.T) {
	cli := dockerRunsc(t)
	img := hostImage(t, cli)
	RunSecurityOn(t, func(t *testing.T, ctx context.Context, h docker.Hardening, names []string) *orchestrator.Session {
		tr := &docker.Transport{Client: cli, Image: img, Mounts: hostMounts(), Hardening: h, Runtime: "runsc", Stderr: testWriter{t}}
		s, _ := transportSession(t, ctx, tr, names)
		return s
	}, Security{Network: "none", Iface: "lo", Pids: gvisorPids, Limits: dockerHostLimits(cli)}) // the engine registers runsc with --network=none
}

func TestConformanceDockerRunsc(t *testing.T) {
	cli := dockerRunsc(t)
	kernel := kernelBinary(t)
	img := hostImage(t, cli)
	containerConformance(t, kernel, true, func(t *testing.T) transport.Transport {
		return &docker.Transport{Client: cli, Image: img, Mounts: hostMounts(), Runtime: "runsc", Stderr: testWriter{t}}
	}, func(ctx context.Context, session string) ([]string, error) {
		return docker.SessionContainers(ctx, cli, session)
	})
}

// dockerHostLimits reads a docker sandbox's process and memory limits from its cgroup on the
// host (the engine's cgroupfs driver: docker/ID, v2 or v1), checking it runs under runsc.
func dockerHostLimits(cli *client.Client) func(t *testing.T, ctx context.Context, s *orchestrator.Session) (string, string) {
	return func(t *testing.T, ctx context.Context, s *orchestrator.Session) (string, string) {
		ids, err := docker.SessionContainers(ctx, cli, s.ID())
		if err != nil || len(ids) != 1 {
			t.Fatalf("the session's containers: %v, %v", ids, err)
		}
		c, err := cli.ContainerInspect(ctx, ids[0])
		if err != nil {
			t.Fatal(err)
		}
		if c.HostConfig.Runtime != "runsc" {
			t.Fatalf("the container runs under %q", c.HostConfig.Runtime)
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
		dir := "docker/" + c.ID
		return read("/sys/fs/cgroup/"+dir+"/pids.max", "/sys/fs/cgroup/pids/"+dir+"/pids.max"),
			read("/sys/fs/cgroup/"+dir+"/memory.max", "/sys/fs/cgroup/memory/"+dir+"/memory.limit_in_bytes")
	}
}

// kernelTransport.runtime reaches a session the way a user sets it, through the settings,
// and a pool made under it hands out gVisor sandboxes only: the session's kernel runs on
// gVisor's kernel and its container carries the runtime's label.
func TestSettingsRuntimeRunscPool(t *testing.T) {
	runsc(t)
	c := containerdDaemon(t)
	ws, conf := t.TempDir(), t.TempDir()
	settings := filepath.Join(conf, "settings.yaml")
	os.WriteFile(settings, []byte("kernelTransport:\n  kind: containerd\n  runtime: runsc\n  docker:\n    pool: 2\n"), 0o600)
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
	if got := strings.TrimSpace(stdout(bash(t, ctx, s, `uname -r`))); got == hostRelease(t) {
		t.Errorf("the session's kernel runs on the host's kernel (%s)", got)
	}
	ids, err := containerd.SessionContainers(ctx, c, s.ID())
	if err != nil || len(ids) != 1 {
		t.Fatalf("the session's containers: %v, %v", ids, err)
	}
	ct, err := c.LoadContainer(containerdNS(ctx), ids[0])
	if err != nil {
		t.Fatal(err)
	}
	labels, err := ct.Labels(containerdNS(ctx))
	if err != nil || labels[docker.LabelRuntime] != "runsc" {
		t.Errorf("the session's container's labels: %v, %v", labels, err)
	}
}

// Debian's runsc refuses AT_NO_AUTOMOUNT in statx and newfstatat, which coreutils' ls and
// stat pass on every named path; the kernel finds that out and starts each command through
// its tracer, which clears the flag: ls and stat on a named path work under gVisor, each
// command traced there, and untraced under runc, where nothing needs mending.
func TestContainerdRunscAutomount(t *testing.T) {
	runsc(t)
	c := containerdDaemon(t)
	img := containerdHostImage(t, c)
	ctx := testContext(t)
	const script = `mkdir -p sub && echo x > sub/f && ls sub && stat -c '%n %s' sub/f && sed -n 's/^TracerPid:[[:space:]]*//p' /proc/self/status`
	for _, tc := range []struct {
		name   string
		tr     *containerd.Transport
		traced bool
	}{{"runc", containerdTransport(t, c, img, docker.Hardening{}), false}, {"runsc", runscContainerd(t, c, img, docker.Hardening{}), true}} {
		s, _ := transportSession(t, ctx, tc.tr, nil)
		res := bash(t, ctx, s, script)
		lines := strings.Fields(stdout(res))
		if len(lines) != 4 || lines[0] != "f" || lines[1] != "sub/f" || lines[2] != "2" {
			t.Errorf("%s: %s", tc.name, res)
			continue
		}
		if traced := lines[3] != "0"; traced != tc.traced {
			t.Errorf("%s: a command runs traced: %v, want %v", tc.name, traced, tc.traced)
		}
	}
}
