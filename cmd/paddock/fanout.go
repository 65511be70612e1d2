package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/paddockhq/paddock/fanout"
)

func init() { commands = append(commands, newFanoutCmd) }

func newFanoutCmd() *cobra.Command {
	var (
		sf          sessionFlags
		n, parallel int
		asJSON      bool
		stateDir    string
	)
	cmd := &cobra.Command{
		Use:   "fanout -n N [--workspace DIR] [--parallel K] [--json] [--host unix://PATH] -- SCRIPT",
		Short: "Run SCRIPT in N isolated children at once and merge each back as it ends",
		Long: `Fanout spawns N children of a session in the workspace, at most K at once, each in an
isolated workspace running SCRIPT with PADDOCK_CHILD_INDEX set (0 to N-1), and hands each back
as it ends: what only it changed is taken, a text file both changed is merged by lines as git
merge-file does, anything else both changed is a conflict, the child's version kept under its
conflicts/ directory. Exit status: 3 when a path conflicted, 1 when a child failed.`,
		Args: usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			if n < 1 {
				return usage("-n must be at least 1")
			}
			if parallel < 1 {
				parallel = n
			}
			dir, err := sf.workspace()
			if err != nil {
				return err
			}
			ctx, out, errOut := cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr()
			sp, err := sf.where(cmd, dir, transportKeys).Spawner(ctx, stateDir)
			if err != nil {
				return err
			}
			rep := fanout.Run(ctx, sp, fanout.Options{N: n, Parallel: parallel, Script: args[0],
				Ended: func(ended, n int, c fanout.Child) { fmt.Fprintf(errOut, "[%d/%d] %s\n", ended, n, c) },
				Warn:  func(w string) { fmt.Fprintf(errOut, "paddock: warning: %s (each child alike)\n", w) }})
			if asJSON {
				if err := printJSON(out, rep); err != nil {
					return err
				}
			} else {
				fmt.Fprintf(out, "%d children: %d failed, %d merged paths, %d conflicted paths\n", n, rep.Failed, rep.Merged, rep.Conflicts)
			}
			switch {
			case rep.Failed > 0:
				return outcome(exitError, fmt.Errorf("%d of %d children failed", rep.Failed, n))
			case rep.Conflicts > 0:
				return outcome(exitConflicts, fmt.Errorf("%d conflicted paths; each child's version is under its conflicts/ directory", rep.Conflicts))
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.IntVarP(&n, "children", "n", 0, "how many children")
	f.IntVar(&parallel, "parallel", 0, "how many children run at once (default: all)")
	sf.register(f, "the workspace the children clone", false)
	f.BoolVar(&asJSON, "json", false, "print the combined report as JSON")
	f.StringVar(&stateDir, "state-dir", "", "where the children's clones, conflicts and reports go (default: a new directory beside the workspace, on its filesystem, removed at the end unless a child conflicted)")
	return cmd
}
