package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/paddockhq/paddock/orchestrator"
	"github.com/paddockhq/paddock/orchestrator/output"
	"github.com/paddockhq/paddock/prompt"
)

func init() { commands = append(commands, newRunCmd) }

// runKeys binds run's flags to settings keys.
var runKeys = map[string]string{
	"max-bytes":    "output.bytes",
	"max-lines":    "output.lines",
	"keep":         "output.mode",
	"auto-effects": "shell.autoEffects",
	"job-timeout":  "shell.jobTimeout",
}

// handedBack is a transport that hands a copied workspace back when its kernel ends.
type handedBack interface{ HandbackConflicts() int }

func newRunCmd() *cobra.Command {
	var (
		workspace string
		asJSON    bool
		tf        transportFlags
	)
	cmd := &cobra.Command{
		Use:   "run [--workspace DIR] [--json] [--host unix://PATH] -- SCRIPT",
		Short: "Run a shell script in a sandbox, step by step",
		Long: `Run opens a session in the workspace (the current directory unless --workspace names
one), runs the script through the session's kernel and prints each step's output as it comes,
then how the script ended. Each step is classified by the policy; a step outside the auto set
asks the terminal (when standard input is one) and is refused as unanswered otherwise. The exit
status is the script's (126 when a step was refused). With --host unix://PATH (or
PADDOCK_HOST) the session is opened in that daemon instead, with the same flags.`,
		Args: usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			if workspace == "" {
				wd, err := os.Getwd()
				if err != nil {
					return err
				}
				workspace = wd
			}
			out, errOut := cmd.OutOrStdout(), cmd.ErrOrStderr()
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			if host := daemonHost(cmd.Flags()); host != "" {
				return runHosted(ctx, cmd, host, workspace, args[0], asJSON)
			}
			l, err := loadSettings(workspace, cmd.Flags(), withKeys(runKeys, transportKeys), errOut)
			if err != nil {
				return err
			}
			if err := l.Settings.Output.Validate(); err != nil {
				return &usageError{msg: err.Error()}
			}
			pol, err := sessionPolicy(l)
			if err != nil {
				return err
			}
			timeout, err := jobTimeout(l)
			if err != nil {
				return err
			}
			cfg := orchestrator.Config{Workspace: workspace, Limit: l.Settings.Output.Limit, Policy: pol, JobTimeout: timeout}
			notice, err := tf.configure(ctx, &cfg, &l.Settings)
			if err != nil {
				return err
			}
			if notice != "" {
				fmt.Fprintln(errOut, "paddock:", notice)
			}
			s, err := orchestrator.Open(ctx, cfg)
			if err != nil {
				return err
			}
			defer s.Close()
			if !asJSON && term.IsTerminal(int(os.Stdin.Fd())) {
				t := prompt.New(os.Stdin, os.Stderr, s.Answer)
				defer s.Attach(t)()
				tctx, cancel := context.WithCancel(ctx)
				defer cancel()
				go t.Run(tctx)
			}
			call := orchestrator.Call{Script: args[0]}
			if !asJSON {
				call.Live = func(_, fd int, data []byte) {
					if fd == 2 {
						errOut.Write(data)
					} else {
						out.Write(data)
					}
				}
			}
			res, err := s.Run(ctx, call)
			if err != nil {
				return err
			}
			if asJSON {
				enc := json.NewEncoder(out)
				enc.SetIndent("", "  ")
				if err := enc.Encode(res); err != nil {
					return err
				}
			} else if res.End.Kind == orchestrator.Refused {
				fmt.Fprintln(errOut, "paddock:", strings.Trim(res.End.String(), "[]"))
			}
			if res.End.Status != 0 {
				return outcome(res.End.Status, nil)
			}
			// A workspace copied to a box comes back when the session closes; a hand-back
			// that conflicted is the run's outcome.
			if err := s.Close(); err != nil {
				return err
			}
			if hb, ok := cfg.Transport.(handedBack); ok && hb.HandbackConflicts() > 0 {
				return outcome(exitConflicts, fmt.Errorf("the workspace came back with conflicts: %d", hb.HandbackConflicts()))
			}
			return nil
		},
	}
	def := output.Default()
	f := cmd.Flags()
	f.StringVarP(&workspace, "workspace", "w", "", "the session's workspace and working directory (default: the current directory)")
	f.BoolVar(&asJSON, "json", false, "print the result as one JSON object instead of the output")
	f.Int("max-bytes", def.Bytes, "bytes of each step's output kept in the result (0: all)")
	f.Int("max-lines", def.Lines, "lines of each step's output kept in the result (0: all)")
	f.String("keep", def.Mode.String(), "which end of a long output the result keeps: head or tail")
	f.StringSlice("auto-effects", nil, "effects a step may have and still run unasked (default: every effect but secret)")
	f.String("job-timeout", "", "kill the script once it has run this long, e.g. 30m (default: shell.jobTimeout, none)")
	tf.register(f)
	return cmd
}
