package main

import (
	"encoding/json"
	"fmt"
	"os"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/paddockhq/paddock/client"
	"github.com/paddockhq/paddock/daemon/api"
	"github.com/paddockhq/paddock/session"
)

func init() { commands = append(commands, newConfigCmd) }

func newConfigCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "config",
		Short: "Show the effective settings",
	}
	var workspace string
	var asJSON bool
	show := &cobra.Command{
		Use:   "show [--workspace DIR] [--json] [--host unix://PATH] [flags]",
		Short: "Print every effective setting and where its value came from",
		Long: `Show prints every setting as a session in the workspace (default: the current directory)
would have it, each with its source: a flag, a PADDOCK_* environment variable, the global
settings file, the project's .paddock/settings file, or the default. A key the project's file
may not set is ignored with a warning naming it. With --host unix://PATH (or PADDOCK_HOST) the
daemon there says what its sessions would have, the flags given passed as run passes them.`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if workspace == "" {
				wd, err := os.Getwd()
				if err != nil {
					return err
				}
				workspace = wd
			}
			var settings []api.Setting
			if host := daemonHost(cmd.Flags()); host != "" {
				// The daemon's settings are its own: its environment, its global file.
				req, err := hostedRequest(cmd.Flags(), workspace)
				if err != nil {
					return err
				}
				err = withDaemon(host, func(c *client.Client) error {
					got, err := c.Settings(cmd.Context(), req)
					for _, w := range got.Warnings {
						fmt.Fprintln(cmd.ErrOrStderr(), "paddock: warning:", w)
					}
					settings = got.Settings
					return err
				})
				if err != nil {
					return err
				}
			} else {
				l, err := loadSettings(workspace, cmd.Flags(), api.OptionKeys(), cmd.ErrOrStderr())
				if err != nil {
					return err
				}
				settings = session.Effective(l)
			}
			if asJSON {
				return printJSON(cmd.OutOrStdout(), settings)
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "KEY\tVALUE\tSOURCE")
			for _, e := range settings {
				b, _ := json.Marshal(e.Value)
				fmt.Fprintf(tw, "%s\t%s\t%s\n", e.Key, b, e.Source)
			}
			return tw.Flush()
		},
	}
	f := show.Flags()
	f.StringVarP(&workspace, "workspace", "w", "", "the project whose settings apply (default: the current directory)")
	f.BoolVar(&asJSON, "json", false, "print a JSON list of {key, value, source}")
	var tf transportFlags
	tf.register(f)
	registerRunFlags(f)
	cmd.AddCommand(show)
	return cmd
}
