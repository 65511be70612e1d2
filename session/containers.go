package session

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"time"

	cdclient "github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/pkg/namespaces"
	"github.com/docker/docker/api/types"
	"github.com/docker/docker/client"
	"github.com/docker/go-units"
	"golang.org/x/sys/unix"

	"github.com/paddockhq/paddock/config"
	"github.com/paddockhq/paddock/daemon/api"
	"github.com/paddockhq/paddock/images"
	"github.com/paddockhq/paddock/transport/containerd"
	"github.com/paddockhq/paddock/transport/docker"
	"github.com/paddockhq/paddock/transport/environ"
	"github.com/paddockhq/paddock/workspace"
)

func init() {
	Register(dockerProvider{})
	Register(containerdProvider{})
}

// containerOptions are the options the two container kinds apply: their confinement is
// built by the same code (hardening) from the same settings.
var containerOptions = []string{"image", "network", "memory", "pids-limit", "user", "writable-root", "runtime",
	"cap-add", "new-privileges", "no-tmpfs", "pool", "mount"}

// reapTimeout bounds a provider's talk with its engine while it cleans up.
const reapTimeout = 30 * time.Second

type dockerProvider struct{}

func (dockerProvider) Kind() string { return "docker" }
func (dockerProvider) Options() []string {
	return append(slices.Clone(containerOptions), "docker-host")
}
func (dockerProvider) EgressPath() string { return EgressSandbox }

// Open makes a docker transport: the settings' image, else the host image with the host's
// system directories read-only; the workspace at its own path unless mounts say otherwise.
func (dockerProvider) Open(ctx context.Context, r *Request) (*Opened, error) {
	cli, _ := r.docker.(*client.Client)
	if host := r.Settings.Settings.KernelTransport.Docker.Host; cli != nil && host != "" && cli.DaemonHost() != host {
		closeClient(r) // the engine tried when choosing the kind is not the one named
		cli = nil
	}
	if cli == nil {
		c, err := docker.ConnectTo(ctx, r.Settings.Settings.KernelTransport.Docker.Host)
		if err != nil {
			return nil, fmt.Errorf("--transport docker: %w (run `paddock doctor`)", err)
		}
		cli = c
	}
	op, err := openDocker(ctx, r, cli)
	if err != nil {
		cli.Close()
		return nil, err
	}
	return op, nil
}

func openDocker(ctx context.Context, r *Request, cli *client.Client) (*Opened, error) {
	kt := r.Settings.Settings.KernelTransport
	h, err := hardening(r.Transport, kt.Docker)
	if err != nil {
		return nil, err
	}
	if err := engineRuntime(ctx, cli, kt.Runtime); err != nil {
		return nil, err
	}
	t := &docker.Transport{Client: cli, Image: kt.Docker.Image, Hardening: h, Runtime: kt.Runtime, Stderr: r.Stderr}
	if t.Image == "" {
		ref, err := images.Host(ctx, cli, "", nil)
		if err != nil {
			return nil, err
		}
		t.Image = ref
		for _, m := range images.HostMounts() {
			t.Mounts = append(t.Mounts, docker.Mount{Host: m.Host, Sandbox: m.Sandbox, ReadOnly: true})
		}
	}
	pm, err := pathMap(r, true)
	if err != nil {
		return nil, err
	}
	kernel, err := images.Default.Find(ctx, engineArch(ctx, cli))
	if err != nil {
		return nil, err
	}
	env, diags := environ.Sandbox(r.Environ, kt.Env, docker.DefaultEnv, pm)
	return &Opened{Transport: t, Kernel: kernel, Env: env, PathMap: pm, Ephemeral: true, Pools: true, ListenOnce: true, Notices: diags, Egress: egressPath(h.Network),
		// Each session connects its own client.
		Close: func(context.Context) (*workspace.Report, error) { return nil, cli.Close() }}, nil
}

