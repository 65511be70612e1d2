package containerd

import (
	"fmt"
	"path"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/containerd/containerd/v2/contrib/seccomp"
	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/paddockhq/paddock/transport"
	"github.com/paddockhq/paddock/transport/docker"
)

// This file is the pure part of the transport: from a Spec and the settings it decides the
// container's OCI runtime spec and labels. Nothing here talks to containerd.

// Facts are what the spec depends on of the machine it runs on, gathered once.
type Facts struct {
	Cgroup2 bool // the unified hierarchy: the container gets its own cgroup namespace
	Seccomp bool // the kernel filters system calls: the default profile is applied
	GVisor  bool // the runtime is gVisor: the sandbox's kernel is its own
}

// The open-file limits of the kernel and what it starts: containerd's own default soft
// limit, and a hard limit a process may raise it to. Neither may pass the daemon's own hard
// limit (the container holds no capability to raise it), so they stay low.
const (
	NoFileSoft = 1024
	NoFileHard = 8192
)

// plan is the container to create for one kernel.
type plan struct {
	id     string
	spec   *specs.Spec
	labels map[string]string
}

// planContainer decides the container of one kernel: its process (the kernel, its
// arguments, environment, working directory, user, no capability, no new privileges,
// rlimits), its mounts (the kernel read-only, the path map's mounts, the extra read-only
// mounts), its namespaces and limits. self labels it with its host process, for the reaper.
func planContainer(spec transport.Spec, namespace string, extra []docker.Mount, h docker.Hardening, f Facts, self map[string]string, suffix string) (*plan, error) {
	if spec.Kernel == "" {
		return nil, fmt.Errorf("containerd: no kernel binary named")
	}
	if spec.PathMap == nil {
		return nil, fmt.Errorf("containerd: a container needs a path map (the identity map is the local transport's)")
	}
	cwd := spec.Cwd
	if cwd == "" || !path.IsAbs(cwd) {
		return nil, &docker.OutsideError{Cwd: cwd}
	}
	if _, ok := spec.PathMap.Mount(cwd); !ok {
		return nil, &docker.OutsideError{Cwd: cwd}
	}
	uid, gid, err := user(h.User)
	if err != nil {
		return nil, err
	}
	netns := true
	switch h.Network {
	case "", "none":
	case "host":
		netns = false
	default:
		return nil, fmt.Errorf("containerd: network %q: the containerd transport knows none and host (another network needs CNI, which Paddock does not drive)", h.Network)
	}
	id := docker.ContainerName(spec.Session, suffix)

	mounts := systemMounts(f)
	if f.GVisor {
		// gVisor mounts its own cgroup file system there (runsc --cgroupfs): a cgroup mount
		// without a controller named is one it refuses.
		mounts = slices.DeleteFunc(mounts, func(m specs.Mount) bool { return m.Type == "cgroup" })
	}
	if !h.NoTmpfs {
		size := h.TmpfsSize
		if size <= 0 {
			size = docker.DefaultTmpfs
		}
		mounts = append(mounts, specs.Mount{Destination: "/tmp", Type: "tmpfs", Source: "tmpfs",
			Options: []string{"nosuid", "nodev", "mode=1777", "size=" + strconv.FormatInt(size, 10)}})
	}
	mounts = append(mounts, bind(spec.Kernel, docker.KernelPath, true))
	taken := map[string]bool{docker.KernelPath: true}
	var own []specs.Mount
	for _, m := range spec.PathMap.Mounts() {
		if m.Sandbox == "/" {
			return nil, fmt.Errorf("containerd: a mount at the sandbox's root cannot be bound")
		}
		own = append(own, bind(m.Host, m.Sandbox, m.ReadOnly))
		taken[m.Sandbox] = true
	}
	for _, m := range extra {
		if taken[m.Sandbox] {
			continue // the session's own mounts win over system directories
		}
		own = append(own, bind(m.Host, m.Sandbox, m.ReadOnly))
		taken[m.Sandbox] = true
	}
	if spec.Listen != "" {
		if taken[transport.ListenDir] {
			return nil, fmt.Errorf("containerd: a mount at %s is the kernel's own", transport.ListenDir)
		}
		own = append(own, bind(spec.Listen, transport.ListenDir, false))
	}
	if spec.Egress != "" {
		if taken[transport.EgressDir] {
			return nil, fmt.Errorf("containerd: a mount at %s is the kernel's own", transport.EgressDir)
		}
		own = append(own, bind(spec.Egress, transport.EgressDir, true))
	}
	// A mount goes after every mount that holds its path, so none hides another.
	sort.SliceStable(own, func(i, j int) bool { return depth(own[i].Destination) < depth(own[j].Destination) })
	mounts = append(mounts, own...)

	labels := map[string]string{docker.LabelManaged: "1"}
	for k, v := range self {
		labels[k] = v
	}
	for k, v := range spec.Labels {
		labels[k] = v
	}
	if spec.Session != "" {
		labels[docker.LabelSession] = spec.Session
	}
	args := spec.Args
	if spec.Listen != "" {
		if !spec.Once { // a kernel that ends with its host is not waited for
			labels[docker.LabelListen] = spec.Listen
		}
		args = append(transport.ListenArgs(spec), args...)
	}
	env := append([]string{}, spec.Env...)
	caps := docker.Capabilities(h.CapAdd)

	namespaces := []specs.LinuxNamespace{{Type: specs.PIDNamespace}, {Type: specs.IPCNamespace},
		{Type: specs.UTSNamespace}, {Type: specs.MountNamespace}}
	if netns {
		namespaces = append(namespaces, specs.LinuxNamespace{Type: specs.NetworkNamespace})
	}
	if f.Cgroup2 {
		namespaces = append(namespaces, specs.LinuxNamespace{Type: specs.CgroupNamespace})
	}
	res := &specs.LinuxResources{Devices: []specs.LinuxDeviceCgroup{{Allow: false, Access: "rwm"}}}
	pids := h.Pids
	if pids == 0 {
		pids = docker.DefaultPids
	}
	if pids > 0 {
		res.Pids = &specs.LinuxPids{Limit: &pids}
	}
	mem := h.Memory
	if mem == 0 {
		mem = docker.DefaultMemory
	}
	if mem > 0 {
		m, sw := mem, mem
		res.Memory = &specs.LinuxMemory{Limit: &m, Swap: &sw}
	}
	s := &specs.Spec{
		Version: specs.Version,
		Process: &specs.Process{
			Args: append([]string{docker.KernelPath}, args...),
			Env:  env,
			Cwd:  cwd,
			User: specs.User{UID: uid, GID: gid},
			Capabilities: &specs.LinuxCapabilities{
				Bounding:  caps,
				Effective: caps,
				Permitted: caps,
			},
			Rlimits: []specs.POSIXRlimit{
				{Type: "RLIMIT_NOFILE", Hard: NoFileHard, Soft: NoFileSoft},
				{Type: "RLIMIT_CORE", Hard: 0, Soft: 0}, // no core files in the workspace
			},
			NoNewPrivileges: !h.NewPrivileges,
		},
		Root:     &specs.Root{Path: "rootfs", Readonly: !h.WritableRoot},
		Hostname: hostname(id),
		Mounts:   mounts,
		Linux: &specs.Linux{
			CgroupsPath:   "/" + namespace + "/" + id,
			Namespaces:    namespaces,
			Resources:     res,
			MaskedPaths:   maskedPaths,
			ReadonlyPaths: readonlyPaths,
		},
	}
	if f.Seccomp {
		s.Linux.Seccomp = seccomp.DefaultProfile(s)
	}
	return &plan{id: id, spec: s, labels: labels}, nil
}

