package integration

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/client"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/mount"
	"github.com/testcontainers/testcontainers-go"

	"github.com/paddockhq/paddock/transport/docker"
	"github.com/paddockhq/paddock/transport/pathmap"
	"github.com/paddockhq/paddock/transport/wrapped"
)

// The conformance suite on the wrapped transport: `docker exec -i BOX` into a long-lived
// container that holds the kernel and sees the workspace at /work.
func TestConformanceWrapped(t *testing.T) {
	cli := engine(t)
	if _, err := exec.LookPath("docker"); err != nil {
		needPeer(t, "no docker command for the wrapper: %v", err)
	}
	kernel := kernelBinary(t)
	img := hostImage(t, cli)
	RunConformance(t, func(t *testing.T) Env {
		ws := t.TempDir()
		pm, err := pathmap.New(pathmap.Mount{Sandbox: "/work", Host: ws})
		if err != nil {
			t.Fatal(err)
		}
		box := longLived(t, cli, img, kernel, ws)
		e := containerEnv(&wrapped.Transport{ArgvPrefix: []string{"docker", "exec", "-i", box}, KernelPath: docker.KernelPath, Stderr: testWriter{t}},
			kernel, ws, pm, nil)
		e.Leftovers = func(ctx context.Context, _ string, pids []int) []string { return boxProcesses(ctx, box, pids) }
		return e
	})
}

// longLived starts a container that runs until the test ends: the host image, its system
// mounts, the kernel at docker.KernelPath and ws at /work, with an init that reaps orphans.
func longLived(t testing.TB, _ *client.Client, img, kernel, ws string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	mounts := []mount.Mount{
		{Type: mount.TypeBind, Source: kernel, Target: docker.KernelPath, ReadOnly: true},
		{Type: mount.TypeBind, Source: ws, Target: "/work"},
	}
	for _, m := range hostMounts() {
		if m.Sandbox == "/sbin" {
			continue // the engine puts its init at /sbin/docker-init
		}
		mounts = append(mounts, mount.Mount{Type: mount.TypeBind, Source: m.Host, Target: m.Sandbox, ReadOnly: true})
	}
	c := runContainer(t, ctx, img, testcontainers.WithCmd("sleep", "infinity"), testcontainers.WithName(randomName("paddock-box-")),
		testcontainers.WithTmpfs(map[string]string{"/tmp": ""}),
		testcontainers.WithConfigModifier(func(cfg *container.Config) { cfg.Env, cfg.WorkingDir = sandboxEnv, "/work" }),
		testcontainers.WithHostConfigModifier(func(hc *container.HostConfig) {
			init := true
			hc.Mounts, hc.Init = mounts, &init
		}))
	return c.GetContainerID()
}

// boxProcesses returns those of pids that still run in the container.
func boxProcesses(ctx context.Context, box string, pids []int) []string {
	var script strings.Builder
	for _, p := range pids {
		fmt.Fprintf(&script, "kill -0 %d 2>/dev/null && echo process %d; ", p, p)
	}
	script.WriteString("true")
	out, err := exec.CommandContext(ctx, "docker", "exec", box, "sh", "-c", script.String()).CombinedOutput()
	if err != nil {
		return []string{fmt.Sprintf("docker exec: %v: %s", err, out)}
	}
	var left []string
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if l != "" {
			left = append(left, l)
		}
	}
	return left
}
