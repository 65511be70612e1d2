package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/paddockhq/paddock/orchestrator"
	"github.com/paddockhq/paddock/policy"
	"github.com/paddockhq/paddock/script"
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
		auto      string
		asJSON    bool
	)
	cmd := &cobra.Command{
		Use:   "check [--workspace DIR] [--auto-effects LIST] [--json] -- SCRIPT",
		Short: "Print each step of a script with its effects and whether it runs unasked",
		Long: `Check judges a script without running it, as the bash tool would: each step's words are
expanded over this process's environment in the current directory, and each step gets its
effects (read, write, exec, net, outside, protected, secret) and "run" when every effect is in
the auto set, else "ask". A script outside the step grammar is one exec step.

The workspace root is the current directory unless --workspace names one. The auto set is
every effect but secret unless --auto-effects gives a comma-separated list (secret cannot be
in it). With --json the result is one object:
{"grammar": "steps"|"exec", "steps": [{"command", "effects", "asks"}], "effects": [...]}.`,
		Args: usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			set := policy.DefaultAutoSet()
			if cmd.Flags().Changed("auto-effects") {
				s, err := policy.ParseAutoSet(strings.Split(auto, ","))
				if err != nil {
					return &usageError{msg: "--auto-effects: " + err.Error()}
				}
				set = s
			}
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
			sc, err := script.Parse(args[0])
			if err != nil {
				return err
			}
			ctx := &policy.Context{Cwd: wd, Env: os.Environ(), Roots: []string{root}, Auto: set, Own: orchestrator.OwnPlaces(orchestrator.Config{})}
			a := policy.Check(ctx, sc)
			out := cmd.OutOrStdout()
			if asJSON {
				enc := json.NewEncoder(out)
				enc.SetEscapeHTML(false)
				return enc.Encode(a)
			}
			return printAnalysis(out, a)
		},
	}
	cmd.Flags().StringVar(&workspace, "workspace", "", "the workspace root (default: the current directory)")
	cmd.Flags().StringVar(&auto, "auto-effects", policy.DefaultAutoSet().String(), "the effects a step may have and still run unasked, comma-separated")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one JSON object")
	return cmd
}

// printAnalysis writes one line per step (run or ask, its effects, the step as it runs),
// then the union of the effects.
func printAnalysis(w interface{ Write([]byte) (int, error) }, a policy.Analysis) error {
	if a.Grammar == script.Exec {
		fmt.Fprintf(w, "grammar: exec (%s): the whole script is one step\n", a.Reason)
	} else {
		fmt.Fprintln(w, "grammar: steps")
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, s := range a.Steps {
		verdict := "run"
		if s.Asks {
			verdict = "ask"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", verdict, orNone(s.Effects.String()), s.Command)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "effects: %s\n", orNone(a.Effects.String()))
	return err
}

func orNone(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
