package docker

import (
	"fmt"
	"path"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/mount"
	"github.com/docker/docker/api/types/strslice"

	"github.com/paddockhq/paddock/errdefs"
	"github.com/paddockhq/paddock/transport"
)

// This file is the pure part of the transport: from a Spec and the settings it decides the
// container to create. Nothing here talks to Docker.

// Hardening says how the kernel's container is confined. The zero value is the hardened
// default: every capability dropped, no-new-privileges, no network, DefaultPids processes,
// DefaultMemory bytes, a read-only root filesystem with a tmpfs at /tmp, the image's user.
type Hardening struct {
	// CapAdd lists the capabilities kept (CAP_ prefix optional); every other one is dropped.
	CapAdd []string `mapstructure:"capAdd" json:"capAdd,omitempty"`
	// NewPrivileges leaves the engine's no-new-privileges flag off; false sets it. The
	// kernel sets no_new_privs on itself all the same (its system-call filter needs it), so
	// no sandbox process gains privileges through a setuid file either way.
	NewPrivileges bool `mapstructure:"newPrivileges" json:"newPrivileges,omitempty"`
	// Network is the container's network: "" or "none" for none, else "bridge", "host" or
	// a network's name.
	Network string `mapstructure:"network" json:"network,omitempty"`
	// Pids limits the processes of the container: 0 is DefaultPids, -1 no limit.
	Pids int64 `mapstructure:"pids" json:"pids,omitempty"`
	// Memory limits the container's memory in bytes, swap included: 0 is DefaultMemory,
	// -1 no limit.
	Memory int64 `mapstructure:"memory" json:"memory,omitempty"`
	// WritableRoot leaves the root filesystem writable; false makes it read-only.
	WritableRoot bool `mapstructure:"writableRoot" json:"writableRoot,omitempty"`
	// NoTmpfs leaves /tmp to the image; false mounts a private tmpfs there.
	NoTmpfs bool `mapstructure:"noTmpfs" json:"noTmpfs,omitempty"`
	// TmpfsSize is the /tmp tmpfs's size in bytes: 0 is DefaultTmpfs.
	TmpfsSize int64 `mapstructure:"tmpfsSize" json:"tmpfsSize,omitempty"`
	// User runs the kernel as this user ("uid", "uid:gid" or a name the image knows); ""
	// is the workspace's owner when that is not root, else the image's user (SandboxUser).
	User string `mapstructure:"user" json:"user,omitempty"`
}

// Defaults of Hardening's zero fields.
const (
	DefaultPids   = 1024
	DefaultMemory = 2 << 30
	DefaultTmpfs  = 512 << 20
)

// KernelPath is where the kernel binary is mounted, read-only, in every container.
const KernelPath = "/.paddock/paddock-kernel"

// Labels Paddock puts on what it creates in Docker.
const (
	LabelManaged = "paddock"         // "1" on every container and image Paddock makes
	LabelSession = "paddock.session" // the session's id
	LabelMachine = "paddock.machine" // the host process's machine
	LabelBoot    = "paddock.boot"    // the machine's boot, so a container of an earlier boot is told apart
	LabelPID     = "paddock.pid"     // the host process's pid
	LabelStart   = "paddock.start"   // the host process's start time, so a reused pid is told apart
	// LabelPIDNS is the host process's pid namespace: a pid means something only in its own,
	// and two hosts in containers of one machine (one hostname, one boot) are in two.
	LabelPIDNS = "paddock.pidns"
	// LabelListen is the host directory a listening kernel's socket is in: while it is
	// there, a new host may reattach, and the reaper spares the container.
	LabelListen = "paddock.listen"
	// LabelRuntime is the OCI runtime the container runs under, when one is named
	// (kernelTransport.runtime: runsc, say).
	LabelRuntime = "paddock.runtime"
)

// Mount is a host directory or file bound into the container.
type Mount struct {
	Host     string `mapstructure:"host" json:"host"`
	Sandbox  string `mapstructure:"sandbox" json:"sandbox"`
	ReadOnly bool   `mapstructure:"readonly" json:"readonly,omitempty"`
}

// OutsideError is a working directory under none of the container's mounts: the kernel
// would start where no host directory is.
type OutsideError struct{ Cwd string }

func (e *OutsideError) Error() string {
	return fmt.Sprintf("docker: the working directory %q is outside every mount of the sandbox; mount its host directory (path map) or start elsewhere", e.Cwd)
}

// Code is the stable code of the refusal.
func (e *OutsideError) Code() string { return "outside" }

