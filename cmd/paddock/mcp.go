package main

import (
	"github.com/spf13/cobra"

	"github.com/paddockhq/paddock/daemon/api"
	"github.com/paddockhq/paddock/internal/version"
	"github.com/paddockhq/paddock/mcpserver"
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
			sv, err := sf.where(cmd, dir, api.OptionKeys()).MCP(cmd.Context(), session)
			if err != nil {
				return err
			}
			defer sv.Close()
			o := mcpserver.Options{Name: "paddock", Version: version.Module(), SSH: sv.SSH}
			if err := mcpserver.New(sv.Session, o).Serve(cmd.Context(), listen, cmd.ErrOrStderr()); err != nil {
				return err
			}
			return sv.Close()
		},
	}
	f := cmd.Flags()
	sf.register(f, "the session's workspace and working directory", true)
	f.StringVar(&session, "session", "", "with --host: serve this session of the daemon's, already open, instead of opening one")
	f.StringVar(&listen, "listen", "", "serve streamable HTTP on unix://PATH or a loopback HOST:PORT (with a bearer token) instead of stdio")
	return cmd
}
