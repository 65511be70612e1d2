package main

import (
	"context"

	"github.com/spf13/pflag"

	"github.com/paddockhq/paddock/config"
	"github.com/paddockhq/paddock/daemon/api"
	"github.com/paddockhq/paddock/session"
)

// transportFlags are the flags that choose and configure the transport of a command's
// session. Most are bound to a settings key (transportKeys), so the settings hold the flag's
// value when it was given and the settings' otherwise; the rest have no settings key and are
// the session's transport options (session.Transport).
type transportFlags struct {
	t      session.Transport // the options whose flags set them as they are
	mounts []string
	wrap   string

	fs *pflag.FlagSet // the flags registered: which were given
}

// transportKeys binds the transport flags to settings keys: the session's transport
// options, which the flags are named for.
var transportKeys = api.TransportKeys()

func (f *transportFlags) register(fs *pflag.FlagSet) {
	f.fs = fs
	fs.String("transport", "", "where the kernel runs: docker, containerd, wrapped, ssh or local (default: docker when an engine is reachable, else local)")
	fs.String("image", "", "docker: the image the sandbox runs (default: the host image, the host's system directories read-only)")
	fs.String("network", "", "docker: the sandbox's network, e.g. bridge (default: none)")
	fs.String("memory", "", "docker: the sandbox's memory limit, e.g. 2g; -1: none (default 2g)")
	fs.Int64("pids-limit", 0, "docker: the sandbox's process limit; -1: none (default 1024)")
	fs.String("user", "", "docker: the user the kernel runs as, uid[:gid] (default: the image's)")
	fs.String("docker-host", "", "docker: the engine's API endpoint, e.g. unix:///run/podman/podman.sock for Podman (default: DOCKER_HOST, else the local Docker engine)")
	fs.String("runtime", "", "docker, containerd: the OCI runtime the sandbox runs under, e.g. runsc for gVisor (default: the engine's, runc)")
	fs.Bool("writable-root", false, "docker: leave the sandbox's root filesystem writable (default: read-only)")
	fs.StringSliceVar(&f.t.CapAdd, "cap-add", nil, "docker: a capability the sandbox keeps (default: none; repeatable)")
	fs.BoolVar(&f.t.NewPrivileges, "new-privileges", false, "docker: leave the engine's no-new-privileges flag off (the kernel sets no_new_privs on itself all the same)")
	fs.BoolVar(&f.t.NoTmpfs, "no-tmpfs", false, "docker: no private tmpfs at /tmp")
	fs.StringSlice("env", nil, "host variables passed into a sandbox (credentials never are; repeatable)")
	fs.StringArrayVar(&f.mounts, "mount", nil, "HOST:SANDBOX[:ro], a directory both sides see (default for docker: the workspace at its own path; repeatable)")
	fs.StringVar(&f.wrap, "wrap", "", `wrapped: the wrapper command, e.g. "docker exec -i box"`)
	fs.String("kernel-path", "", "wrapped: the kernel binary's path in the sandbox (default: the host's)")
	fs.String("host", "", "ssh: the box, an ssh_config alias or [user@]host[:port] (--transport ssh); unix://PATH: the daemon to run in")
	fs.String("kernel-cache", "", "ssh: the directory on the box that keeps kernels (default ~/.cache/paddock/kernel)")
	fs.Bool("sync", false, "ssh: copy the workspace to the box and hand it back at the end, for a box with no shared filesystem")
	fs.StringArrayVar(&f.t.AllowNet, "allow-net", nil, "HOST[:PORT], *.DOMAIN[:PORT] or ADDRESS[:PORT] the sandbox connects to unasked, besides network.allow (repeatable, comma lists)")
	fs.String("egress", "", "the sandbox's way out: auto (the host's judging proxy for containers without a network), proxy (also local and wrapped, advisory) or off (default: network.egress, auto)")
	fs.BoolVar(&f.t.EgressViaHost, "egress-via-host", false, "ssh: offer the box's steps the host's judging proxy through the connection (the box's network stays its own: advisory)")
	fs.Int("pool", 0, "docker, containerd: sandboxes kept started ahead, kernels answering, for this command's sessions and their children (default 0: none)")
}

// options are the session's transport options the flags give.
func (f *transportFlags) options() (session.Transport, error) {
	t := f.t
	for _, m := range f.mounts {
		pm, err := session.ParseMount(m)
		if err != nil {
			return t, err
		}
		t.Mounts = append(t.Mounts, pm)
	}
	if f.wrap != "" {
		argv, err := session.ParseWrap(f.wrap)
		if err != nil {
			return t, err
		}
		t.Wrap = argv
	}
	if f.fs != nil {
		f.fs.Visit(func(fl *pflag.Flag) { t.Given = append(t.Given, fl.Name) })
	}
	return t, nil
}

// prepare makes the configuration of a command's session in workspace from its settings and
// flags, with the CLI's audit file; the notices are for the user.
func (f *transportFlags) prepare(ctx context.Context, workspace string, l *config.Loaded) (*session.Prepared, error) {
	o, err := f.sessionOptions(workspace, l)
	if err != nil {
		return nil, err
	}
	return session.Prepare(ctx, o)
}

// sessionOptions are the options of a command's session in workspace, with the CLI's audit
// file.
func (f *transportFlags) sessionOptions(workspace string, l *config.Loaded) (session.Options, error) {
	opts, err := f.options()
	return session.Options{Workspace: workspace, Settings: l, Transport: opts, AuditFile: session.AuditFile()}, err
}
