package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/paddockhq/paddock/client"
	"github.com/paddockhq/paddock/config"
	"github.com/paddockhq/paddock/daemon/api"
	"github.com/paddockhq/paddock/front"
	"github.com/paddockhq/paddock/orchestrator/output"
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
	fs.Int("pool", 0, "sandboxes kept started ahead, kernels answering, for this command's sessions and their children, where the transport keeps warm sandboxes (containers, pods; default 0: none)")
}

// sessionOptions are the options of a command's session in workspace, with the CLI's audit
// file: its settings, read binding the command's flags named in keys (loadSettings), and the
// transport options the flags give.
func (f *transportFlags) sessionOptions(cmd *cobra.Command, workspace string, keys map[string]string) (session.Options, error) {
	l, err := loadSettings(workspace, cmd.Flags(), keys, cmd.ErrOrStderr())
	o := session.Options{Workspace: workspace, Settings: l, Transport: f.t, AuditFile: session.AuditFile()}
	if err != nil {
		return o, err
	}
	for _, m := range f.mounts {
		pm, err := session.ParseMount(m)
		if err != nil {
			return o, err
		}
		o.Transport.Mounts = append(o.Transport.Mounts, pm)
	}
	if f.wrap != "" {
		argv, err := session.ParseWrap(f.wrap)
		if err != nil {
			return o, err
		}
		o.Transport.Wrap = argv
	}
	if f.fs != nil {
		f.fs.Visit(func(fl *pflag.Flag) { o.Transport.Given = append(o.Transport.Given, fl.Name) })
	}
	return o, nil
}

// sessionFlags are the flags of a command that opens a session, here or in a daemon: its
// workspace (-w), the transport's flags and, for a session that runs scripts, run's.
type sessionFlags struct {
	dir string
	transportFlags
}

// register registers them, what saying what the workspace is.
func (f *sessionFlags) register(fs *pflag.FlagSet, what string, run bool) {
	fs.StringVarP(&f.dir, "workspace", "w", "", what+" (default: the current directory)")
	if run {
		registerRunFlags(fs)
	}
	f.transportFlags.register(fs)
}

// workspace is --workspace, else the current directory.
func (f *sessionFlags) workspace() (string, error) { return workdir(f.dir) }

// registerRunFlags registers run's settings flags: the session's output and shell options
// (api.RunKeys).
func registerRunFlags(f *pflag.FlagSet) {
	def := output.Default()
	f.Int("max-bytes", def.Bytes, "bytes of each step's output kept in the result (0: all)")
	f.Int("max-lines", def.Lines, "lines of each step's output kept in the result (0: all)")
	f.String("keep", def.Mode.String(), "which end of a long output the result keeps: head or tail")
	f.StringSlice("auto-effects", nil, "effects a step may have and still run unasked (default: every effect but secret)")
	f.String("job-timeout", "", "kill the script once it has run this long, e.g. 30m (default: shell.jobTimeout, none)")
}

// loadSettings reads the settings for a command working in workspace, binding the command's
// flags named in keys; warnings go to w. Settings that cannot be read are a usage error, as a
// bad flag is.
func loadSettings(workspace string, fs *pflag.FlagSet, keys map[string]string, w io.Writer) (*config.Loaded, error) {
	l, err := session.Load(config.Options{Workspace: workspace, Flags: fs, FlagKeys: keys})
	if err != nil {
		return nil, err
	}
	for _, warn := range l.Warnings {
		fmt.Fprintln(w, "paddock: warning:", warn)
	}
	return l, nil
}

// hostFlag registers --host on a command that talks to a daemon.
func hostFlag(fs *pflag.FlagSet, host *string) {
	fs.StringVar(host, "host", "", "the daemon: unix:///path/to/paddock.sock (default: $PADDOCK_HOST, else the default socket)")
}

// daemonHost is the daemon a command runs through: --host when it names a socket
// (unix://…; any other --host is the ssh transport's box), else $PADDOCK_HOST; "" runs
// embedded.
func daemonHost(fs *pflag.FlagSet) string {
	if f := fs.Lookup("host"); f != nil && strings.HasPrefix(f.Value.String(), "unix://") {
		return f.Value.String()
	}
	return os.Getenv(client.HostEnv)
}

// onDaemon is a command's run with a client of the daemon at host (--host, else
// PADDOCK_HOST, else the default socket), closed after.
func onDaemon(host *string, run func(cmd *cobra.Command, c *client.Client, args []string) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		c, err := front.Dial(*host)
		if err != nil {
			return err
		}
		defer c.Close()
		return run(cmd, c, args)
	}
}

// commandsOwn are the flags of the commands that run through a daemon which are not a
// session's options.
var commandsOwn = map[string]bool{"workspace": true, "json": true, "budget": true, "no-output-timeout": true, "children": true, "parallel": true,
	"listen": true, "session": true}

// hostedRequest turns a command line into a session request (client.OpenRequest) in
// workspace, made absolute (the daemon's directory is not ours): the flags given are its
// options, the commands' own and a daemon's --host aside.
func hostedRequest(fs *pflag.FlagSet, workspace string) (api.OpenRequest, error) {
	workspace, err := filepath.Abs(workspace)
	if err != nil {
		return api.OpenRequest{}, err
	}
	var opts []client.Option
	fs.Visit(func(f *pflag.Flag) {
		if commandsOwn[f.Name] || f.Name == "host" && strings.HasPrefix(f.Value.String(), "unix://") {
			return
		}
		o := client.Option{Name: f.Name, Values: []string{f.Value.String()}}
		if sv, ok := f.Value.(pflag.SliceValue); ok {
			o.Values = sv.GetSlice()
		}
		opts = append(opts, o)
	})
	return client.OpenRequest(workspace, opts...)
}

// where is where a command's session in workspace runs: in the daemon of --host or
// PADDOCK_HOST, else here with the settings bound to the flags in keys; notices and
// warnings on the command's stderr, and a synced workspace's hand-back.
func (f *transportFlags) where(cmd *cobra.Command, workspace string, keys map[string]string) front.Where {
	errOut := cmd.ErrOrStderr()
	return front.Where{
		Host:     daemonHost(cmd.Flags()),
		Options:  func() (session.Options, error) { return f.sessionOptions(cmd, workspace, keys) },
		Request:  func() (api.OpenRequest, error) { return hostedRequest(cmd.Flags(), workspace) },
		Notice:   tell(errOut),
		Handback: func(rep *api.Report) { showHandback(errOut, rep) },
	}
}

// tell is how a command tells what the user must know as it comes: a line on w.
func tell(w io.Writer) func(string) {
	return func(n string) { fmt.Fprintln(w, "paddock:", n) }
}
