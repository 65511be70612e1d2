package integration

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types"
	"github.com/docker/docker/client"

	"github.com/paddockhq/paddock/config"
	"github.com/paddockhq/paddock/orchestrator"
	"github.com/paddockhq/paddock/session"
	"github.com/paddockhq/paddock/transport/docker"
	"github.com/paddockhq/paddock/transport/environ"
	"github.com/paddockhq/paddock/transport/pathmap"
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
	RunConformance(t, func(t *testing.T) Env {
		ws := t.TempDir()
		pm, err := pathmap.New(pathmap.Mount{Sandbox: "/work", Host: ws})
		if err != nil {
			t.Fatal(err)
		}
		return Env{
			Transport:       &docker.Transport{Client: cli, Image: img, Mounts: hostMounts(), Stderr: testWriter{t}},
			Kernel:          kernel,
			KernelInSandbox: docker.KernelPath,
			Workspace:       ws,
			PathMap:         pm,
			Environ: func(host, names []string) []string {
				env, _ := environ.Sandbox(host, names, sandboxEnv, pm)
				return env
			},
			Leftovers: func(ctx context.Context, session string, _ []int) []string {
				ids, err := docker.SessionContainers(ctx, cli, session)
				if err != nil {
					return []string{err.Error()}
				}
				return ids
			},
		}
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
