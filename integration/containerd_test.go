package integration

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	cdclient "github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/pkg/namespaces"

	"github.com/paddockhq/paddock/images"
	"github.com/paddockhq/paddock/internal/await"
	"github.com/paddockhq/paddock/orchestrator"
	"github.com/paddockhq/paddock/transport"
	"github.com/paddockhq/paddock/transport/containerd"
	"github.com/paddockhq/paddock/transport/docker"
	"github.com/paddockhq/paddock/transport/environ"
	"github.com/paddockhq/paddock/transport/pathmap"
)

// containerdDaemon returns a client of a containerd: the one named by
// PADDOCK_CONTAINERD_ADDRESS, else the machine's own or the Docker engine's, else one the
// test starts itself from Debian's containerd package with its own state directory and
// socket, stopped at the test's end. Without any, it skips.
func containerdDaemon(t testing.TB) *cdclient.Client {
	c, _ := containerdAt(t)
	return c
}

// containerdAt is containerdDaemon, with the daemon's address.
func containerdAt(t testing.TB) (*cdclient.Client, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	addrs := containerd.Sockets
	if a := os.Getenv("PADDOCK_CONTAINERD_ADDRESS"); a != "" {
		addrs = []string{a}
	}
	var err error
	for _, a := range addrs {
		if _, err = os.Stat(a); err != nil {
			continue
		}
		var c *cdclient.Client
		if c, err = containerd.Connect(ctx, a); err == nil {
			t.Cleanup(func() { c.Close() })
			return c, a
		}
	}
	bin, lerr := exec.LookPath("containerd")
	if lerr != nil || os.Geteuid() != 0 {
		needPeer(t, "no containerd answers (%v), and none can be started here (containerd on PATH: %v; root: %v)", err, lerr == nil, os.Geteuid() == 0)
	}
	return startContainerd(t, bin)
}

// startContainerd starts a containerd of the test's own and waits until it serves.
func startContainerd(t testing.TB, bin string) (*cdclient.Client, string) {
	t.Helper()
	dir, err := os.MkdirTemp("/var/tmp", "paddock-containerd-")
	if err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "containerd.sock")
	conf := filepath.Join(dir, "config.toml")
	if err := os.WriteFile(conf, []byte("version = 2\ndisabled_plugins = [\"io.containerd.grpc.v1.cri\"]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "--config", conf, "--root", filepath.Join(dir, "root"), "--state", filepath.Join(dir, "state"), "--address", sock)
	cmd.Stdout, cmd.Stderr = nil, nil
	if err := cmd.Start(); err != nil {
		needPeer(t, "start containerd: %v", err)
	}
	t.Cleanup(func() {
		cmd.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-done
		}
		exec.Command("umount", "-R", filepath.Join(dir, "state")).Run()
		os.RemoveAll(dir)
	})
	// It serves once its socket accepts: containerd chmods the socket once it listens, a
	// change in the socket's directory.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := await.Socket(ctx, sock); err != nil {
		needPeer(t, "the containerd started does not listen: %v", err)
	}
	c, err := containerd.Connect(ctx, sock)
	if err != nil {
		needPeer(t, "the containerd started does not serve: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c, sock
}

// containerdHostImage makes a host image of the test's own in containerd, removed at its end.
func containerdHostImage(t testing.TB, c *cdclient.Client) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ref := randomName("paddock-host-test-") + ":1"
	t.Cleanup(func() { images.RemoveContainerd(context.Background(), c, containerd.Namespace, ref) })
	if _, err := images.ContainerdHost(ctx, c, containerd.Namespace, "", ref, testLabels); err != nil {
		t.Fatal(err)
	}
	return ref
}

// containerdTransport is a containerd transport of the host image, hardened by h.
func containerdTransport(t testing.TB, c *cdclient.Client, img string, h docker.Hardening) *containerd.Transport {
	return &containerd.Transport{Client: c, Image: img, Mounts: hostMounts(), Hardening: h, Stderr: testWriter{t}}
}

// The conformance suite on the containerd transport: a fresh hardened container of the host
// image per session, the workspace bound at /work.
func TestConformanceContainerd(t *testing.T) {
	c := containerdDaemon(t)
	kernel := kernelBinary(t)
	img := containerdHostImage(t, c)
	containerConformance(t, kernel, false, func(t *testing.T) transport.Transport {
		return containerdTransport(t, c, img, docker.Hardening{})
	}, func(ctx context.Context, session string) ([]string, error) {
		return containerd.SessionContainers(ctx, c, session)
	})
}

// An image the Docker engine holds reaches containerd's store without a registry, and a
// kernel runs in it.
func TestContainerdImageFromDocker(t *testing.T) {
	cli := engine(t)
	c := containerdDaemon(t)
	img := hostImage(t, cli)
	ctx := testContext(t)
	t.Cleanup(func() { images.RemoveContainerd(context.Background(), c, containerd.Namespace, img) })
	if _, err := images.ContainerdFromDocker(ctx, cli, c, containerd.Namespace, "", img, testLabels); err != nil {
		t.Fatal(err)
	}
	got, err := c.GetImage(containerdNS(ctx), img)
	if err != nil {
		t.Fatal(err)
	}
	if got.Labels()[images.LabelManaged] != "1" {
		t.Fatalf("the loaded image's labels: %v", got.Labels())
	}
	s, _ := transportSession(t, ctx, containerdTransport(t, c, img, docker.Hardening{}), nil)
	if h, err := s.Ping(ctx); err != nil || h.OS != "linux" {
		t.Fatalf("a kernel in the loaded image: %+v, %v", h, err)
	}
	if out := stdout(bash(t, ctx, s, `ls /usr/bin/env`)); out != "/usr/bin/env\n" {
		t.Fatalf("the host's system directories are not seen: %q", out)
	}
}

func containerdNS(ctx context.Context) context.Context {
	return namespaces.WithNamespace(ctx, containerd.Namespace)
}

// transportSession opens a session on tr, its workspace bound at /work, passing the host
// variables named; it is closed at the test's end.
func transportSession(t testing.TB, ctx context.Context, tr transport.Transport, names []string) (*orchestrator.Session, string) {
	t.Helper()
	ws := t.TempDir()
	pm, err := pathmap.New(pathmap.Mount{Sandbox: "/work", Host: ws})
	if err != nil {
		t.Fatal(err)
	}
	env, _ := environ.Sandbox(os.Environ(), names, sandboxEnv, pm)
	s, err := orchestrator.Open(ctx, orchestrator.Config{Workspace: ws, Transport: tr, Kernel: kernelBinary(t), Env: env, PathMap: pm, Ephemeral: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, ws
}

// The in-container security suite on containerd. Another network than none or host needs
// CNI, so the settings ask for the host's network.
func TestSecurityContainerd(t *testing.T) {
	c := containerdDaemon(t)
	img := containerdHostImage(t, c)
	RunSecurity(t, func(t *testing.T, ctx context.Context, h docker.Hardening, names []string) *orchestrator.Session {
		s, _ := transportSession(t, ctx, containerdTransport(t, c, img, h), names)
		return s
	}, "host", "eth0")
}

// The same suite on docker, so both backends are held to one list.
func TestSecurityDocker(t *testing.T) {
	cli := engine(t)
	img := hostImage(t, cli)
	RunSecurity(t, func(t *testing.T, ctx context.Context, h docker.Hardening, names []string) *orchestrator.Session {
		s, _ := dockerSession(t, ctx, cli, img, h, names)
		return s
	}, "bridge", "eth0")
}
