package main

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/paddockhq/paddock/config"
	"github.com/paddockhq/paddock/daemon"
	"github.com/paddockhq/paddock/daemon/api"
	"github.com/paddockhq/paddock/orchestrator"
	"github.com/paddockhq/paddock/orchestrator/output"
	"github.com/paddockhq/paddock/place"
	"github.com/paddockhq/paddock/transport/containerd"
	"github.com/paddockhq/paddock/transport/docker"
)

func init() { commands = append(commands, newServeCmd) }

func newServeCmd() *cobra.Command {
	var socket, state string
	var drain bool
	cmd := &cobra.Command{
		Use:   "serve [--socket PATH] [--state DIR] [--drain]",
		Short: "Serve sessions over HTTP/JSON on a private unix socket",
		Long: `Serve runs the daemon: sessions, the bash tool, file access, children, answers, jobs and
an event stream per session, over HTTP/JSON on a unix socket (default
$TMPDIR/paddock-<uid>/paddock.sock). The socket's directory must be a real directory owned by
you with no group or other write (a missing one is made 0700); the socket is 0600, and a peer
of any other uid is refused. Each session is opened with the settings of its workspace, as
"paddock run" would; the API's document is at /openapi.json, metrics at /metrics.`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			sock, err := socketPath(socket)
			if err != nil {
				return err
			}
			socket = sock
			log := slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), nil))
			// Every session is kept from this daemon's own state and socket, wherever they are.
			open := func(ctx context.Context, req api.OpenRequest) (daemon.Opened, error) {
				o, err := openSession(ctx, req)
				own := &o.Config.Policy.Own
				own.Secret = append(own.Secret, place.Daemon(state)...)
				own.Sockets = append(own.Sockets, socket)
				return o, err
			}
			srv, err := daemon.New(daemon.Config{Open: open, Recover: recoverSession, Settings: requestSettings, StateDir: state, Version: buildVersion(), Log: log})
			if err != nil {
				return err
			}
			reapAtStart(cmd.Context(), log)
			l, err := daemon.Listen(socket, log)
			if err != nil {
				srv.Leave() // the sessions taken up stay for a daemon that can listen
				return err
			}
			log.Info("serving", "socket", "unix://"+socket, "state", state, "pid", os.Getpid())
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			done := make(chan error, 1)
			go func() { done <- srv.Serve(l) }()
			select {
			case <-ctx.Done():
			case err := <-done:
				srv.Leave()
				return err
			}
			if !drain {
				log.Info("stopping: the sessions are left for the next daemon on this state directory")
				srv.Leave()
				err = <-done
				os.Remove(socket)
				return err
			}
			log.Info("stopping: closing every session (--drain)")
			err = srv.Close()
			if serr := <-done; err == nil {
				err = serr
			}
			os.Remove(socket)
			return err
		},
	}
	cmd.Flags().BoolVar(&drain, "drain", false, "on SIGTERM or Ctrl-C close every session, ending its kernel and jobs (default: leave them for the next daemon)")
	cmd.Flags().StringVar(&socket, "socket", daemon.DefaultSocket(), "the unix socket to listen on")
	cmd.Flags().StringVar(&state, "state", place.StateDir(), "where sessions' files are kept (0700)")
	return cmd
}

// openSession turns an API request into a session's configuration the way "paddock run"
// reads its command line: the request's fields are its flags, over the settings of the
// request's workspace (flags, PADDOCK_* environment, global file, the project's file). A
// request the command line would refuse as a usage error is a bad request.
func openSession(ctx context.Context, req api.OpenRequest) (daemon.Opened, error) {
	o, err := configureSession(ctx, req)
	if err != nil && isUsage(err) {
		return o, daemon.BadRequest(err.Error())
	}
	return o, err
}

