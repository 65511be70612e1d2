package main

import (
	"encoding/json"
	"fmt"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/paddockhq/paddock/daemon/api"
)

func init() { commands = append(commands, newConfigCmd) }

func newConfigCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "config",
		Short: "Show the effective settings",
	}
	var sf sessionFlags
	var asJSON bool
	show := &cobra.Command{
		Use:   "show [--workspace DIR] [--json] [--host unix://PATH] [flags]",
		Short: "Print every effective setting and where its value came from",
		Long: `Show prints every setting as a session in the workspace would have it, each with its source:
a flag, a PADDOCK_* variable, the global settings file, the project's .paddock/settings file
(a key it may not set is ignored with a warning), or the default. With a daemon's --host, what
the daemon's sessions would have, the flags given passed as run passes them.`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			dir, err := sf.workspace()
			if err != nil {
				return err
			}
			settings, err := sf.where(cmd, dir, api.OptionKeys()).Settings(cmd.Context())
			if err != nil {
				return err
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
	sf.register(show.Flags(), "the project whose settings apply", true)
	show.Flags().BoolVar(&asJSON, "json", false, "print a JSON list of {key, value, source}")
	cmd.AddCommand(show)
	return cmd
}