// Recover cleans up on the engine the session was opened on: the one its request's settings
// name (kernelTransport.docker.host, read as the session's opening read it), else the
// environment's. A session on Podman's service is looked for there, not on Docker's.
func (dockerProvider) Recover(ctx context.Context, l Left) string {
	id := l.Session
	ctx, cancel := context.WithTimeout(ctx, reapTimeout)
	defer cancel()
	cli, err := docker.ConnectTo(ctx, engineHost(l.Request))
	if err != nil {
		return fmt.Sprintf("its docker sandbox cannot be checked: %v", oneLine(err))
	}
	defer cli.Close()
	return recovered("docker",
		func() ([]string, error) { return docker.SessionContainers(ctx, cli, id) },
		func() (int, error) { return docker.RemoveSession(ctx, cli, id) })
}

// Reap reaps every engine a session may have been opened on: the environment's and the one
// the user's settings name (kernelTransport.docker.host), each once. An engine that does not
// answer has nothing of its own to reap.
func (dockerProvider) Reap(ctx context.Context) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, reapTimeout)
	defer cancel()
	seen := map[string]bool{}
	n := 0
	var errs []error
	for _, host := range []string{"", engineHost(nil)} {
		cli, err := docker.ConnectTo(ctx, host)
		if err != nil {
			continue
		}
		if !seen[cli.DaemonHost()] {
			seen[cli.DaemonHost()] = true
			m, err := docker.Reap(ctx, cli)
			n += m
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", cli.DaemonHost(), err))
			}
		}
		cli.Close()
	}
	return n, errors.Join(errs...)
}

// engineHost is the engine a docker session opened by req was on: kernelTransport.docker.host
// in its settings (the request's over its workspace's and the user's, as its opening read
// them); nil req: the user's settings alone. "" is the environment's engine (DOCKER_HOST,
// else the default socket), as it is when the settings do not say or cannot be read.
func engineHost(req *api.OpenRequest) string {
	var o config.Options
	if req != nil {
		var err error
		if o, _, err = FromRequest(*req); err != nil {
			return ""
		}
	}
	l, err := Load(o)
	if err != nil {
		return ""
	}
	return l.Settings.KernelTransport.Docker.Host
}

// Check reports the engine the user's settings name (kernelTransport.docker.host), else the
// environment's, and so the transport a session takes by default.
func (dockerProvider) Check(ctx context.Context) Check {
	c := Check{Name: "docker"}
	// Podman's service can take seconds to answer version on a loaded machine.
	cctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	cli, err := docker.ConnectTo(cctx, engineHost(nil))
	if err != nil {
		c.Detail = "no engine reachable: " + oneLine(err) + "; paddock run falls back to the local transport (unconfined)"
		c.Fix = "start the engine (systemctl start docker, or dockerd), or point DOCKER_HOST at one; a user outside the docker group needs to join it"
		return c
	}
	defer cli.Close()
	v, err := cli.ServerVersion(cctx)
	if err != nil {
		c.Detail = "the engine answers ping but not version: " + oneLine(err)
		return c
	}
	c.OK = true
	c.Detail = fmt.Sprintf("engine %s (API %s, client speaks %s) at %s, %s/%s; paddock run uses the docker transport by default",
		v.Version, v.APIVersion, cli.ClientVersion(), cli.DaemonHost(), v.Os, v.Arch)
	if !strings.HasPrefix(cli.DaemonHost(), "unix://") {
		c.OK = false
		c.Detail += "; the engine is not local, so it cannot bind this machine's workspace and kernel"
		c.Fix = "use a local engine (unset DOCKER_HOST), or the wrapped transport into a container that already holds the kernel"
	}
	if _, err := cli.ImageInspect(cctx, images.HostRef); err == nil {
		c.Detail += "; the host image " + images.HostRef + " is made"
	} else {
		c.Detail += "; the host image " + images.HostRef + " is made at the first run"
	}
	c.Detail += "; " + engineName(v.Components)
	info, err := cli.Info(cctx)
	switch {
	case err != nil:
	case isPodman(v.Components):
		// Podman's Docker-compatible API ignores a container's runtime: the service's
		// default is the only one a session gets (engineRuntime).
		c.Detail += fmt.Sprintf("; runtime (--runtime): %s alone, the service's default (Podman's Docker-compatible API ignores a container's runtime)", info.DefaultRuntime)
		if info.DefaultRuntime != "runsc" {
			if _, err := exec.LookPath("runsc"); err == nil {
				c.Detail += "; gVisor is installed: a Podman service of its own runs it"
				c.Fix = podmanHint("runsc")
			}
		}
	default:
		names := slices.Sorted(maps.Keys(info.Runtimes))
		c.Detail += fmt.Sprintf("; runtimes (--runtime): %s (default %s)", strings.Join(names, ", "), info.DefaultRuntime)
		if _, ok := info.Runtimes["runsc"]; !ok {
			if _, err := exec.LookPath("runsc"); err == nil {
				c.Detail += "; gVisor is installed but the engine has no runsc runtime"
				c.Fix = registerHint("runsc")
			}
		}
	}
	return c
}