// requestFlags reads a request as the flags of a command line: its fields and its settings
// set the flags they name, which bind the settings keys as run's do.
func requestFlags(req api.OpenRequest) (*pflag.FlagSet, *transportFlags, map[string]string, error) {
	fs := pflag.NewFlagSet("open", pflag.ContinueOnError)
	tf := &transportFlags{}
	tf.register(fs)
	registerRunSettings(fs)
	set := func(name, val string) error {
		if val == "" {
			return nil
		}
		if err := fs.Set(name, val); err != nil {
			return &usageError{msg: fmt.Sprintf("%s: %v", name, err)}
		}
		return nil
	}
	for name, val := range map[string]string{"transport": req.Transport, "image": req.Image, "network": req.Network, "wrap": req.Wrap} {
		if err := set(name, val); err != nil {
			return nil, nil, nil, err
		}
	}
	for _, e := range req.Env {
		if err := set("env", e); err != nil {
			return nil, nil, nil, err
		}
	}
	for _, m := range req.Mounts {
		if err := set("mount", m); err != nil {
			return nil, nil, nil, err
		}
	}
	keys := withKeys(runKeys, transportKeys)
	flagOf := map[string]string{}
	for f, k := range keys {
		flagOf[strings.ToLower(k)] = f
	}
	for k, val := range req.Settings {
		f, ok := flagOf[strings.ToLower(k)]
		if !ok {
			return nil, nil, nil, &usageError{msg: fmt.Sprintf("settings key %q cannot be set per session", k)}
		}
		if err := set(f, val); err != nil {
			return nil, nil, nil, err
		}
	}
	return fs, tf, keys, nil
}

// requestSettings answers /v1/settings: what a session opened with req would have of
// each setting, read as configureSession reads it.
func requestSettings(_ context.Context, req api.OpenRequest) (api.Settings, error) {
	fs, _, keys, err := requestFlags(req)
	if err == nil {
		var warn bytes.Buffer
		var l *config.Loaded
		if l, err = loadSettings(req.Workspace, fs, keys, &warn); err == nil {
			return api.Settings{Settings: effective(l), Warnings: l.Warnings}, nil
		}
	}
	if isUsage(err) {
		return api.Settings{}, daemon.BadRequest(err.Error())
	}
	return api.Settings{}, err
}

func configureSession(ctx context.Context, req api.OpenRequest) (daemon.Opened, error) {
	fs, tf, keys, err := requestFlags(req)
	if err != nil {
		return daemon.Opened{}, err
	}
	var warn bytes.Buffer
	l, err := loadSettings(req.Workspace, fs, keys, &warn)
	if err != nil {
		return daemon.Opened{}, err
	}
	if err := l.Settings.Output.Validate(); err != nil {
		return daemon.Opened{}, &usageError{msg: err.Error()}
	}
	pol, err := sessionPolicy(l)
	if err != nil {
		return daemon.Opened{}, err
	}
	pol.AuditFile = "" // a daemon's session keeps its audit file in its own state directory
	budget := l.Settings.Shell.BlockingBudget
	if req.BlockingBudget != "" {
		budget = req.BlockingBudget
	}
	timeout, err := jobTimeout(l)
	if err != nil {
		return daemon.Opened{}, err
	}
	o := daemon.Opened{Config: orchestrator.Config{Workspace: req.Workspace, Limit: l.Settings.Output.Limit, Policy: pol,
		JobTimeout: timeout, ArtifactBytes: l.Settings.Output.ArtifactBytes}}
	if budget != "" {
		d, err := daemon.ParseDuration(budget)
		if err != nil {
			return daemon.Opened{}, &usageError{msg: "shell.blockingBudget: " + err.Error()}
		}
		o.Config.Budget = d
	}
	if req.NoOutputTimeout != "" {
		d, err := daemon.ParseDuration(req.NoOutputTimeout)
		if err != nil || d < 0 {
			return daemon.Opened{}, &usageError{msg: fmt.Sprintf("noOutputTimeout %q: a duration such as 10m", req.NoOutputTimeout)}
		}
		o.NoOutputTimeout = d
	}
	notice, err := tf.configure(ctx, &o.Config, &l.Settings)
	if err != nil {
		return daemon.Opened{}, err
	}
	o.Transport = transportKind(o.Config.Transport)
	if t, ok := o.Config.Transport.(*docker.Transport); ok && t.Client != nil {
		o.Release = func() { t.Client.Close() } // each session connects its own client
	}
	for _, line := range strings.Split(strings.TrimSpace(warn.String()+"\n"+notice), "\n") {
		if line = strings.TrimSpace(strings.TrimPrefix(line, "paddock:")); line != "" {
			o.Warnings = append(o.Warnings, line)
		}
	}
	return o, nil
}

// registerRunSettings registers run's settings flags (runKeys) on a session's flag set.
func registerRunSettings(fs *pflag.FlagSet) {
	def := output.Default()
	fs.Int("max-bytes", def.Bytes, "")
	fs.Int("max-lines", def.Lines, "")
	fs.String("keep", def.Mode.String(), "")
	fs.StringSlice("auto-effects", nil, "")
	fs.String("job-timeout", "", "")
}

