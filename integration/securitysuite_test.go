package integration

import (
	"context"
	"os"
	"slices"
	"strconv"
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
	RunSecurityOn(t, open, Security{Network: network, Iface: iface})
}

// Security is what the suite needs to know of a backend beyond its opener.
type Security struct {
	// Network is the network the Settings ask for; Iface the interface it must show.
	Network, Iface string
	// Pids is the process limit the Settings ask for; 0 is 77. Under gVisor the host's
	// limit counts gVisor's own threads too, so a backend there asks for more.
	Pids int64
	// Limits reads the process and memory limits the sandbox of s runs under, as enforced;
	// nil reads them as the sandbox's cgroup files show them (gVisor's cgroup file system
	// does not show the host's limits, so a backend there reads them on the host).
	Limits func(t *testing.T, ctx context.Context, s *orchestrator.Session) (pids, memory string)
}

// RunSecurityOn runs the security suite on a backend described by b.
func RunSecurityOn(t *testing.T, open SandboxOpener, b Security) {
	if b.Pids == 0 {
		b.Pids = 77
	}
	if b.Limits == nil {
		b.Limits = cgroupLimits
	}
	t.Run("HardenedByDefault", func(t *testing.T) { testHardenedByDefault(t, open, b) })
	t.Run("Settings", func(t *testing.T) { testHardeningSettings(t, open, b) })
}

// cgroupLimits are the process and memory limits the sandbox's cgroup files show (v2 or
// v1).
func cgroupLimits(t *testing.T, ctx context.Context, s *orchestrator.Session) (string, string) {
	res := bash(t, ctx, s, `sh -c 'cat /sys/fs/cgroup/pids.max /sys/fs/cgroup/pids/pids.max 2>/dev/null; true'`)
	pids := strings.TrimSpace(stdout(res))
	res = bash(t, ctx, s, `sh -c 'cat /sys/fs/cgroup/memory.max /sys/fs/cgroup/memory/memory.limit_in_bytes 2>/dev/null; true'`)
	return pids, strings.TrimSpace(stdout(res))
}

// interfaces are the network interfaces the sandbox's kernel lists (/proc/net/dev: Linux
// and gVisor alike show it; gVisor's /sys has no class/net).
func interfaces(t *testing.T, ctx context.Context, s *orchestrator.Session) []string {
	t.Helper()
	res := bash(t, ctx, s, `cat /proc/net/dev`)
	var out []string
	for _, line := range strings.Split(stdout(res), "\n") {
		if name, _, ok := strings.Cut(line, ":"); ok && !strings.Contains(name, "|") {
			out = append(out, strings.TrimSpace(name))
		}
	}
	if len(out) == 0 {
		t.Fatalf("no interface listed: %s", res)
	}
	return out
}

// prctl asks the kernel of the sandbox a prctl(2) question through python3's ctypes (the
// host image has the host's python3) and returns its answer and errno: what the kernel
// itself says, where gVisor's /proc/self/status leaves a field out.
func prctl(t *testing.T, ctx context.Context, s *orchestrator.Session, args string) string {
	t.Helper()
	res := bash(t, ctx, s, `python3 -c 'import ctypes; l=ctypes.CDLL(None, use_errno=True); r=l.prctl(`+args+`); print(r, ctypes.get_errno() if r < 0 else 0)'`)
	if res.End.Status != 0 {
		t.Fatalf("prctl(%s): %s", args, res)
	}
	return strings.TrimSpace(stdout(res))
}

// optionalField is a field of /proc/self/status, and whether the sandbox's kernel shows it.
func optionalField(t *testing.T, ctx context.Context, s *orchestrator.Session, field string) (string, bool) {
	t.Helper()
	res := bash(t, ctx, s, `sh -c 'grep "^`+field+`:" /proc/self/status'`)
	_, v, ok := strings.Cut(strings.TrimSpace(stdout(res)), ":")
	return strings.TrimSpace(v), ok
}

