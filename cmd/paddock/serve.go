package main

import (
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/paddockhq/paddock/daemon"
	"github.com/paddockhq/paddock/internal/place"
	"github.com/paddockhq/paddock/internal/version"
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
			log := slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), nil))
			srv, err := daemon.New(daemon.Config{Open: daemon.OpenRequest, Recover: daemon.RecoverSession, Settings: daemon.RequestSettings,
				StateDir: state, Socket: sock, Drain: drain, Log: log})
			if err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return srv.Run(ctx)
		},
	}
	cmd.Flags().BoolVar(&drain, "drain", false, "on SIGTERM or Ctrl-C close every session, ending its kernel and jobs (default: leave them for the next daemon)")
	cmd.Flags().StringVar(&socket, "socket", daemon.DefaultSocket(), "the unix socket to listen on")
	cmd.Flags().StringVar(&state, "state", place.StateDir(), "where sessions' files are kept (0700)")
	return cmd
}

// buildVersion is the module version the binary was built from.
func buildVersion() string { return version.Module() }

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
