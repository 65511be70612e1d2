package main

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spf13/cobra"

	"github.com/paddockhq/paddock/client"
	"github.com/paddockhq/paddock/daemon"
	"github.com/paddockhq/paddock/errdefs"
	"github.com/paddockhq/paddock/internal/sshfile"
	"github.com/paddockhq/paddock/mcpserver"
	"github.com/paddockhq/paddock/transport/ssh"
)

func init() { commands = append(commands, newMCPCmd) }

func newMCPCmd() *cobra.Command {
	var (
		dir     string
		listen  string
		session string
		tf      transportFlags
	)
	cmd := &cobra.Command{
		Use:   "mcp [--workspace DIR] [--listen unix://PATH|HOST:PORT] [transport flags]",
		Short: "Serve a sandbox session to an agent as an MCP server on standard input and output",
		Long: `Mcp opens a session as run does (the same workspace, transport, image, pool, limits and
settings) and serves it over the Model Context Protocol on standard input and output for the
life of the connection: the tools bash (one shell: cd and exports persist), job_wait,
job_kill, job_list, read, write, edit, glob, grep and ls. Every step and file access is
decided by the session's policy; a question goes to the client as an elicitation request, or
is refused when the client cannot elicit. Diagnostics go to standard error. The session
closes, and a synced workspace comes back, when the client disconnects.

With --listen it serves streamable HTTP instead, until it is stopped: on a unix socket
(unix://PATH, 0600, peers of your uid only, in a directory of yours as the daemon's), or on a
loopback address (HOST:PORT, 127.0.0.1:0 for any port) where every request must carry
"Authorization: Bearer TOKEN" (PADDOCK_MCP_TOKEN, else a token made and printed on standard
error). Any other address is refused.

With --host unix://PATH (or PADDOCK_HOST) the session is the daemon's: a new one opened there
with the same flags and closed when the server stops, or, with --session ID, one already open
there, left open. The tools are the same; bash keeps a shell of its own in the daemon.`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if dir == "" {
				wd, err := os.Getwd()
				if err != nil {
					return err
				}
				dir = wd
			}
			errOut := cmd.ErrOrStderr()
			if err := checkListen(listen); err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			o := mcpserver.Options{Name: "paddock", Version: buildVersion()}
			if host := daemonHost(cmd.Flags()); host != "" {
				rs, done, err := hostedMCP(ctx, cmd, host, dir, session)
				if err != nil {
					return err
				}
				defer done()
				return runMCP(ctx, mcpserver.New(rs, o), listen, errOut)
			}
			if session != "" {
				return &usageError{msg: "--session names a daemon's session: give --host unix://PATH too"}
			}
			s, l, fin, err := openSession(ctx, cmd, dir, &tf, errOut)
			if err != nil {
				return err
			}
			defer fin()
			if hosts := l.Settings.SSH.Hosts; len(hosts) > 0 {
				pool := &ssh.Pool{}
				defer pool.Close()
				o.SSH = &sshfile.Reader{Hosts: hosts, Pool: pool}
			}
			if err := runMCP(ctx, mcpserver.New(mcpserver.Local(s), o), listen, errOut); err != nil {
				return err
			}
			_, err = fin()
			return err
		},
	}
	f := cmd.Flags()
	f.StringVarP(&dir, "workspace", "w", "", "the session's workspace and working directory (default: the current directory)")
	f.StringVar(&session, "session", "", "with --host: serve this session of the daemon's, already open, instead of opening one")
	f.StringVar(&listen, "listen", "", "serve streamable HTTP on unix://PATH or a loopback HOST:PORT (with a bearer token) instead of stdio")
	registerRunFlags(f)
	tf.register(f)
	return cmd
}

// runMCP serves srv on stdio, or on listen, until the client leaves or ctx ends.
func runMCP(ctx context.Context, srv *mcpserver.Server, listen string, errOut io.Writer) error {
	var err error
	if listen != "" {
		err = serveMCP(ctx, srv, listen, errOut)
	} else {
		err = srv.Run(ctx, &mcp.StdioTransport{})
	}
	if err != nil && ctx.Err() == nil {
		return err
	}
	return nil
}