// engineName says which engine answers: Docker's or Podman's Docker-compatible service.
func engineName(cs []types.ComponentVersion) string {
	for _, c := range cs {
		if isPodman([]types.ComponentVersion{c}) {
			return "Podman " + c.Version + " answers (its Docker-compatible service)"
		}
	}
	return "the Docker engine answers"
}

type containerdProvider struct{}

func (containerdProvider) Kind() string       { return "containerd" }
func (containerdProvider) Options() []string  { return containerOptions }
func (containerdProvider) EgressPath() string { return EgressSandbox }

// containerdAddress is the containerd socket a session uses: PADDOCK_CONTAINERD_ADDRESS,
// else the machine's own or the Docker engine's.
func containerdAddress() string { return os.Getenv("PADDOCK_CONTAINERD_ADDRESS") }

// Open makes a containerd transport: the settings' image (loaded from the Docker engine
// when containerd lacks it), else the host image with the host's system directories; the
// docker transport's confinement from the same options and settings.
func (containerdProvider) Open(ctx context.Context, r *Request) (*Opened, error) {
	closeClient(r) // the engine tried when choosing the kind is not this one
	c, err := containerd.Connect(ctx, containerdAddress())
	if err != nil {
		return nil, fmt.Errorf("--transport containerd: %w (is containerd running? PADDOCK_CONTAINERD_ADDRESS names its socket)", err)
	}
	op, err := openContainerd(ctx, r, c)
	if err != nil {
		c.Close()
		return nil, err
	}
	return op, nil
}

func openContainerd(ctx context.Context, r *Request, c *cdclient.Client) (*Opened, error) {
	kt := r.Settings.Settings.KernelTransport
	h, err := hardening(r.Transport, kt.Docker)
	if err != nil {
		return nil, err
	}
	t := &containerd.Transport{Client: c, Hardening: h, Runtime: kt.Runtime, Stderr: r.Stderr}
	if t.Image, err = containerdImage(ctx, c, kt.Docker.Image); err != nil {
		return nil, err
	}
	if kt.Docker.Image == "" {
		for _, m := range images.HostMounts() {
			t.Mounts = append(t.Mounts, docker.Mount{Host: m.Host, Sandbox: m.Sandbox, ReadOnly: true})
		}
	}
	pm, err := pathMap(r, true)
	if err != nil {
		return nil, err
	}
	kernel, err := images.Default.Find(ctx, runtime.GOARCH)
	if err != nil {
		return nil, err
	}
	env, diags := environ.Sandbox(r.Environ, kt.Env, docker.DefaultEnv, pm)
	return &Opened{Transport: t, Kernel: kernel, Env: env, PathMap: pm, Ephemeral: true, Pools: true, ListenOnce: true, Notices: diags, Egress: egressPath(h.Network),
		Close: func(context.Context) (*workspace.Report, error) { return nil, c.Close() }}, nil
}

// egressPath is a container's way to the proxy: through the kernel when it has no network.
func egressPath(network string) string {
	if network == "" || network == "none" {
		return EgressSandbox
	}
	return ""
}

// containerdImage is the image a containerd sandbox runs: the host image when none is
// named; a named one containerd's namespace holds; else the Docker engine's, loaded.
func containerdImage(ctx context.Context, cl *cdclient.Client, ref string) (string, error) {
	if ref == "" {
		return images.ContainerdHost(ctx, cl, containerd.Namespace, "", "", nil)
	}
	if _, err := cl.GetImage(namespaces.WithNamespace(ctx, containerd.Namespace), ref); err == nil {
		return ref, nil
	}
	cctx, cancel := context.WithTimeout(ctx, chooseTimeout)
	cli, err := docker.Connect(cctx)
	cancel()
	if err != nil {
		return "", fmt.Errorf("--transport containerd: containerd's %s namespace has no image %s, and no Docker engine holds one to load (%v): build it, or import it with `ctr -n %s images import`", containerd.Namespace, ref, err, containerd.Namespace)
	}
	defer cli.Close()
	return images.ContainerdFromDocker(ctx, cli, cl, containerd.Namespace, "", ref, nil)
}