// Class is the error's class.
func (e *OutsideError) Class() errdefs.Class { return errdefs.PermissionDenied }

// plan is the container to create for one kernel.
type plan struct {
	config *container.Config
	host   *container.HostConfig
	name   string
}

// planContainer decides the container of one kernel: image, command, environment, working
// directory, mounts (the kernel read-only, the path map's mounts, extra read-only mounts) and
// confinement. self labels the container with its host process, for the reaper.
func planContainer(spec transport.Spec, image string, extra []Mount, h Hardening, self map[string]string, suffix string) (*plan, error) {
	if image == "" {
		return nil, fmt.Errorf("docker: no image named")
	}
	if spec.Kernel == "" {
		return nil, fmt.Errorf("docker: no kernel binary named")
	}
	if spec.PathMap == nil {
		return nil, fmt.Errorf("docker: a container needs a path map (the identity map is the local transport's)")
	}
	cwd := spec.Cwd
	if cwd == "" || !path.IsAbs(cwd) {
		return nil, &OutsideError{Cwd: cwd}
	}
	if _, ok := spec.PathMap.Mount(cwd); !ok {
		return nil, &OutsideError{Cwd: cwd}
	}
	// Docker binds these without nosuid or nodev: neither its Binds modes nor the Mounts
	// API's BindOptions (up to the newest API) name them, and the engine refuses a mode it
	// does not know. nosuid would not guard the host anyway: it stops set-id bits taking
	// effect through this mount, while the host runs a file through its own. What guards
	// the host is that no bit is set at all: the kernel's system-call filter refuses it,
	// and the kernel runs as the workspace's owner (SandboxUser).
	mounts := []mount.Mount{{Type: mount.TypeBind, Source: spec.Kernel, Target: KernelPath, ReadOnly: true}}
	taken := map[string]bool{KernelPath: true}
	for _, m := range spec.PathMap.Mounts() {
		if m.Sandbox == "/" {
			return nil, fmt.Errorf("docker: a mount at the sandbox's root cannot be bound")
		}
		mounts = append(mounts, mount.Mount{Type: mount.TypeBind, Source: m.Host, Target: m.Sandbox, ReadOnly: m.ReadOnly})
		taken[m.Sandbox] = true
	}
	for _, m := range extra {
		if taken[m.Sandbox] {
			continue // the session's own mounts win over system directories
		}
		mounts = append(mounts, mount.Mount{Type: mount.TypeBind, Source: m.Host, Target: m.Sandbox, ReadOnly: m.ReadOnly})
		taken[m.Sandbox] = true
	}
	if spec.Listen != "" {
		if taken[transport.ListenDir] {
			return nil, fmt.Errorf("docker: a mount at %s is the kernel's own", transport.ListenDir)
		}
		mounts = append(mounts, mount.Mount{Type: mount.TypeBind, Source: spec.Listen, Target: transport.ListenDir})
	}
	if spec.Egress != "" {
		if taken[transport.EgressDir] {
			return nil, fmt.Errorf("docker: a mount at %s is the kernel's own", transport.EgressDir)
		}
		mounts = append(mounts, mount.Mount{Type: mount.TypeBind, Source: spec.Egress, Target: transport.EgressDir, ReadOnly: true})
	}
	labels := map[string]string{LabelManaged: "1"}
	for k, v := range self {
		labels[k] = v
	}
	for k, v := range spec.Labels {
		labels[k] = v
	}
	if spec.Session != "" {
		labels[LabelSession] = spec.Session
	}
	args := spec.Args
	if spec.Listen != "" {
		if !spec.Once { // a kernel that ends with its host is not waited for
			labels[LabelListen] = spec.Listen
		}
		args = append(transport.ListenArgs(spec), args...)
	}
	env := spec.Env
	if env == nil {
		env = []string{}
	}
	cfg := &container.Config{
		Image:        image,
		Entrypoint:   strslice.StrSlice{KernelPath},
		Cmd:          strslice.StrSlice(append([]string{}, args...)),
		Env:          env,
		WorkingDir:   workingDir(cwd, h),
		User:         h.User,
		Labels:       labels,
		AttachStdin:  true,
		AttachStdout: true,
		AttachStderr: true,
		OpenStdin:    true,
		StdinOnce:    true,
		Tty:          false,
	}
	if spec.Listen != "" { // frames go over the socket; the kernel's standard streams are not its host's
		cfg.AttachStdin, cfg.OpenStdin, cfg.StdinOnce = false, false, false
	}
	if len(cfg.Cmd) == 0 {
		cfg.Cmd = nil
	}
	hc := &container.HostConfig{
		Mounts:         mounts,
		NetworkMode:    container.NetworkMode(network(h.Network)),
		CapDrop:        strslice.StrSlice{"ALL"},
		CapAdd:         capabilities(h.CapAdd),
		ReadonlyRootfs: !h.WritableRoot,
		IpcMode:        "private",
		PidMode:        "", // a private pid namespace: host processes are not seen
	}
	if !h.NewPrivileges {
		hc.SecurityOpt = []string{"no-new-privileges"}
	}
	if !h.NoTmpfs {
		size := h.TmpfsSize
		if size <= 0 {
			size = DefaultTmpfs
		}
		hc.Tmpfs = map[string]string{"/tmp": fmt.Sprintf("rw,nosuid,nodev,mode=1777,size=%d", size)}
	}
	pids := h.Pids
	if pids == 0 {
		pids = DefaultPids
	}
	if pids > 0 {
		hc.PidsLimit = &pids
	}
	mem := h.Memory
	if mem == 0 {
		mem = DefaultMemory
	}
	if mem > 0 {
		hc.Memory, hc.MemorySwap = mem, mem
	}
	return &plan{config: cfg, host: hc, name: ContainerName(spec.Session, suffix)}, nil
}

