package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
	"mvdan.cc/sh/v3/shell"

	"github.com/paddockhq/paddock/config"
	"github.com/paddockhq/paddock/daemon"
	"github.com/paddockhq/paddock/daemon/api"
	"github.com/paddockhq/paddock/place"
	"github.com/paddockhq/paddock/session"
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

// requestOptions reads a request as run reads its command line: its fields and its settings
// set the settings keys run's flags bind (runKeys, transportKeys), above every other source;
// the rest are the session's transport options.
func requestOptions(req api.OpenRequest) (config.Options, session.Transport, error) {
	o := config.Options{Workspace: req.Workspace, Set: map[string]any{}, SetBy: "request"}
	var t session.Transport
	keys := withKeys(runKeys, transportKeys)
	set := func(flag string, val any) {
		o.Set[keys[flag]] = val
		t.Given = append(t.Given, flag)
	}
	for flag, val := range map[string]string{"transport": req.Transport, "image": req.Image, "network": req.Network} {
		if val != "" {
			set(flag, val)
		}
	}
	if len(req.Env) > 0 {
		set("env", req.Env)
	}
	for _, m := range req.Mounts {
		pm, err := session.ParseMount(m)
		if err != nil {
			return o, t, err
		}
		t.Mounts = append(t.Mounts, pm)
		t.Given = append(t.Given, "mount")
	}
	if req.Wrap != "" {
		argv, err := shell.Fields(req.Wrap, func(string) string { return "" })
		if err != nil {
			return o, t, &usageError{msg: "wrap: " + err.Error()}
		}
		t.Wrap = argv
		t.Given = append(t.Given, "wrap")
	}
	flagOf := map[string]string{}
	for f, k := range keys {
		flagOf[strings.ToLower(k)] = f
	}
	for k, val := range req.Settings {
		f, ok := flagOf[strings.ToLower(k)]
		if !ok {
			return o, t, &usageError{msg: fmt.Sprintf("settings key %q cannot be set per session", k)}
		}
		if val != "" {
			set(f, val)
		}
	}
	return o, t, nil
}

// requestSettings answers /v1/settings: what a session opened with req would have of
// each setting, read as configureSession reads it.
func requestSettings(_ context.Context, req api.OpenRequest) (api.Settings, error) {
	o, _, err := requestOptions(req)
	if err == nil {
		var l *config.Loaded
		if l, err = loadOptions(o); err == nil {
			return api.Settings{Settings: effective(l), Warnings: l.Warnings}, nil
		}
	}
	if isUsage(err) {
		return api.Settings{}, daemon.BadRequest(err.Error())
	}
	return api.Settings{}, err
}

func configureSession(ctx context.Context, req api.OpenRequest) (daemon.Opened, error) {
	o, t, err := requestOptions(req)
	if err != nil {
		return daemon.Opened{}, err
	}
	l, err := loadOptions(o)
	if err != nil {
		return daemon.Opened{}, err
	}
	if req.BlockingBudget != "" {
		l.Settings.Shell.BlockingBudget = req.BlockingBudget
	}
	// A daemon's session keeps its audit file in its own state directory.
	p, err := session.Prepare(ctx, session.Options{Workspace: req.Workspace, Settings: l, Transport: t})
	if err != nil {
		return daemon.Opened{}, err
	}
	op := daemon.Opened{Config: p.Config, Transport: p.Kind, Finish: p.Finish}
	for _, w := range l.Warnings {
		op.Warnings = append(op.Warnings, "warning: "+w)
	}
	op.Warnings = append(op.Warnings, p.Notices...)
	if req.NoOutputTimeout != "" {
		d, err := config.ParseDuration(req.NoOutputTimeout)
		if err != nil || d < 0 {
			p.Finish(ctx)
			return daemon.Opened{}, &usageError{msg: fmt.Sprintf("noOutputTimeout %q: a duration such as 10m", req.NoOutputTimeout)}
		}
		op.NoOutputTimeout = d
	}
	return op, nil
}

// loadOptions reads the settings as loadSettings does, keeping the warnings in them.
func loadOptions(o config.Options) (*config.Loaded, error) {
	l, err := config.Load(o)
	if err != nil {
		return nil, &usageError{msg: err.Error(), err: err}
	}
	return l, nil
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
// reopen: its transport's provider removes what it left (its containers) and says what it
// found.
func recoverSession(ctx context.Context, s api.Session) string {
	return session.Recover(ctx, s.Transport, s.ID)
}

// reapAtStart removes the containers of host processes that died (a killed daemon's
// children, say), once the sessions it can take up again were: those wait while their state
// directory is there. An engine that does not answer is skipped.
func reapAtStart(ctx context.Context, log *slog.Logger) {
	for _, p := range session.Providers() {
		if n, err := p.Reap(ctx); err != nil {
			log.Warn("reaper", "engine", p.Kind(), "err", err)
		} else if n > 0 {
			log.Info("reaper removed the containers of host processes that died", "engine", p.Kind(), "count", n)
		}
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
