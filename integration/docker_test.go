package integration

import (
	"context"
	"os/exec"
	"testing"
	"time"

	"github.com/paddockhq/paddock/transport"
	"github.com/paddockhq/paddock/transport/docker"
	"github.com/paddockhq/paddock/transport/pathmap"
)

// The conformance suite on the docker transport: a fresh hardened container of the host
// image per session, the workspace bound at /work.
func TestConformanceDocker(t *testing.T) {
	cli := engine(t)
	kernel := kernelBinary(t)
	img := hostImage(t, cli)
	containerConformance(t, kernel, false, func(t *testing.T) transport.Transport {
		return &docker.Transport{Client: cli, Image: img, Mounts: hostMounts(), Stderr: testWriter{t}}
	}, func(ctx context.Context, session string) ([]string, error) {
		return docker.SessionContainers(ctx, cli, session)
	})
}

// testWriter sends a kernel's diagnostics to the test's log.
type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Logf("kernel: %s", p)
	return len(p), nil
}

// A kernel that ignores the end of its input is killed after the grace, and its container
// removed all the same: ending a session leaves no container.
func TestDockerKillRemovesStuckContainer(t *testing.T) {
	cli := engine(t)
	img := hostImage(t, cli)
	ctx := testContext(t)
	ws := t.TempDir()
	pm, err := pathmap.New(pathmap.Mount{Sandbox: "/work", Host: ws})
	if err != nil {
		t.Fatal(err)
	}
	session := randomName("stuck-")
	t.Cleanup(func() { removeSession(cli, session) })
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		t.Fatalf("no sleep program to play a stuck kernel: %v", err)
	}
	tr := &docker.Transport{Client: cli, Image: img, Mounts: hostMounts(), NoReap: true}
	// sleep in the kernel's place: it never reads its input.
	k, err := tr.Start(ctx, transport.Spec{Session: session, Kernel: sleep, Args: []string{"1000"}, Cwd: "/work", PathMap: pm, Env: sandboxEnv})
	if err != nil {
		t.Fatal(err)
	}
	if ids, err := docker.SessionContainers(ctx, cli, session); err != nil || len(ids) != 1 {
		t.Fatalf("containers of the session: %v, %v", ids, err)
	}
	start := time.Now()
	k.Kill()
	if d := time.Since(start); d < docker.Grace {
		t.Errorf("Kill returned after %v, before the grace: the stuck kernel cannot have ended by itself", d)
	}
	if err := k.Wait(); err == nil {
		t.Errorf("a killed kernel's Wait returned no error")
	}
	if ids, err := docker.SessionContainers(ctx, cli, session); err != nil || len(ids) != 0 {
		t.Fatalf("after Kill the session has containers %v, %v", ids, err)
	}
}
