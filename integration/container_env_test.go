package integration

import (
	"context"
	"testing"

	"github.com/paddockhq/paddock/transport"
	"github.com/paddockhq/paddock/transport/docker"
	"github.com/paddockhq/paddock/transport/environ"
	"github.com/paddockhq/paddock/transport/pathmap"
)

// containerConformance runs the conformance suite on a container transport: each session a
// fresh sandbox made by tr, the workspace bound at /work, and what is left of a session what
// the engine still lists of it (containers). hidesProcCwd as Env says (gVisor).
func containerConformance(t *testing.T, kernel string, hidesProcCwd bool, tr func(t *testing.T) transport.Transport, containers func(ctx context.Context, session string) ([]string, error)) {
	RunConformance(t, func(t *testing.T) Env {
		ws := t.TempDir()
		pm, err := pathmap.New(pathmap.Mount{Sandbox: "/work", Host: ws})
		if err != nil {
			t.Fatal(err)
		}
		e := containerEnv(tr(t), kernel, ws, pm, containers)
		e.HidesProcCwd = hidesProcCwd
		return e
	})
}

// containerEnv is the conformance Env of a container sandbox whose workspace ws the path map
// pm binds: the kernel at docker.KernelPath, the sandbox's environment, and what is left of a
// session what containers lists of it.
func containerEnv(tr transport.Transport, kernel, ws string, pm *pathmap.Map, containers func(ctx context.Context, session string) ([]string, error)) Env {
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
			ids, err := containers(ctx, session)
			if err != nil {
				return []string{err.Error()}
			}
			return ids
		},
	}
}
