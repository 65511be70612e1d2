package integration

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/docker/docker/client"

	"github.com/paddockhq/paddock/orchestrator"
	"github.com/paddockhq/paddock/transport/docker"
	"github.com/paddockhq/paddock/transport/environ"
	"github.com/paddockhq/paddock/transport/pathmap"
)

// dockerSession opens a session in a container of img with hardening h, its workspace bound
// at /work, passing the host variables named.
func dockerSession(t *testing.T, ctx context.Context, cli *client.Client, img string, h docker.Hardening, names []string) (*orchestrator.Session, string) {
	t.Helper()
	ws := t.TempDir()
	pm, err := pathmap.New(pathmap.Mount{Sandbox: "/work", Host: ws})
	if err != nil {
		t.Fatal(err)
	}
	env, _ := environ.Sandbox(os.Environ(), names, sandboxEnv, pm)
	s, err := orchestrator.Open(ctx, orchestrator.Config{
		Workspace: ws,
		Transport: &docker.Transport{Client: cli, Image: img, Mounts: hostMounts(), Hardening: h, Stderr: testWriter{t}},
		Kernel:    kernelBinary(t),
		Env:       env,
		PathMap:   pm,
		Ephemeral: true, // a fresh container, removed at the end
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, ws
}

// statusField returns a field of /proc/self/status as the sandbox's shell sees it.
func statusField(t *testing.T, ctx context.Context, s *orchestrator.Session, field string) string {
	t.Helper()
	res := bash(t, ctx, s, `sh -c 'grep "^`+field+`:" /proc/self/status'`)
	out := strings.TrimSpace(stdout(res))
	_, v, ok := strings.Cut(out, ":")
	if !ok {
		t.Fatalf("/proc/self/status has no %s: %s", field, res)
	}
	return strings.TrimSpace(v)
}

// The docker transport's security tests are the shared suite (security.go, RunSecurity) run
// on docker by TestSecurityDocker: one list of checks for every container backend.
