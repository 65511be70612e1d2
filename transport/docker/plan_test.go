package docker

import (
	"errors"
	"slices"
	"testing"

	"github.com/docker/docker/api/types/mount"

	"github.com/paddockhq/paddock/transport"
	"github.com/paddockhq/paddock/transport/pathmap"
)

func testSpec(t *testing.T, cwd string) transport.Spec {
	t.Helper()
	pm, err := pathmap.New(pathmap.Mount{Sandbox: "/work", Host: "/home/u/proj"}, pathmap.Mount{Sandbox: "/data", Host: "/srv/data", ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	return transport.Spec{Session: "s/1", Kernel: "/cache/paddock-kernel", Args: []string{"-grace", "1s"}, Env: []string{"A=1"}, Cwd: cwd, PathMap: pm, Labels: map[string]string{"x": "y"}}
}

// The zero Hardening is the hardened default.
func TestPlanHardenedByDefault(t *testing.T) {
	p, err := planContainer(testSpec(t, "/work/sub"), "img", nil, Hardening{}, map[string]string{LabelPID: "7"}, "abcd")
	if err != nil {
		t.Fatal(err)
	}
	h, c := p.host, p.config
	if !slices.Equal(h.CapDrop, []string{"ALL"}) || len(h.CapAdd) != 0 {
		t.Errorf("capabilities: drop %v add %v", h.CapDrop, h.CapAdd)
	}
	if !slices.Contains(h.SecurityOpt, "no-new-privileges") {
		t.Errorf("security options %v", h.SecurityOpt)
	}
	if h.NetworkMode != "none" || !h.ReadonlyRootfs || h.Tmpfs["/tmp"] == "" {
		t.Errorf("network %q, read-only root %v, tmpfs %v", h.NetworkMode, h.ReadonlyRootfs, h.Tmpfs)
	}
	if h.PidsLimit == nil || *h.PidsLimit != DefaultPids || h.Memory != DefaultMemory || h.MemorySwap != DefaultMemory {
		t.Errorf("limits: pids %v memory %d swap %d", h.PidsLimit, h.Memory, h.MemorySwap)
	}
	if c.User != "" || c.WorkingDir != "/work/sub" || !slices.Equal(c.Entrypoint, []string{KernelPath}) || !slices.Equal(c.Cmd, []string{"-grace", "1s"}) {
		t.Errorf("config: user %q cwd %q entrypoint %v cmd %v", c.User, c.WorkingDir, c.Entrypoint, c.Cmd)
	}
	if !c.OpenStdin || !c.StdinOnce || c.Tty {
		t.Errorf("stdin open %v once %v tty %v", c.OpenStdin, c.StdinOnce, c.Tty)
	}
	if !slices.Equal(c.Env, []string{"A=1"}) {
		t.Errorf("env %v: the container's environment is the spec's alone", c.Env)
	}
	if c.Labels[LabelManaged] != "1" || c.Labels[LabelSession] != "s/1" || c.Labels[LabelPID] != "7" || c.Labels["x"] != "y" {
		t.Errorf("labels %v", c.Labels)
	}
	if p.name != "paddock-s_1-abcd" {
		t.Errorf("name %q", p.name)
	}
	want := []mount.Mount{
		{Type: mount.TypeBind, Source: "/cache/paddock-kernel", Target: KernelPath, ReadOnly: true},
		{Type: mount.TypeBind, Source: "/home/u/proj", Target: "/work"},
		{Type: mount.TypeBind, Source: "/srv/data", Target: "/data", ReadOnly: true},
	}
	if !slices.Equal(h.Mounts, want) {
		t.Errorf("mounts %v, want %v", h.Mounts, want)
	}
}

// Every default gives way to its setting.
func TestPlanSettings(t *testing.T) {
	h := Hardening{CapAdd: []string{"net_bind_service", "CAP_CHOWN"}, NewPrivileges: true, Network: "bridge",
		Pids: -1, Memory: -1, WritableRoot: true, NoTmpfs: true, User: "1000:1000"}
	p, err := planContainer(testSpec(t, "/work"), "img", nil, h, nil, "x")
	if err != nil {
		t.Fatal(err)
	}
	hc := p.host
	if !slices.Equal(hc.CapAdd, []string{"CAP_CHOWN", "CAP_NET_BIND_SERVICE"}) || len(hc.SecurityOpt) != 0 {
		t.Errorf("caps %v, security %v", hc.CapAdd, hc.SecurityOpt)
	}
	if hc.NetworkMode != "bridge" || hc.ReadonlyRootfs || hc.Tmpfs != nil || hc.PidsLimit != nil || hc.Memory != 0 || p.config.User != "1000:1000" {
		t.Errorf("network %q ro %v tmpfs %v pids %v memory %d user %q", hc.NetworkMode, hc.ReadonlyRootfs, hc.Tmpfs, hc.PidsLimit, hc.Memory, p.config.User)
	}
}

// The working directory must lie under a mount of the path map.
func TestPlanCwd(t *testing.T) {
	for _, cwd := range []string{"/work", "/work/a/b", "/data"} {
		if _, err := planContainer(testSpec(t, cwd), "img", nil, Hardening{}, nil, "x"); err != nil {
			t.Errorf("cwd %q: %v", cwd, err)
		}
	}
	for _, cwd := range []string{"/", "/workshop", "/tmp", "", "work", "~/work"} {
		_, err := planContainer(testSpec(t, cwd), "img", nil, Hardening{}, nil, "x")
		var oe *OutsideError
		if !errors.As(err, &oe) || oe.Code() != "outside" {
			t.Errorf("cwd %q: %v, want an outside refusal", cwd, err)
		}
	}
}

// Extra mounts come after the session's; one at a session mount's place is dropped.
func TestPlanExtraMounts(t *testing.T) {
	extra := []Mount{{Host: "/usr", Sandbox: "/usr", ReadOnly: true}, {Host: "/elsewhere", Sandbox: "/work", ReadOnly: true}}
	p, err := planContainer(testSpec(t, "/work"), "img", extra, Hardening{}, nil, "x")
	if err != nil {
		t.Fatal(err)
	}
	var targets []string
	for _, m := range p.host.Mounts {
		targets = append(targets, m.Target)
		if m.Target == "/work" && m.Source != "/home/u/proj" {
			t.Errorf("the session's /work was replaced by %s", m.Source)
		}
	}
	if !slices.Equal(targets, []string{KernelPath, "/work", "/data", "/usr"}) {
		t.Errorf("targets %v", targets)
	}
}

func TestLeftover(t *testing.T) {
	alive := map[int]string{10: "500"}
	o := Owner{Machine: "m", Boot: "b", PIDNS: "6", Alive: func(pid int, start string) bool {
		s, ok := alive[pid]
		return ok && (start == "" || s == start)
	}, Waiting: func(dir string) bool { return dir == "/state/s1/kernel" }}
	for _, tc := range []struct {
		labels map[string]string
		want   bool
	}{
		{map[string]string{LabelManaged: "1", LabelMachine: "m", LabelBoot: "b", LabelPID: "10", LabelStart: "500"}, false},
		{map[string]string{LabelManaged: "1", LabelMachine: "m", LabelBoot: "b", LabelPID: "11", LabelStart: "500"}, true},  // pid gone
		{map[string]string{LabelManaged: "1", LabelMachine: "m", LabelBoot: "b", LabelPID: "10", LabelStart: "499"}, true},  // pid reused
		{map[string]string{LabelManaged: "1", LabelMachine: "m", LabelBoot: "a", LabelPID: "10", LabelStart: "500"}, true},  // earlier boot
		{map[string]string{LabelManaged: "1", LabelMachine: "n", LabelBoot: "b", LabelPID: "11", LabelStart: "500"}, false}, // another machine
		{map[string]string{LabelMachine: "m", LabelBoot: "b", LabelPID: "11"}, false},                                       // not Paddock's
		{map[string]string{LabelManaged: "1", LabelMachine: "m", LabelBoot: "b"}, false},                                    // no pid: cannot judge
		{map[string]string{LabelManaged: "1", LabelMachine: "m", LabelBoot: "b", LabelPID: "x"}, false},
		// A listening kernel whose host died waits while its directory is there.
		{map[string]string{LabelManaged: "1", LabelMachine: "m", LabelBoot: "b", LabelPID: "11", LabelListen: "/state/s1/kernel"}, false},
		{map[string]string{LabelManaged: "1", LabelMachine: "m", LabelBoot: "b", LabelPID: "11", LabelListen: "/state/s2/kernel"}, true},
		{map[string]string{LabelManaged: "1", LabelMachine: "m", LabelBoot: "a", LabelPID: "11", LabelListen: "/state/s1/kernel"}, true},
		// A host in another container of this machine and boot (one hostname with the host's
		// network): its pid is not this pid namespace's, whatever runs here under it.
		{map[string]string{LabelManaged: "1", LabelMachine: "m", LabelBoot: "b", LabelPIDNS: "7", LabelPID: "11", LabelStart: "500"}, false},
		{map[string]string{LabelManaged: "1", LabelMachine: "m", LabelBoot: "b", LabelPIDNS: "7", LabelPID: "10", LabelStart: "499"}, false},
		{map[string]string{LabelManaged: "1", LabelMachine: "m", LabelBoot: "b", LabelPIDNS: "7", LabelPID: "11", LabelListen: "/state/s2/kernel"}, false},
		{map[string]string{LabelManaged: "1", LabelMachine: "m", LabelBoot: "b", LabelPIDNS: "6", LabelPID: "11", LabelStart: "500"}, true}, // this one's: pid gone
		{map[string]string{LabelManaged: "1", LabelMachine: "m", LabelBoot: "b", LabelPIDNS: "6", LabelPID: "10", LabelStart: "500"}, false},
		{map[string]string{LabelManaged: "1", LabelMachine: "m", LabelBoot: "a", LabelPIDNS: "7", LabelPID: "10"}, true}, // an earlier boot: every namespace of it is gone
	} {
		if got := Leftover(tc.labels, o); got != tc.want {
			t.Errorf("Leftover(%v) = %v, want %v", tc.labels, got, tc.want)
		}
	}
}

// Under the /tmp tmpfs the kernel process starts at /: the engine would make the tmpfs
// root's alone while it makes the working directory.
func TestPlanWorkingDirUnderTmp(t *testing.T) {
	pm, err := pathmap.New(pathmap.Mount{Sandbox: "/tmp/ws", Host: "/tmp/ws"})
	if err != nil {
		t.Fatal(err)
	}
	spec := transport.Spec{Kernel: "/k", Cwd: "/tmp/ws/sub", PathMap: pm}
	for _, tc := range []struct {
		h    Hardening
		want string
	}{{Hardening{}, "/"}, {Hardening{NoTmpfs: true}, "/tmp/ws/sub"}} {
		p, err := planContainer(spec, "img", nil, tc.h, nil, "x")
		if err != nil || p.config.WorkingDir != tc.want {
			t.Errorf("%+v: working dir %q, %v; want %q", tc.h, p.config.WorkingDir, err, tc.want)
		}
	}
}

// A listening kernel's container binds its directory, runs the kernel with -listen, takes
// no standard input, and carries the directory in a label.
func TestPlanListen(t *testing.T) {
	pm, err := pathmap.New(pathmap.Mount{Sandbox: "/ws", Host: "/h/ws"})
	if err != nil {
		t.Fatal(err)
	}
	spec := transport.Spec{Kernel: "/k", Cwd: "/ws", PathMap: pm, Listen: "/state/s1/kernel", Key: "k", Args: []string{"-grace", "1s"}}
	p, err := planContainer(spec, "img", nil, Hardening{}, nil, "x")
	if err != nil {
		t.Fatal(err)
	}
	want := append(transport.ListenArgs(spec), "-grace", "1s")
	if !slices.Equal(p.config.Cmd, want) || p.config.OpenStdin || p.config.AttachStdin || p.config.Labels[LabelListen] != spec.Listen {
		t.Errorf("config %+v", p.config)
	}
	found := false
	for _, m := range p.host.Mounts {
		found = found || (m.Source == spec.Listen && m.Target == transport.ListenDir && !m.ReadOnly)
	}
	if !found {
		t.Errorf("the listening directory is not bound: %+v", p.host.Mounts)
	}

	// Listening for this host only: the kernel ends with it (-once), and no label makes the
	// reaper spare its container after its host died.
	spec.Once = true
	p, err = planContainer(spec, "img", nil, Hardening{}, nil, "x")
	if err != nil {
		t.Fatal(err)
	}
	if want := append(transport.ListenArgs(spec), "-grace", "1s"); !slices.Equal(p.config.Cmd, want) || !slices.Contains(want, "-once") {
		t.Errorf("once: command %q", p.config.Cmd)
	}
	if _, ok := p.config.Labels[LabelListen]; ok {
		t.Errorf("once: labelled %s: the reaper would spare it", LabelListen)
	}
}

// A container kernel runs as the user the settings name; else as the workspace's owner
// when that is known and not root, so what the sandbox makes there is the owner's and no
// set-id file of root's can come of it; else as the image's user.
func TestSandboxUser(t *testing.T) {
	for _, tc := range []struct {
		named string
		owner WorkspaceOwner
		want  string
	}{
		{"", WorkspaceOwner{UID: 1000, GID: 1000, Known: true}, "1000:1000"},
		{"", WorkspaceOwner{UID: 1000, GID: 50, Known: true}, "1000:50"},
		{"", WorkspaceOwner{UID: 0, GID: 0, Known: true}, ""},
		{"", WorkspaceOwner{UID: 0, GID: 1000, Known: true}, ""},
		{"", WorkspaceOwner{}, ""},
		{"65534:65534", WorkspaceOwner{UID: 1000, GID: 1000, Known: true}, "65534:65534"},
		{"dev", WorkspaceOwner{UID: 1000, GID: 1000, Known: true}, "dev"},
		{"0", WorkspaceOwner{UID: 1000, GID: 1000, Known: true}, "0"},
	} {
		if got := SandboxUser(tc.named, tc.owner); got != tc.want {
			t.Errorf("SandboxUser(%q, %+v) = %q, want %q", tc.named, tc.owner, got, tc.want)
		}
	}
}
