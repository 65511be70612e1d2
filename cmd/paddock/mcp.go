package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/paddockhq/paddock/client"
	"github.com/paddockhq/paddock/internal/sshfile"
	"github.com/paddockhq/paddock/internal/version"
	"github.com/paddockhq/paddock/mcpserver"
	"github.com/paddockhq/paddock/transport/ssh"
)

func init() { commands = append(commands, newMCPCmd) }

func newMCPCmd() *cobra.Command {
	var (
		sf              sessionFlags
		listen, session string
	)
	cmd := &cobra.Command{
		Use:   "mcp [--workspace DIR] [--listen unix://PATH|HOST:PORT] [transport flags]",
		Short: "Serve a sandbox session to an agent as an MCP server on standard input and output",
		Long: `Mcp opens a session as run does and serves it over the Model Context Protocol: the tools
bash, job_wait, job_kill, job_list, read, write, edit, glob, grep and ls, each decided by the
session's policy, a question going to the client as an elicitation. It serves standard input
and output until the client disconnects, or with --listen streamable HTTP until it is stopped;
with --host, a daemon's session. README.md's "Agents over MCP" tells the details.`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			dir, err := sf.workspace()
			if err != nil {
				return err
			}
			if err := mcpserver.CheckListen(listen); err != nil {
				return err
			}
			ctx, errOut := cmd.Context(), cmd.ErrOrStderr()
			o := mcpserver.Options{Name: "paddock", Version: version.Module()}
			if host := daemonHost(cmd.Flags()); host != "" {
				rs, done, err := hostedMCP(ctx, cmd, host, dir, session)
				if err != nil {
					return err
				}
				defer done()
				return mcpserver.New(rs, o).Serve(ctx, listen, errOut)
			}
			if session != "" {
				return usage("--session names a daemon's session: give --host unix://PATH too")
			}
			s, l, fin, err := openSession(ctx, cmd, dir, &sf.transportFlags)
			if err != nil {
				return err
			}
			defer fin()
			if hosts := l.Settings.SSH.Hosts; len(hosts) > 0 {
				pool := &ssh.Pool{}
				defer pool.Close()
				o.SSH = &sshfile.Reader{Hosts: hosts, Pool: pool}
			}
			if err := mcpserver.New(mcpserver.Local(s), o).Serve(ctx, listen, errOut); err != nil {
				return err
			}
			_, err = fin()
			return err
		},
	}
	f := cmd.Flags()
	sf.register(f, "the session's workspace and working directory", true)
	f.StringVar(&session, "session", "", "with --host: serve this session of the daemon's, already open, instead of opening one")
	f.StringVar(&listen, "listen", "", "serve streamable HTTP on unix://PATH or a loopback HOST:PORT (with a bearer token) instead of stdio")
	return cmd
}

// hostedMCP is the daemon's session an MCP server serves: the one named, or a new one opened
// with the command's flags (closed by done, its hand-back told on the command's stderr).
func hostedMCP(ctx context.Context, cmd *cobra.Command, host, dir, id string) (mcpserver.Session, func(), error) {
	errOut := cmd.ErrOrStderr()
	if id != "" {
		c, err := client.New(host)
		if err != nil {
			return nil, nil, err
		}
		s, err := c.Session(ctx, id)
		if err != nil {
			c.Close()
			return nil, nil, err
		}
		return mcpserver.Remote(c, s.ID, s.Cwd), c.Close, nil
	}
	req, err := hostedRequest(cmd.Flags(), dir)
	if err != nil {
		return nil, nil, err
	}
	c, s, err := openHosted(ctx, host, req, errOut)
	if err != nil {
		return nil, nil, err
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
