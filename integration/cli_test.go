package integration

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/client"

	"github.com/paddockhq/paddock/images"
	"github.com/paddockhq/paddock/internal/peer"
	"github.com/paddockhq/paddock/transport/docker"
)

var (
	binOnce sync.Once
	binDir  string
	binErr  error
)

// paddockBinary builds the CLI with the kernel beside it, once for the test binary; TestMain
// removes it.
func paddockBinary(t testing.TB) string {
	t.Helper()
	binOnce.Do(func() {
		if binDir, binErr = os.MkdirTemp("", "paddock-cli-test-"); binErr != nil {
			return
		}
		// The CLI is built as this test binary is (with -race when it is), the kernel as
		// the images build it: a cold run compiles no package graph for them alone.
		root := repoRoot(t)
		if binErr = peer.Build(root, "./cmd/paddock", filepath.Join(binDir, "paddock")); binErr != nil {
			return
		}
		binErr = peer.BuildStatic(root, "./cmd/paddock-kernel", filepath.Join(binDir, "paddock-kernel"))
	})
	if binErr != nil {
		t.Fatal(binErr)
	}
	return filepath.Join(binDir, "paddock")
}

// runPaddock runs the CLI in dir with env added to a clean settings home. The bound is a
// guard against a hang, not a measure: long scripts (450 host requests, each a judged
// program and a judged redirection) under the whole suite's load with -race need minutes.
func runPaddock(t *testing.T, bin, dir string, env []string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "XDG_CONFIG_HOME="+t.TempDir()) // no global settings unless env names some
	cmd.Env = append(cmd.Env, env...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	code = cmd.ProcessState.ExitCode()
	if err != nil && code < 0 {
		t.Fatalf("paddock %v: %v", args, err)
	}
	return out.String(), errOut.String(), code
}

