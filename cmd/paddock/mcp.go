package main

import (
	"fmt"
	"os"
	"os/signal"
	"sync"
	"syscall"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spf13/cobra"

	"github.com/paddockhq/paddock/mcpserver"
	"github.com/paddockhq/paddock/orchestrator"
	"github.com/paddockhq/paddock/workspace"
)

func init() { commands = append(commands, newMCPCmd) }

func newMCPCmd() *cobra.Command {
	var (
		dir string
		tf  transportFlags
	)
	cmd := &cobra.Command{
		Use:   "mcp [--workspace DIR] [transport flags]",
		Short: "Serve a sandbox session to an agent as an MCP server on standard input and output",
		Long: `Mcp opens a session as run does (the same workspace, transport, image, pool, limits and
settings) and serves it over the Model Context Protocol on standard input and output for the
life of the connection: the tools bash (one shell: cd and exports persist), job_wait,
job_kill, job_list, read, write, edit, glob, grep and ls. Every step and file access is
decided by the session's policy; a question goes to the client as an elicitation request, or
is refused when the client cannot elicit. Diagnostics go to standard error. The session
closes, and a synced workspace comes back, when the client disconnects.`,
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
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			l, err := loadSettings(dir, cmd.Flags(), withKeys(runKeys, transportKeys), errOut)
			if err != nil {
				return err
			}
			p, err := tf.prepare(ctx, dir, l)
			if err != nil {
				return err
			}
			for _, n := range p.Notices {
				fmt.Fprintln(errOut, "paddock:", n)
			}
			s, err := orchestrator.Open(ctx, p.Config)
			if err != nil {
				p.Finish(ctx)
				return err
			}
			fin := sync.OnceValues(func() (*workspace.Report, error) { return finish(s, p, errOut) })
			defer fin()
			srv := mcpserver.New(s, mcpserver.Options{Name: "paddock", Version: buildVersion()})
			if err := srv.Run(ctx, &mcp.StdioTransport{}); err != nil && ctx.Err() == nil {
				return err
			}
			_, err = fin()
			return err
		},
	}
	f := cmd.Flags()
	f.StringVarP(&dir, "workspace", "w", "", "the session's workspace and working directory (default: the current directory)")
	registerRunFlags(f)
	tf.register(f)
	return cmd
}