// systemMounts are what every Linux container has: /proc, /dev and its parts, a read-only
// /sys and its cgroups.
func systemMounts(f Facts) []specs.Mount {
	return []specs.Mount{
		{Destination: "/proc", Type: "proc", Source: "proc", Options: []string{"nosuid", "noexec", "nodev"}},
		{Destination: "/dev", Type: "tmpfs", Source: "tmpfs", Options: []string{"nosuid", "strictatime", "mode=755", "size=65536k"}},
		{Destination: "/dev/pts", Type: "devpts", Source: "devpts", Options: []string{"nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620", "gid=5"}},
		{Destination: "/dev/shm", Type: "tmpfs", Source: "shm", Options: []string{"nosuid", "noexec", "nodev", "mode=1777", "size=65536k"}},
		{Destination: "/dev/mqueue", Type: "mqueue", Source: "mqueue", Options: []string{"nosuid", "noexec", "nodev"}},
		{Destination: "/sys", Type: "sysfs", Source: "sysfs", Options: []string{"nosuid", "noexec", "nodev", "ro"}},
		{Destination: "/sys/fs/cgroup", Type: "cgroup", Source: "cgroup", Options: []string{"nosuid", "noexec", "nodev", "relatime", "ro"}},
	}
}

// The paths of /proc and /sys a container neither reads (masked) nor writes (read-only), as
// Docker and containerd hide them.
var (
	maskedPaths = []string{"/proc/acpi", "/proc/asound", "/proc/interrupts", "/proc/kcore", "/proc/keys",
		"/proc/latency_stats", "/proc/timer_list", "/proc/timer_stats", "/proc/sched_debug",
		"/proc/scsi", "/sys/firmware", "/sys/devices/virtual/powercap"}
	readonlyPaths = []string{"/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger"}
)

func bind(host, sandbox string, ro bool) specs.Mount {
	opts := []string{"rbind", "rprivate", "nosuid", "nodev"}
	if ro {
		opts = append(opts, "ro")
	} else {
		opts = append(opts, "rw")
	}
	return specs.Mount{Destination: sandbox, Type: "bind", Source: host, Options: opts}
}

func depth(p string) int {
	p = path.Clean(p)
	if p == "/" {
		return 0
	}
	return strings.Count(p, "/")
}

// user parses "uid" or "uid:gid"; "" is root, the empty image's user. A name is refused:
// there is no image database to look it up in.
func user(u string) (uint32, uint32, error) {
	if u == "" {
		return 0, 0, nil
	}
	us, gs, hasG := strings.Cut(u, ":")
	uid, err := strconv.ParseUint(us, 10, 32)
	if err != nil {
		return 0, 0, fmt.Errorf("containerd: user %q: a numeric uid[:gid] (names are not looked up)", u)
	}
	gid := uid
	if hasG {
		if gid, err = strconv.ParseUint(gs, 10, 32); err != nil {
			return 0, 0, fmt.Errorf("containerd: user %q: a numeric uid[:gid] (names are not looked up)", u)
		}
	}
	return uint32(uid), uint32(gid), nil
}

// hostname is the container's host name: its id, cut to what a host name holds.
func hostname(id string) string {
	h := strings.NewReplacer("_", "-", ".", "-").Replace(id)
	if len(h) > 63 {
		h = h[:63]
	}
	return strings.TrimRight(h, "-")
}
