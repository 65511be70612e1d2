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

	"github.com/paddockhq/paddock/daemon"
	"github.com/paddockhq/paddock/daemon/api"
	"github.com/paddockhq/paddock/internal/place"
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
			open := func(ctx context.Context, req api.OpenRequest, at daemon.Where) (daemon.Opened, error) {
				o, err := daemon.OpenRequest(ctx, req, at)
				own := &o.Config.Policy.Own
				own.Secret = append(own.Secret, place.Daemon(state)...)
				own.Sockets = append(own.Sockets, socket)
				return o, err
			}
			srv, err := daemon.New(daemon.Config{Open: open, Recover: daemon.RecoverSession, Settings: daemon.RequestSettings, StateDir: state, Version: buildVersion(), Log: log})
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
