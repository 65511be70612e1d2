package integration

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/paddockhq/paddock/orchestrator"
	"github.com/paddockhq/paddock/transport/docker"
)

// The in-container security checks as a suite every container backend runs unchanged: the
// same checks as the docker transport's own security tests, over a session opener of the
// backend under test.

// SandboxOpener opens a session in a sandbox confined by h, its workspace bound at /work,
// passing the host variables named; the session is closed at the test's end.
type SandboxOpener func(t *testing.T, ctx context.Context, h docker.Hardening, names []string) *orchestrator.Session

// RunSecurity runs the security suite: a default sandbox is confined (HardenedByDefault),
// and each default gives way when asked (Settings, asking for network, which must show the
// interface iface).
func RunSecurity(t *testing.T, open SandboxOpener, network, iface string) {
	t.Run("HardenedByDefault", func(t *testing.T) { testHardenedByDefault(t, open) })
	t.Run("Settings", func(t *testing.T) { testHardeningSettings(t, open, network, iface) })
}

// A default sandbox is confined: no capability at all, no new privileges, a root
// filesystem and system directories it cannot write (and a /tmp it can), no network, no
// host process in sight, no credential in its environment, and its limits set.
func testHardenedByDefault(t *testing.T, open SandboxOpener) {
	ctx := testContext(t)
	secret := randomName("sekrit-")
	t.Setenv("GITHUB_TOKEN", secret)
	t.Setenv("AWS_SECRET_ACCESS_KEY", secret)
	t.Setenv("PADDOCK_PLAIN", "plain")
	s := open(t, ctx, docker.Hardening{}, []string{"GITHUB_TOKEN", "AWS_SECRET_ACCESS_KEY", "PADDOCK_PLAIN"})

	t.Run("NoCapabilities", func(t *testing.T) {
		for _, f := range []string{"CapEff", "CapPrm", "CapInh", "CapBnd", "CapAmb"} {
			if v := statusField(t, ctx, s, f); strings.Trim(v, "0") != "" {
				t.Errorf("%s is %s, want none", f, v)
			}
		}
	})
	t.Run("NoNewPrivileges", func(t *testing.T) {
		if v := statusField(t, ctx, s, "NoNewPrivs"); v != "1" {
			t.Errorf("NoNewPrivs is %s", v)
		}
	})
	t.Run("SystemCallFilter", func(t *testing.T) {
		if v := statusField(t, ctx, s, "Seccomp"); v != "2" {
			t.Errorf("Seccomp is %s, want 2 (filtered)", v)
		}
	})
	t.Run("ReadOnlyRoot", func(t *testing.T) {
		for _, p := range []string{"/paddock-root-write", "/usr/paddock-write", "/etc/paddock-write", "/.paddock/x"} {
			res := bash(t, ctx, s, `sh -c 'echo x > `+p+`'`)
			if res.End.Status == 0 {
				t.Errorf("wrote %s", p)
			}
		}
		if res := bash(t, ctx, s, `sh -c 'echo x > /tmp/ok && cat /tmp/ok'`); stdout(res) != "x\n" {
			t.Errorf("/tmp is not writable: %s", res)
		}
	})
	t.Run("NoNetwork", func(t *testing.T) {
		res := bash(t, ctx, s, `ls /sys/class/net`)
		if out := strings.Fields(stdout(res)); len(out) != 1 || out[0] != "lo" {
			t.Errorf("network interfaces %q, want lo alone", out)
		}
		res = bash(t, ctx, s, `bash -c 'exec 3<>/dev/tcp/1.1.1.1/53'`)
		if res.End.Status == 0 {
			t.Errorf("a TCP connection out succeeded")
		}
	})
	t.Run("NoHostProcesses", func(t *testing.T) {
		res := bash(t, ctx, s, `sh -c 'for p in /proc/[0-9]*; do tr "\0" " " < $p/cmdline; echo; done'`)
		out := stdout(res)
		if strings.Contains(out, os.Args[0]) || strings.Contains(out, "dockerd") || strings.Contains(out, "containerd") {
			t.Errorf("host processes are seen:\n%s", out)
		}
		if !strings.Contains(out, docker.KernelPath) {
			t.Errorf("the sandbox's own processes are not seen:\n%s", res)
		}
	})
	t.Run("NoCredentials", func(t *testing.T) {
		res := bash(t, ctx, s, `sh -c 'env; tr "\0" "\n" < /proc/1/environ'`)
		out := stdout(res)
		if strings.Contains(out, secret) || strings.Contains(out, "GITHUB_TOKEN") || strings.Contains(out, "AWS_SECRET") {
			t.Errorf("a credential reached the sandbox:\n%s", out)
		}
		if !strings.Contains(out, "PADDOCK_PLAIN=plain") {
			t.Errorf("a named plain variable did not pass:\n%s", out)
		}
	})
	t.Run("Limits", func(t *testing.T) {
		res := bash(t, ctx, s, `sh -c 'cat /sys/fs/cgroup/pids.max /sys/fs/cgroup/pids/pids.max 2>/dev/null; true'`)
		if got := strings.TrimSpace(stdout(res)); got != "1024" {
			t.Errorf("pids.max %q, want 1024", got)
		}
		res = bash(t, ctx, s, `sh -c 'cat /sys/fs/cgroup/memory.max /sys/fs/cgroup/memory/memory.limit_in_bytes 2>/dev/null; true'`)
		if got := strings.TrimSpace(stdout(res)); got != "2147483648" {
			t.Errorf("memory limit %q, want 2147483648", got)
		}
	})
}

// Each default gives way when asked: a network, a capability, a user, a process limit.
func testHardeningSettings(t *testing.T, open SandboxOpener, network, iface string) {
	ctx := testContext(t)
	s := open(t, ctx, docker.Hardening{Network: network, CapAdd: []string{"chown"}, User: "65534:65534", Pids: 77}, nil)
	res := bash(t, ctx, s, `ls /sys/class/net`)
	if out := stdout(res); !strings.Contains(out, iface) {
		t.Errorf("asked for network %s, interfaces %q", network, out)
	}
	// A non-root user holds no effective capability; the bounding set shows what is kept.
	if v := statusField(t, ctx, s, "CapBnd"); v != "0000000000000001" {
		t.Errorf("asked for CAP_CHOWN, CapBnd is %s", v)
	}
	res = bash(t, ctx, s, `id -u`)
	if out := strings.TrimSpace(stdout(res)); out != "65534" {
		t.Errorf("asked for user 65534, runs as %q", out)
	}
	res = bash(t, ctx, s, `sh -c 'cat /sys/fs/cgroup/pids.max /sys/fs/cgroup/pids/pids.max 2>/dev/null; true'`)
	if got := strings.TrimSpace(stdout(res)); got != "77" {
		t.Errorf("pids.max %q, want 77", got)
	}
}