// A default sandbox is confined: no capability at all, no new privileges, a root
// filesystem and system directories it cannot write (and a /tmp it can), no network, no
// host process in sight, no credential in its environment, and its limits set.
func testHardenedByDefault(t *testing.T, open SandboxOpener, b Security) {
	ctx := testContext(t)
	secret := randomName("sekrit-")
	t.Setenv("GITHUB_TOKEN", secret)
	t.Setenv("AWS_SECRET_ACCESS_KEY", secret)
	t.Setenv("PADDOCK_PLAIN", "plain")
	s := open(t, ctx, docker.Hardening{}, []string{"GITHUB_TOKEN", "AWS_SECRET_ACCESS_KEY", "PADDOCK_PLAIN"})

	t.Run("NoCapabilities", func(t *testing.T) {
		for _, f := range []string{"CapEff", "CapPrm", "CapInh", "CapBnd"} {
			if v := statusField(t, ctx, s, f); strings.Trim(v, "0") != "" {
				t.Errorf("%s is %s, want none", f, v)
			}
		}
		// gVisor shows no CapAmb: its kernel is asked whether CAP_CHOWN is ambient
		// (PR_CAP_AMBIENT_IS_SET: 0, or EINVAL where ambient sets do not exist).
		if v, ok := optionalField(t, ctx, s, "CapAmb"); ok && strings.Trim(v, "0") != "" {
			t.Errorf("CapAmb is %s, want none", v)
		} else if !ok {
			if got := prctl(t, ctx, s, "47, 1, 0, 0, 0"); got != "0 0" && got != "-1 22" {
				t.Errorf("PR_CAP_AMBIENT_IS_SET CAP_CHOWN: %s, want 0 or EINVAL", got)
			}
		}
	})
	t.Run("NoNewPrivileges", func(t *testing.T) {
		if v, ok := optionalField(t, ctx, s, "NoNewPrivs"); ok && v != "1" {
			t.Errorf("NoNewPrivs is %s", v)
		}
		// PR_GET_NO_NEW_PRIVS: the kernel's own answer, gVisor's too.
		if got := prctl(t, ctx, s, "39, 0, 0, 0, 0"); got != "1 0" {
			t.Errorf("PR_GET_NO_NEW_PRIVS: %s, want 1", got)
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
		if out := interfaces(t, ctx, s); len(out) != 1 || out[0] != "lo" {
			t.Errorf("network interfaces %q, want lo alone", out)
		}
		res := bash(t, ctx, s, `bash -c 'exec 3<>/dev/tcp/1.1.1.1/53'`)
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
		pids, mem := b.Limits(t, ctx, s)
		if pids != "1024" {
			t.Errorf("pids.max %q, want 1024", pids)
		}
		if mem != "2147483648" {
			t.Errorf("memory limit %q, want 2147483648", mem)
		}
	})
}

// Each default gives way when asked: a network, a capability, a user, a process limit.
func testHardeningSettings(t *testing.T, open SandboxOpener, b Security) {
	ctx := testContext(t)
	s := open(t, ctx, docker.Hardening{Network: b.Network, CapAdd: []string{"chown"}, User: "65534:65534", Pids: b.Pids}, nil)
	if out := interfaces(t, ctx, s); !slices.Contains(out, b.Iface) {
		t.Errorf("asked for network %s, interfaces %q", b.Network, out)
	}
	// A non-root user holds no effective capability; the bounding set shows what is kept.
	if v := statusField(t, ctx, s, "CapBnd"); v != "0000000000000001" {
		t.Errorf("asked for CAP_CHOWN, CapBnd is %s", v)
	}
	res := bash(t, ctx, s, `id -u`)
	if out := strings.TrimSpace(stdout(res)); out != "65534" {
		t.Errorf("asked for user 65534, runs as %q", out)
	}
	if pids, _ := b.Limits(t, ctx, s); pids != strconv.FormatInt(b.Pids, 10) {
		t.Errorf("pids.max %q, want %d", pids, b.Pids)
	}
}
