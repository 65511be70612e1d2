package containerd

import (
	"errors"
	"slices"
	"strings"
	"testing"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/paddockhq/paddock/transport"
	"github.com/paddockhq/paddock/transport/docker"
	"github.com/paddockhq/paddock/transport/pathmap"
)

func testSpec(t *testing.T, mounts ...pathmap.Mount) transport.Spec {
	t.Helper()
	if len(mounts) == 0 {
		mounts = []pathmap.Mount{{Sandbox: "/work", Host: "/srv/ws"}}
	}
	pm, err := pathmap.New(mounts...)
	if err != nil {
		t.Fatal(err)
	}
	return transport.Spec{Session: "s1", Kernel: "/k/paddock-kernel", Args: []string{"-grace", "1s"},
		Env: []string{"PATH=/bin", "X=1"}, Cwd: "/work", PathMap: pm, Labels: map[string]string{"team": "x"}}
}

func mount(s *specs.Spec, dest string) (specs.Mount, int) {
	for i, m := range s.Mounts {
		if m.Destination == dest {
			return m, i
		}
	}
	return specs.Mount{}, -1
}

// The default container is confined as the docker transport's: the kernel as the process
// with the session's environment and directory, no capability, no new privileges, a
// read-only root, the kernel read-only, a /tmp, its own pid, ipc, uts, mount and network
// namespaces, the default limits and the system-call filter.
func TestPlanHardenedByDefault(t *testing.T) {
	p, err := planContainer(testSpec(t), Namespace, nil, docker.Hardening{}, Facts{Seccomp: true}, map[string]string{docker.LabelPID: "7"}, "abcd")
	if err != nil {
		t.Fatal(err)
	}
	s := p.spec
	if want := []string{docker.KernelPath, "-grace", "1s"}; !slices.Equal(s.Process.Args, want) {
		t.Errorf("args %q, want %q", s.Process.Args, want)
	}
	if !slices.Equal(s.Process.Env, []string{"PATH=/bin", "X=1"}) || s.Process.Cwd != "/work" {
		t.Errorf("env %q, cwd %q", s.Process.Env, s.Process.Cwd)
	}
	c := s.Process.Capabilities
	for _, set := range [][]string{c.Bounding, c.Effective, c.Permitted, c.Inheritable, c.Ambient} {
		if len(set) != 0 {
			t.Errorf("capabilities %+v, want none", c)
		}
	}
	if !s.Process.NoNewPrivileges || !s.Root.Readonly {
		t.Errorf("no-new-privileges %v, read-only root %v", s.Process.NoNewPrivileges, s.Root.Readonly)
	}
	if s.Process.User.UID != 0 || s.Process.User.GID != 0 {
		t.Errorf("user %+v, want the empty image's root", s.Process.User)
	}
	if m, _ := mount(s, docker.KernelPath); m.Source != "/k/paddock-kernel" || !slices.Contains(m.Options, "ro") {
		t.Errorf("the kernel's mount: %+v", m)
	}
	if m, _ := mount(s, "/work"); m.Source != "/srv/ws" || !slices.Contains(m.Options, "rw") {
		t.Errorf("the workspace's mount: %+v", m)
	}
	if m, _ := mount(s, "/tmp"); m.Type != "tmpfs" {
		t.Errorf("/tmp: %+v", m)
	}
	var ns []specs.LinuxNamespaceType
	for _, n := range s.Linux.Namespaces {
		ns = append(ns, n.Type)
	}
	for _, want := range []specs.LinuxNamespaceType{specs.PIDNamespace, specs.IPCNamespace, specs.UTSNamespace, specs.MountNamespace, specs.NetworkNamespace} {
		if !slices.Contains(ns, want) {
			t.Errorf("namespaces %v lack %s", ns, want)
		}
	}
	r := s.Linux.Resources
	if r.Pids == nil || *r.Pids.Limit != docker.DefaultPids || r.Memory == nil || *r.Memory.Limit != docker.DefaultMemory || *r.Memory.Swap != docker.DefaultMemory {
		t.Errorf("limits %+v", r)
	}
	if s.Linux.Seccomp == nil || s.Linux.Seccomp.DefaultAction == specs.ActAllow {
		t.Errorf("no system-call filter: %+v", s.Linux.Seccomp)
	}
	if p.labels[docker.LabelManaged] != "1" || p.labels[docker.LabelSession] != "s1" || p.labels[docker.LabelPID] != "7" || p.labels["team"] != "x" {
		t.Errorf("labels %v", p.labels)
	}
	if !strings.HasPrefix(p.id, "paddock-s1-") || !strings.HasPrefix(s.Linux.CgroupsPath, "/"+Namespace+"/") {
		t.Errorf("id %s, cgroup %s", p.id, s.Linux.CgroupsPath)
	}
}

