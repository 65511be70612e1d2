package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/paddockhq/paddock/policy"
	"github.com/paddockhq/paddock/session"
)

func init() { commands = append(commands, newPolicyCmd) }

func newPolicyCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "policy",
		Short: "Show the decisions the host makes about shell steps",
		// An unknown subcommand is a usage error; the bare command shows the help.
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cmd.AddCommand(newPolicyCheckCmd())
	return cmd
}

func newPolicyCheckCmd() *cobra.Command {
	var (
		workspace string
		asJSON    bool
	)
	cmd := &cobra.Command{
		Use:   "check [--workspace DIR] [--auto-effects LIST] [--json] -- SCRIPT",
		Short: "Print each step of a script with its effects and whether it runs unasked",
		Long: `Check judges a script without running it, as paddock run would with nobody attached:
each step's words are expanded over this process's environment (less credentials) in the
current directory, each step gets its effects (read, write, exec, net, outside, protected,
secret), and the same settings as run's decide it: the shell rules (deny, ask, allow) and the
auto set (shell.autoEffects from the global settings, PADDOCK_SHELL_AUTOEFFECTS, or
--auto-effects). Its verdict is "run", "ask" (paddock run refuses it as unanswered when nobody
is attached) or "refuse" (a deny rule). A script outside the step grammar is one exec step.

The workspace root is the current directory unless --workspace names one. With --json the
result is one object: {"grammar": "steps"|"exec", "steps": [{"command", "effects", "asks",
"verdict", "rule"}], "effects": [...]}.`,
		Args: usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			wd, err := os.Getwd()
			if err != nil {
				return err
			}
			if workspace == "" {
				workspace = wd
			}
			root, err := filepath.Abs(workspace)
			if err != nil {
				return err
			}
			// The settings, rules and environment paddock run would judge the script with.
			l, err := loadSettings(root, cmd.Flags(), map[string]string{"auto-effects": "shell.autoEffects"}, cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			a, err := session.Judge(session.Options{Workspace: root, Settings: l, AuditFile: session.AuditFile()}, wd, args[0])
			if err != nil {
				return err
			}
			if asJSON {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetEscapeHTML(false)
				return enc.Encode(a)
			}
			_, err = fmt.Fprint(cmd.OutOrStdout(), a)
			return err
		},
	}
	cmd.Flags().StringVar(&workspace, "workspace", "", "the workspace root (default: the current directory)")
	cmd.Flags().String("auto-effects", policy.DefaultAutoSet().String(), "the effects a step may have and still run unasked, comma-separated (default: shell.autoEffects of the settings)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one JSON object")
	return cmd
}