// transportKind names a transport by its package: docker, local, wrapped, ssh.
func transportKind(t any) string {
	name := strings.TrimPrefix(fmt.Sprintf("%T", t), "*")
	name, _, _ = strings.Cut(name, ".")
	return name
}

// buildVersion is the module version the binary was built from.
func buildVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
		return bi.Main.Version
	}
	return "(devel)"
}

// versionText is what --version prints: the module version, the commit the binary was
// built from (+dirty when the tree had changes) and the Go version.
func versionText() string {
	v := buildVersion()
	commit, dirty := "unknown", false
	goVersion := ""
	if bi, ok := debug.ReadBuildInfo(); ok {
		goVersion = bi.GoVersion
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				commit = s.Value
			case "vcs.modified":
				dirty = s.Value == "true"
			}
		}
	}
	if len(commit) > 12 {
		commit = commit[:12]
	}
	if dirty {
		commit += "+dirty"
	}
	return fmt.Sprintf("%s (commit %s, %s)", v, commit, goVersion)
}

// recoverSession cleans up after a session a killed daemon left and the new one could not
// reopen: a container session's containers are removed, and the reason says what was found.
func recoverSession(ctx context.Context, s api.Session) string {
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var find func() ([]string, error)
	var remove func() (int, error)
	switch s.Transport {
	case "docker":
		cli, err := docker.Connect(cctx)
		if err != nil {
			return fmt.Sprintf("its docker sandbox cannot be checked: %v", oneLine(err))
		}
		defer cli.Close()
		find = func() ([]string, error) { return docker.SessionContainers(cctx, cli, s.ID) }
		remove = func() (int, error) { return docker.RemoveSession(cctx, cli, s.ID) }
	case "containerd":
		cli, err := containerd.Connect(cctx, os.Getenv("PADDOCK_CONTAINERD_ADDRESS"))
		if err != nil {
			return fmt.Sprintf("its containerd sandbox cannot be checked: %v", oneLine(err))
		}
		defer cli.Close()
		find = func() ([]string, error) { return containerd.SessionContainers(cctx, cli, s.ID) }
		remove = func() (int, error) { return containerd.RemoveSession(cctx, cli, s.ID) }
	default:
		return ""
	}
	ids, err := find()
	if err != nil {
		return fmt.Sprintf("its %s sandbox cannot be checked: %v", s.Transport, oneLine(err))
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

// reapAtStart removes the containers of host processes that died (a killed daemon's
// children, say), once the sessions it can take up again were: those wait while their state
// directory is there. An engine that does not answer is skipped.
func reapAtStart(ctx context.Context, log *slog.Logger) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if cli, err := docker.Connect(ctx); err == nil {
		if n, err := docker.Reap(ctx, cli); err != nil {
			log.Warn("reaper", "engine", "docker", "err", err)
		} else if n > 0 {
			log.Info("reaper removed the containers of host processes that died", "engine", "docker", "count", n)
		}
		cli.Close()
	}
	if cli, err := containerd.Connect(ctx, os.Getenv("PADDOCK_CONTAINERD_ADDRESS")); err == nil {
		if n, err := containerd.Reap(ctx, cli); err != nil {
			log.Warn("reaper", "engine", "containerd", "err", err)
		} else if n > 0 {
			log.Info("reaper removed the containers of host processes that died", "engine", "containerd", "count", n)
		}
		cli.Close()
	}
}

// socketPath is the path --socket names: a path, or unix://PATH. The daemon serves only a
// unix socket, whose directory and peers it can check; any other address (tcp://…) is
// refused, not taken for a directory named "tcp:".
func socketPath(s string) (string, error) {
	if p, ok := strings.CutPrefix(s, "unix://"); ok {
		s = p
	} else if scheme, _, ok := strings.Cut(s, "://"); ok {
		return "", &usageError{msg: fmt.Sprintf("--socket %s: the daemon listens on a unix socket only (a path, or unix://PATH), not %s://", s, scheme)}
	}
	if s == "" || !filepath.IsAbs(s) {
		abs, err := filepath.Abs(s)
		if err != nil || s == "" {
			return "", &usageError{msg: fmt.Sprintf("--socket %q: a unix socket's path", s)}
		}
		s = abs
	}
	return s, nil
}