func (containerdProvider) Recover(ctx context.Context, l Left) string {
	id := l.Session
	ctx, cancel := context.WithTimeout(ctx, reapTimeout)
	defer cancel()
	cli, err := containerd.Connect(ctx, containerdAddress())
	if err != nil {
		return fmt.Sprintf("its containerd sandbox cannot be checked: %v", oneLine(err))
	}
	defer cli.Close()
	return recovered("containerd",
		func() ([]string, error) { return containerd.SessionContainers(ctx, cli, id) },
		func() (int, error) { return containerd.RemoveSession(ctx, cli, id) })
}

func (containerdProvider) Reap(ctx context.Context) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, reapTimeout)
	defer cancel()
	cli, err := containerd.Connect(ctx, containerdAddress())
	if err != nil {
		return 0, nil
	}
	defer cli.Close()
	return containerd.Reap(ctx, cli)
}

// Check reports whether a containerd socket answers: CONTAINERD_ADDRESS, the system's, or
// the one the Docker engine runs for itself.
func (containerdProvider) Check(context.Context) Check {
	c := Check{Name: "containerd"}
	socks := []string{"/run/containerd/containerd.sock", "/var/run/docker/containerd/containerd.sock"}
	if a := os.Getenv("CONTAINERD_ADDRESS"); a != "" {
		socks = []string{strings.TrimPrefix(a, "unix://")}
	}
	var why []string
	for _, sock := range socks {
		conn, err := net.DialTimeout("unix", sock, 2*time.Second)
		if err != nil {
			why = append(why, fmt.Sprintf("%s: %s", sock, errText(err)))
			continue
		}
		conn.Close()
		c.OK = true
		c.Detail = "a socket answers at " + sock
		if strings.Contains(sock, "/docker/") {
			c.Detail += " (the Docker engine's own, namespace moby)"
		}
		c.Detail += "; runtimes (--runtime): " + containerdRuntimes()
		return c
	}
	c.Detail = "no socket answers (" + strings.Join(why, "; ") + ")"
	c.Fix = "start containerd (systemctl start containerd), or set CONTAINERD_ADDRESS to its socket"
	return c
}

// containerdRuntimes lists the runtimes a containerd sandbox can run under on this machine.
func containerdRuntimes() string {
	out := []string{"runc (default)"}
	for _, name := range []string{"runsc", "crun", "youki"} {
		rt, err := containerd.ChooseRuntime(name, "", exec.LookPath)
		switch {
		case err != nil:
		case rt.Shim == containerd.RunscShim:
			out = append(out, name+" (gVisor's shim)")
		case rt.Wrapper != "":
			out = append(out, name+" (gVisor, through the runc shim and a wrapper Paddock writes)")
		default:
			out = append(out, name+" ("+rt.Binary+", through the runc shim)")
		}
	}
	return strings.Join(out, ", ")
}

// recovered removes a session's containers and says what was found.
func recovered(kind string, find func() ([]string, error), remove func() (int, error)) string {
	ids, err := find()
	if err != nil {
		return fmt.Sprintf("its %s sandbox cannot be checked: %v", kind, oneLine(err))
	}
	n, err := remove()
	switch {
	case len(ids) == 0:
		return "its container is gone"
	case err != nil:
		return fmt.Sprintf("its kernel cannot be taken up again; removing its %d containers failed: %v", len(ids), oneLine(err))
	}
	return fmt.Sprintf("its kernel cannot be taken up again; its %d container(s) removed", n)
}

// errText is an error's errno when it has one (a socket that does not answer), else its
// first line.
func errText(err error) string {
	var errno unix.Errno
	if errors.As(err, &errno) {
		return errno.Error()
	}
	return oneLine(err)
}

