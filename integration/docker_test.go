package integration

import (
	"context"
	"testing"

	"github.com/paddockhq/paddock/transport/docker"
	"github.com/paddockhq/paddock/transport/environ"
	"github.com/paddockhq/paddock/transport/pathmap"
)

// The conformance suite on the docker transport: a fresh hardened container of the host
// image per session, the workspace bound at /work.
func TestConformanceDocker(t *testing.T) {
	cli := engine(t)
	kernel := kernelBinary(t)
	img := hostImage(t, cli)
	RunConformance(t, func(t *testing.T) Env {
		ws := t.TempDir()
		pm, err := pathmap.New(pathmap.Mount{Sandbox: "/work", Host: ws})
		if err != nil {
			t.Fatal(err)
		}
		tr := &docker.Transport{Client: cli, Image: img, Mounts: hostMounts(), Stderr: testWriter{t}}
		return Env{
			Transport:       tr,
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

// testWriter sends a kernel's diagnostics to the test's log.
type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Logf("kernel: %s", p)
	return len(p), nil
}
