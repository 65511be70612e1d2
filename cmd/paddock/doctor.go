package main

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/paddockhq/paddock/session"
)

func init() { commands = append(commands, newDoctorCmd) }

func newDoctorCmd() *cobra.Command {
	var (
		asJSON bool
		dir    string
	)
	cmd := &cobra.Command{
		Use:   "doctor [--json] [--dir DIR]",
		Short: "Report what this machine offers Paddock, and what to fix",
		Long: `Doctor checks what sandboxes this machine can run (the engines, each transport, reflinks for
isolated workspaces in DIR, the kernel binary) and says how to fix what is missing, a line
each. The exit status is 0 whatever it finds.`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			dir, err := workdir(dir)
			if err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), 30*time.Second)
			defer cancel()
			checks := session.Checks(ctx, dir)
			if asJSON {
				return printJSON(cmd.OutOrStdout(), checks)
			}
			for _, c := range checks {
				fmt.Fprint(cmd.OutOrStdout(), c)
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the checks as JSON")
	cmd.Flags().StringVar(&dir, "dir", "", "where isolated workspaces would be cloned (default: the current directory)")
	return cmd
}