// Each default gives way when asked.
func TestPlanSettings(t *testing.T) {
	h := docker.Hardening{CapAdd: []string{"chown", "CAP_NET_RAW", "chown"}, NewPrivileges: true, Network: "host",
		Pids: -1, Memory: -1, WritableRoot: true, NoTmpfs: true, User: "65534:100"}
	p, err := planContainer(testSpec(t), Namespace, nil, h, Facts{Cgroup2: true}, nil, "abcd")
	if err != nil {
		t.Fatal(err)
	}
	s := p.spec
	if want := []string{"CAP_CHOWN", "CAP_NET_RAW"}; !slices.Equal(s.Process.Capabilities.Bounding, want) {
		t.Errorf("capabilities %q, want %q", s.Process.Capabilities.Bounding, want)
	}
	if s.Process.NoNewPrivileges || s.Root.Readonly || s.Linux.Resources.Pids != nil || s.Linux.Resources.Memory != nil {
		t.Errorf("settings not taken: %+v %+v", s.Process, s.Linux.Resources)
	}
	if _, i := mount(s, "/tmp"); i >= 0 {
		t.Errorf("a /tmp with NoTmpfs")
	}
	if s.Process.User.UID != 65534 || s.Process.User.GID != 100 {
		t.Errorf("user %+v", s.Process.User)
	}
	for _, n := range s.Linux.Namespaces {
		if n.Type == specs.NetworkNamespace {
			t.Errorf("a network namespace with the host's network")
		}
	}
	if !slices.ContainsFunc(s.Linux.Namespaces, func(n specs.LinuxNamespace) bool { return n.Type == specs.CgroupNamespace }) {
		t.Errorf("no cgroup namespace on the unified hierarchy")
	}
	if s.Linux.Seccomp != nil {
		t.Errorf("a filter where the kernel has none")
	}
	for _, bad := range []docker.Hardening{{Network: "bridge"}, {User: "nobody"}, {User: "1:x"}} {
		if _, err := planContainer(testSpec(t), Namespace, nil, bad, Facts{}, nil, "abcd"); err == nil {
			t.Errorf("%+v planned", bad)
		}
	}
}

// A mount goes after every mount holding it; the session's own mounts win over the extra
// ones at the same path.
func TestPlanMountOrder(t *testing.T) {
	spec := testSpec(t, pathmap.Mount{Sandbox: "/work/a/b", Host: "/h/b"}, pathmap.Mount{Sandbox: "/work", Host: "/h/w"}, pathmap.Mount{Sandbox: "/usr", Host: "/h/usr", ReadOnly: true})
	extra := []docker.Mount{{Host: "/usr", Sandbox: "/usr", ReadOnly: true}, {Host: "/etc/passwd", Sandbox: "/etc/passwd", ReadOnly: true}, {Host: "/x", Sandbox: "/work/a", ReadOnly: true}}
	p, err := planContainer(spec, Namespace, extra, docker.Hardening{}, Facts{}, nil, "abcd")
	if err != nil {
		t.Fatal(err)
	}
	pos := map[string]int{}
	for i, m := range p.spec.Mounts {
		if _, seen := pos[m.Destination]; seen {
			t.Fatalf("two mounts at %s", m.Destination)
		}
		pos[m.Destination] = i
	}
	if !(pos["/tmp"] < pos["/work"] && pos["/work"] < pos["/work/a"] && pos["/work/a"] < pos["/work/a/b"]) {
		t.Errorf("mount order %v", pos)
	}
	if m, _ := mount(p.spec, "/usr"); m.Source != "/h/usr" {
		t.Errorf("/usr from %s, want the session's", m.Source)
	}
}

// A working directory under no mount is refused with the code outside; a mount at the root
// cannot be bound.
func TestPlanRefusals(t *testing.T) {
	for _, cwd := range []string{"", "work", "/elsewhere"} {
		spec := testSpec(t)
		spec.Cwd = cwd
		_, err := planContainer(spec, Namespace, nil, docker.Hardening{}, Facts{}, nil, "abcd")
		var out *docker.OutsideError
		if !errors.As(err, &out) || out.Code() != "outside" {
			t.Errorf("cwd %q: %v", cwd, err)
		}
	}
	spec := testSpec(t, pathmap.Mount{Sandbox: "/", Host: "/srv"})
	if _, err := planContainer(spec, Namespace, nil, docker.Hardening{}, Facts{}, nil, "abcd"); err == nil {
		t.Errorf("a mount at the root was planned")
	}
}

// Every host directory bound in, the workspace above all, is bound nosuid and nodev: a
// set-id file or a device node there takes no effect in the sandbox.
func TestPlanBindsNoSuidNoDev(t *testing.T) {
	spec := testSpec(t, pathmap.Mount{Sandbox: "/work", Host: "/srv/ws"}, pathmap.Mount{Sandbox: "/ref", Host: "/srv/ref", ReadOnly: true})
	spec.Listen = "/run/paddock/s1"
	p, err := planContainer(spec, Namespace, []docker.Mount{{Host: "/usr", Sandbox: "/usr", ReadOnly: true}}, docker.Hardening{}, Facts{}, nil, "abcd")
	if err != nil {
		t.Fatal(err)
	}
	binds := 0
	for _, m := range p.spec.Mounts {
		if m.Type != "bind" {
			continue
		}
		binds++
		if !slices.Contains(m.Options, "nosuid") || !slices.Contains(m.Options, "nodev") {
			t.Errorf("%s is bound with %q, without nosuid or nodev", m.Destination, m.Options)
		}
	}
	if binds != 5 { // the kernel, two path-map mounts, /usr, the listen directory
		t.Errorf("%d binds, want 5", binds)
	}
}