// hostedMCP is the daemon's session an MCP server serves: the one named, or a new one opened
// with the command's flags (closed by done, its warnings and hand-back told on errOut).
func hostedMCP(ctx context.Context, cmd *cobra.Command, host, dir, id string) (mcpserver.Session, func(), error) {
	errOut := cmd.ErrOrStderr()
	c, err := client.New(host)
	if err != nil {
		return nil, nil, err
	}
	if id != "" {
		s, err := c.Session(ctx, id)
		if err != nil {
			c.Close()
			return nil, nil, err
		}
		return mcpserver.Remote(c, s.ID, s.Cwd), c.Close, nil
	}
	ws, err := filepath.Abs(dir) // the daemon's directory is not ours
	if err != nil {
		c.Close()
		return nil, nil, err
	}
	req, err := hostedRequest(cmd.Flags(), ws)
	if err != nil {
		c.Close()
		return nil, nil, err
	}
	s, err := c.Open(ctx, req)
	if err != nil {
		c.Close()
		return nil, nil, err
	}
	for _, w := range s.Warnings {
		fmt.Fprintln(errOut, "paddock:", w)
	}
	done := func() {
		defer c.Close()
		ended, err := c.CloseSession(context.Background(), s.ID)
		if err != nil {
			fmt.Fprintln(errOut, "paddock:", err)
			return
		}
		showHandback(errOut, ended.Handback)
	}
	return mcpserver.Remote(c, s.ID, s.Cwd), done, nil
}

// mcpEndpoint is the path streamable HTTP is served at.
const mcpEndpoint = "/mcp"

// serveMCP serves srv over streamable HTTP at listen until ctx ends: a unix socket (the
// daemon's checks: a directory of the user's, 0600, peers of the same uid), or a loopback
// address where every request carries the bearer token.
func serveMCP(ctx context.Context, srv *mcpserver.Server, listen string, errOut io.Writer) error {
	defer srv.Close()
	var l net.Listener
	h := srv.Handler()
	if path, ok := strings.CutPrefix(listen, "unix://"); ok {
		var err error
		if l, err = daemon.Listen(path, nil); err != nil {
			return err
		}
		fmt.Fprintf(errOut, "paddock: serving MCP on unix://%s (path %s)\n", path, mcpEndpoint)
	} else {
		token := os.Getenv("PADDOCK_MCP_TOKEN")
		if token == "" {
			var b [32]byte
			if _, err := rand.Read(b[:]); err != nil {
				return err
			}
			token = hex.EncodeToString(b[:])
			fmt.Fprintf(errOut, "paddock: MCP bearer token: %s\n", token)
		}
		var err error
		if l, err = net.Listen("tcp", listen); err != nil {
			return err
		}
		h = bearer(token, h)
		fmt.Fprintf(errOut, "paddock: serving MCP on http://%s%s\n", l.Addr(), mcpEndpoint)
	}
	mux := http.NewServeMux()
	mux.Handle(mcpEndpoint, h)
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		hs.Close()
	}()
	if err := hs.Serve(l); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// checkListen refuses a --listen that is neither a unix socket nor a loopback address, before
// anything is opened.
func checkListen(listen string) error {
	if listen == "" || strings.HasPrefix(listen, "unix://") {
		return nil
	}
	host, _, err := net.SplitHostPort(listen)
	if err != nil {
		return errdefs.New(errdefs.InvalidArgument, "bad_listen", fmt.Sprintf("--listen %q: unix://PATH or HOST:PORT", listen))
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return errdefs.New(errdefs.InvalidArgument, "bad_listen", fmt.Sprintf("--listen %q: only a loopback address or a unix socket is served", listen))
	}
	return nil
}

// bearer lets through only the requests that carry the token (compared in constant time).
func bearer(token string, h http.Handler) http.Handler {
	want := []byte("Bearer " + token)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if subtle.ConstantTimeCompare([]byte(r.Header.Get("Authorization")), want) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="paddock"`)
			http.Error(w, "a bearer token is needed", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	})
}