// hardening is a container sandbox's confinement from the options and the settings.
func hardening(t Transport, d config.Docker) (docker.Hardening, error) {
	h := docker.Hardening{
		CapAdd:        t.CapAdd,
		NewPrivileges: t.NewPrivileges,
		Network:       d.Network,
		Pids:          d.Pids,
		WritableRoot:  d.WritableRoot,
		NoTmpfs:       t.NoTmpfs,
		User:          d.User,
	}
	switch m := strings.TrimSpace(d.Memory); m {
	case "", "0":
	case "-1", "none", "unlimited":
		h.Memory = -1
	default:
		n, err := units.RAMInBytes(m)
		if err != nil || n <= 0 {
			return h, &OptionError{Msg: fmt.Sprintf("memory %q: a size such as 512m or 2g, or -1", m)}
		}
		h.Memory = n
	}
	return h, nil
}

// engineRuntime checks the engine has the runtime named registered; "" is its default.
func engineRuntime(ctx context.Context, cli *client.Client, name string) error {
	if name == "" {
		return nil
	}
	info, err := cli.Info(ctx)
	if err != nil {
		return fmt.Errorf("--runtime %s: the engine's runtimes: %w", name, err)
	}
	v, err := cli.ServerVersion(ctx)
	if err != nil { // which engine it is decides whether its runtimes can be named at all
		return fmt.Errorf("--runtime %s: the engine's version: %w", name, err)
	}
	if isPodman(v.Components) {
		if info.DefaultRuntime == name {
			return nil
		}
		return &OptionError{Msg: fmt.Sprintf("--runtime %s: the engine at %s is Podman, whose Docker-compatible API runs every container under its default runtime (%s), whatever the container names; %s",
			name, cli.DaemonHost(), info.DefaultRuntime, podmanHint(name))}
	}
	if _, ok := info.Runtimes[name]; ok {
		return nil
	}
	return &OptionError{Msg: fmt.Sprintf("--runtime %s: the engine at %s has no runtime of that name (it has %s); %s",
		name, cli.DaemonHost(), strings.Join(slices.Sorted(maps.Keys(info.Runtimes)), ", "), registerHint(name))}
}

// podmanHint says how to run Podman's containers under a runtime: a service of its own
// whose default runtime it is (Podman's Docker-compatible API ignores a container's
// HostConfig.Runtime). gVisor's runsc takes its flags through a wrapper, as Podman's
// runtimes are paths alone.
func podmanHint(name string) string {
	if name == "runsc" {
		return `start a Podman service for gVisor: a containers.conf with [engine] runtime = "runsc" and [engine.runtimes] runsc = ["/usr/local/bin/runsc-podman"], that file a script running exec /usr/bin/runsc --oci-seccomp --network=none "$@", then CONTAINERS_CONF=that-file podman system service --time=0 unix:///run/podman/runsc.sock and --docker-host unix:///run/podman/runsc.sock (or use --transport containerd)`
	}
	return fmt.Sprintf(`start a Podman service whose containers.conf says [engine] runtime = %q and point --docker-host at it`, name)
}

// isPodman reports whether an engine's version components name Podman.
func isPodman(cs []types.ComponentVersion) bool {
	for _, c := range cs {
		if strings.Contains(strings.ToLower(c.Name), "podman") {
			return true
		}
	}
	return false
}

func registerHint(name string) string {
	if name == "runsc" {
		return `register gVisor in /etc/docker/daemon.json as "runtimes": {"runsc": {"path": "/usr/bin/runsc", "runtimeArgs": ["--oci-seccomp", "--network=none"]}} and send dockerd SIGHUP (or use --transport containerd, which needs no registration)`
	}
	return fmt.Sprintf(`register it in /etc/docker/daemon.json under "runtimes": {%q: {"path": "/path/to/%s"}} and send dockerd SIGHUP`, name, name)
}

// engineArch is the engine's architecture as Go names it; the host's when it cannot say.
func engineArch(ctx context.Context, cli *client.Client) string {
	info, err := cli.Info(ctx)
	if err != nil {
		return runtime.GOARCH
	}
	switch info.Architecture {
	case "x86_64", "amd64":
		return "amd64"
	case "aarch64", "arm64":
		return "arm64"
	case "armv7l", "arm":
		return "arm"
	case "s390x", "ppc64le", "riscv64":
		return info.Architecture
	}
	return runtime.GOARCH
}