// paddock run takes the docker transport when an engine answers (the host image, the
// workspace at its own path), and the local one with a one-line notice when none does.
func TestRunDefaultTransport(t *testing.T) {
	cli := engine(t)
	bin := paddockBinary(t)
	ws := t.TempDir()
	os.WriteFile(filepath.Join(ws, "a.txt"), []byte("alpha\n"), 0o644)
	// paddock run makes the host image when the engine lacks it; the test removes what it made.
	if _, err := cli.ImageInspect(context.Background(), images.HostRef); cerrdefs.IsNotFound(err) {
		t.Cleanup(func() { images.Remove(context.Background(), cli, images.HostRef) })
	}

	out, errOut, code := runPaddock(t, bin, ws, nil, "run", "--", "cat a.txt; pwd; cat /proc/1/cmdline")
	if code != 0 || errOut != "" {
		t.Fatalf("paddock run: status %d, stderr %q", code, errOut)
	}
	if !strings.HasPrefix(out, "alpha\n"+ws+"\n") || !strings.Contains(out, docker.KernelPath) {
		t.Errorf("paddock run did not run in a container with the workspace at its own path:\n%s", out)
	}
	// The host image's usual tool directories are on the sandbox's PATH.
	if _, err := os.Stat("/usr/local/go/bin/go"); err == nil {
		out, errOut, code := runPaddock(t, bin, ws, nil, "run", "--", `sh -c 'command -v go'`)
		if code != 0 || out != "/usr/local/go/bin/go\n" {
			t.Errorf("go in the sandbox: status %d, %q %q", code, out, errOut)
		}
	}
	// The session's container went with it.
	if left := leftContainers(t, cli); len(left) != 0 {
		t.Errorf("containers left by paddock run: %v", left)
	}

	out, errOut, code = runPaddock(t, bin, ws, []string{"DOCKER_HOST=unix:///paddock-no-engine.sock"}, "run", "--", "cat a.txt")
	if code != 0 || out != "alpha\n" {
		t.Fatalf("without an engine: status %d, out %q, err %q", code, out, errOut)
	}
	if lines := strings.Split(strings.TrimSpace(errOut), "\n"); len(lines) != 1 || !strings.Contains(lines[0], "no Docker engine reachable") || !strings.Contains(lines[0], "locally") {
		t.Errorf("without an engine the notice is %q, want one line saying why the kernel runs locally", errOut)
	}
	out, _, code = runPaddock(t, bin, ws, []string{"DOCKER_HOST=unix:///paddock-no-engine.sock"}, "doctor")
	if code != 0 || !strings.Contains(out, "fix  docker") || !strings.Contains(out, "ok   kernel") {
		t.Errorf("doctor without an engine (status %d):\n%s", code, out)
	}
	out, _, _ = runPaddock(t, bin, ws, nil, "doctor")
	if !strings.Contains(out, "ok   docker") {
		t.Errorf("doctor with an engine:\n%s", out)
	}

	// Flags reach the container: a network, a user; a bad value is a usage error.
	out, errOut, code = runPaddock(t, bin, ws, nil, "run", "--network", "bridge", "--user", "65534:65534", "--", "id -u; ls /sys/class/net")
	if code != 0 || !strings.HasPrefix(out, "65534\n") || !strings.Contains(out, "eth0") {
		t.Errorf("--network bridge --user 65534: status %d, out %q, err %q", code, out, errOut)
	}
	// The same from the global settings file, and a flag over a setting.
	conf := t.TempDir()
	os.MkdirAll(filepath.Join(conf, "paddock"), 0o700)
	os.WriteFile(filepath.Join(conf, "paddock", "settings.yaml"), []byte("kernelTransport:\n  docker:\n    network: bridge\n    user: \"65534:65534\"\n    pids: 77\n"), 0o600)
	out, errOut, code = runPaddock(t, bin, ws, []string{"XDG_CONFIG_HOME=" + conf}, "run", "--user", "1234", "--", "id -u; ls /sys/class/net; cat /sys/fs/cgroup/pids.max /sys/fs/cgroup/pids/pids.max")
	if code == 126 || !strings.HasPrefix(out, "1234\n") || !strings.Contains(out, "eth0") || !strings.Contains(out, "\n77\n") {
		t.Errorf("settings network bridge, pids 77, user overridden by --user 1234: status %d, out %q, err %q", code, out, errOut)
	}
	if _, _, code = runPaddock(t, bin, ws, nil, "run", "--memory", "lots", "--", "true"); code != 2 {
		t.Errorf("--memory lots: status %d, want 2", code)
	}
	if _, _, code = runPaddock(t, bin, ws, nil, "run", "--transport", "nowhere", "--", "true"); code != 2 {
		t.Errorf("--transport nowhere: status %d, want 2", code)
	}
	if _, _, code = runPaddock(t, bin, ws, nil, "doctor", "extra"); code != 2 {
		t.Errorf("doctor extra: status %d, want 2", code)
	}
}

// paddock run --transport wrapped runs the kernel through the wrapper, in the sandbox path of
// the workspace.
func TestRunWrapped(t *testing.T) {
	cli := engine(t)
	bin := paddockBinary(t)
	img := hostImage(t, cli)
	ws := t.TempDir()
	os.WriteFile(filepath.Join(ws, "a.txt"), []byte("alpha\n"), 0o644)
	box := longLived(t, cli, img, kernelBinary(t), ws)
	out, errOut, code := runPaddock(t, bin, ws, nil, "run", "--transport", "wrapped", "--wrap", "docker exec -i "+box,
		"--kernel-path", docker.KernelPath, "--mount", ws+":/work", "--", "pwd; cat a.txt")
	if code != 0 || out != "/work\nalpha\n" {
		t.Errorf("wrapped: status %d, out %q, err %q", code, out, errOut)
	}
	if _, _, code := runPaddock(t, bin, ws, nil, "run", "--transport", "wrapped", "--", "true"); code != 2 {
		t.Errorf("wrapped without a wrapper: status %d, want 2", code)
	}
}

// leftContainers lists Paddock's containers whose host process has ended: what a paddock
// command left behind.
func leftContainers(t *testing.T, cli *client.Client) []string {
	t.Helper()
	list, err := cli.ContainerList(context.Background(), container.ListOptions{All: true, Filters: filters.NewArgs(filters.Arg("label", docker.LabelManaged+"=1"))})
	if err != nil {
		t.Fatal(err)
	}
	var left []string
	for _, c := range list {
		pid := c.Labels[docker.LabelPID]
		if pid == "" {
			continue
		}
		if _, err := os.Stat("/proc/" + pid); err != nil {
			left = append(left, c.Names...)
		}
	}
	return left
}
