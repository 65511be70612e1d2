package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
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
		Long: `Doctor checks what sandboxes this machine can run and says how to fix what is missing:
the Docker engine (and so the default transport), containerd, a filesystem with reflinks for
isolated workspaces (in DIR, the current directory unless --dir names one), and the kernel
binary. Every check is a line: ok or fix, what was found, and the fix. The exit status is 0
whatever it finds; --json prints the checks as a JSON array.`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if dir == "" {
				wd, err := os.Getwd()
				if err != nil {
					return err
				}
				dir = wd
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), 30*time.Second)
			defer cancel()
			checks := session.Checks(ctx, dir)
			out := cmd.OutOrStdout()
			if asJSON {
				enc := json.NewEncoder(out)
				enc.SetIndent("", "  ")
				return enc.Encode(checks)
			}
			printChecks(out, checks)
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the checks as JSON")
	cmd.Flags().StringVar(&dir, "dir", "", "where isolated workspaces would be cloned (default: the current directory)")
	return cmd
}

func printChecks(w io.Writer, checks []session.Check) {
	for _, c := range checks {
		mark := "ok "
		if !c.OK {
			mark = "fix"
		}
		fmt.Fprintf(w, "%s  %-10s %s\n", mark, c.Name, c.Detail)
		if c.Fix != "" {
			fmt.Fprintf(w, "     %-10s %s\n", "", c.Fix)
		}
	}
}