// WorkspaceOwner is the owner of the host directory a kernel's working directory lies in;
// Known is false when it could not be read.
type WorkspaceOwner struct {
	UID, GID int
	Known    bool
}

// SandboxUser decides the user a container kernel runs as: the hardening's user when one
// is named; else the workspace's owner, when known and not root, so every file the sandbox
// makes in the workspace is the owner's own, as if the owner had made it, and a set-id bit
// that got past the kernel's filter would raise no one above the owner; else "" (the
// image's user: a workspace root owns is root's already). A uid the image does not list is
// fine: the host image lists the host's users, and a numeric user needs no entry.
func SandboxUser(named string, owner WorkspaceOwner) string {
	if named != "" {
		return named
	}
	if !owner.Known || owner.UID == 0 || owner.UID < 0 || owner.GID < 0 {
		return ""
	}
	return strconv.Itoa(owner.UID) + ":" + strconv.Itoa(owner.GID)
}

// workingDir is the directory the kernel process starts in: cwd, except under the /tmp
// tmpfs, where the engine would make the tmpfs writable by root alone while it makes the
// working directory; the kernel then starts at / (each command still starts in the
// directory its exec request names).
func workingDir(cwd string, h Hardening) string {
	if !h.NoTmpfs && (cwd == "/tmp" || strings.HasPrefix(cwd, "/tmp/")) {
		return "/"
	}
	return cwd
}

func network(n string) string {
	if n == "" {
		return "none"
	}
	return n
}

// capabilities is Capabilities in Docker's form: nil when none is kept.
func capabilities(names []string) strslice.StrSlice {
	if c := Capabilities(names); len(c) > 0 {
		return c
	}
	return nil
}

// Capabilities returns the capabilities to keep, upper case with the CAP_ prefix, sorted
// and without repeats; none is an empty, non-nil list (every capability dropped). Every
// container backend names them so.
func Capabilities(names []string) []string {
	out := []string{}
	seen := map[string]bool{}
	for _, n := range names {
		n = strings.ToUpper(strings.TrimSpace(n))
		if n == "" {
			continue
		}
		if !strings.HasPrefix(n, "CAP_") {
			n = "CAP_" + n
		}
		if !seen[n] {
			seen[n] = true
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out
}

var nameUnsafe = regexp.MustCompile(`[^a-zA-Z0-9_.-]+`)

// ContainerName is "paddock-SESSION-SUFFIX", with what a container engine does not take in
// a name replaced: the name of every container Paddock makes.
func ContainerName(session, suffix string) string {
	s := nameUnsafe.ReplaceAllString(session, "_")
	if len(s) > 40 {
		s = s[:40]
	}
	if s == "" {
		return "paddock-" + suffix
	}
	return "paddock-" + s + "-" + suffix
}

// DefaultEnv is a container kernel's own environment, before the host variables a session
// names: a usual PATH (with the Go toolchain's directory, where the host image has it), a
// writable HOME (the root filesystem is read-only) and a UTF-8 locale.
var DefaultEnv = []string{
	"PATH=/usr/local/go/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
	"HOME=/tmp",
	"LANG=C.UTF-8",
}
