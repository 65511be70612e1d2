package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/paddockhq/paddock/orchestrator"
	"github.com/paddockhq/paddock/orchestrator/output"
)

func init() { commands = append(commands, newRunCmd) }

func newRunCmd() *cobra.Command {
	var (
		workspace string
		asJSON    bool
		limit     = output.Default()
		mode      = limit.Mode
		tf        transportFlags
	)
	cmd := &cobra.Command{
		Use:   "run [--workspace DIR] [--json] -- SCRIPT",
		Short: "Run a shell script in a sandbox, step by step",
		Long: `Run opens a session in the workspace (the current directory unless --workspace names
one), runs the script through the session's kernel and prints each step's output as it comes,
then how the script ended. The exit status is the script's.`,
		Args: usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			if workspace == "" {
				wd, err := os.Getwd()
				if err != nil {
					return err
				}
				workspace = wd
			}
			limit.Mode = mode
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			out, errOut := cmd.OutOrStdout(), cmd.ErrOrStderr()
			cfg := orchestrator.Config{Workspace: workspace, Limit: limit}
			notice, err := tf.configure(ctx, &cfg)
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
				return &codeError{code: res.End.Status}
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVarP(&workspace, "workspace", "w", "", "the session's workspace and working directory (default: the current directory)")
	f.BoolVar(&asJSON, "json", false, "print the result as one JSON object instead of the output")
	f.IntVar(&limit.Bytes, "max-bytes", limit.Bytes, "bytes of each step's output kept in the result (0: all)")
	f.IntVar(&limit.Lines, "max-lines", limit.Lines, "lines of each step's output kept in the result (0: all)")
	f.TextVar(&mode, "keep", mode, "which end of a long output the result keeps: head or tail")
	tf.register(f)
	return cmd
}
