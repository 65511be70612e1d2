package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/paddockhq/paddock/fanout"
	"github.com/paddockhq/paddock/workspace"
)

func init() { commands = append(commands, newFanoutCmd) }

func newFanoutCmd() *cobra.Command {
	var (
		workspaceDir string
		n, parallel  int
		asJSON       bool
		stateDir     string
		tf           transportFlags
	)
	cmd := &cobra.Command{
		Use:   "fanout -n N [--workspace DIR] [--parallel K] [--json] [--host unix://PATH] -- SCRIPT",
		Short: "Run SCRIPT in N isolated children at once and merge each back as it ends",
		Long: `Fanout opens a session in the workspace and spawns N children, at most K at once, each
in an isolated workspace (btrfs snapshots of a workspace that is a subvolume, else a
reflink clone) running SCRIPT with PADDOCK_CHILD_INDEX set to its index (0 to N-1). Each
child is handed back as it ends: paths only it changed are taken; a text file the workspace
changed meanwhile is merged by lines as git merge-file does; any other path the workspace
changed, or lines that conflict, is a conflict, the child's version (and the marked merge)
kept under its conflicts/ directory. Exit status: 0 when every child finished with status 0
and nothing conflicted, 3 when a path conflicted, 1 when a child failed.
With --host unix://PATH (or PADDOCK_HOST) the children are a daemon's: its session is opened
in the workspace, each child spawned, run and closed through its API.`,
		Args: usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			if n < 1 {
				return &usageError{msg: "-n must be at least 1"}
			}
			if parallel < 1 {
				parallel = n
			}
			if workspaceDir == "" {
				wd, err := os.Getwd()
				if err != nil {
					return err
				}
				workspaceDir = wd
			}
			out, errOut := cmd.OutOrStdout(), cmd.ErrOrStderr()
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			var sp fanout.Spawner
			var err error
			if host := daemonHost(cmd.Flags()); host != "" {
				if stateDir != "" {
					return &usageError{msg: "--state-dir cannot be used with a daemon: its children's clones are in its state directory"}
				}
				sp, err = fanoutHosted(ctx, cmd, host, workspaceDir)
			} else {
				sp, err = fanoutEmbedded(ctx, cmd, workspaceDir, stateDir, &tf)
			}
			if err != nil {
				return err
			}
			rep := fanout.Run(ctx, sp, fanout.Options{N: n, Parallel: parallel, Script: args[0],
				Ended: func(ended, n int, c fanout.Child) { progress(errOut, ended, n, c) },
				Warn:  func(w string) { fmt.Fprintf(errOut, "paddock: warning: %s (each child alike)\n", w) }})
			if asJSON {
				enc := json.NewEncoder(out)
				enc.SetIndent("", "  ")
				if err := enc.Encode(rep); err != nil {
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
	f.StringVarP(&workspaceDir, "workspace", "w", "", "the workspace the children clone (default: the current directory)")
	f.BoolVar(&asJSON, "json", false, "print the combined report as JSON")
	f.StringVar(&stateDir, "state-dir", "", "where the children's clones, conflicts and reports go (default: a new directory beside the workspace, on its filesystem, removed at the end unless a child conflicted)")
	tf.register(f)
	return cmd
}

// fanoutEmbedded runs the children in this process (fanout.Open), in a session opened as
// run opens one.
func fanoutEmbedded(ctx context.Context, cmd *cobra.Command, workspaceDir, stateDir string, tf *transportFlags) (fanout.Spawner, error) {
	l, err := loadSettings(workspaceDir, cmd.Flags(), transportKeys, cmd.ErrOrStderr())
	if err != nil {
		return nil, err
	}
	o, err := tf.sessionOptions(workspaceDir, l)
	if err != nil {
		return nil, err
	}
	return fanout.Open(ctx, o, stateDir, func(rep *workspace.Report, err error) {
		showHandback(cmd.ErrOrStderr(), rep.API()) // the root's workspace, synced to a box
		if err != nil {
			fmt.Fprintln(cmd.ErrOrStderr(), "paddock:", err)
		}
	})
}

// fanoutHosted runs the children in a session of the daemon at host (fanout.Hosted).
func fanoutHosted(ctx context.Context, cmd *cobra.Command, host, workspaceDir string) (fanout.Spawner, error) {
	workspaceDir, err := filepath.Abs(workspaceDir) // the daemon's directory is not ours
	if err != nil {
		return nil, err
	}
	req, err := hostedRequest(cmd.Flags(), workspaceDir)
	if err != nil {
		return nil, err
	}
	c, err := dial(host)
	if err != nil {
		return nil, err
	}
	root, err := c.Open(ctx, req)
	if err != nil {
		c.Close()
		return nil, err
	}
	for _, w := range root.Warnings {
		fmt.Fprintln(cmd.ErrOrStderr(), "paddock:", w)
	}
	return fanout.Hosted(c, root), nil
}

// progress writes one line as a child ends.
func progress(w io.Writer, ended, n int, c fanout.Child) {
	fmt.Fprintf(w, "[%d/%d] %s %s (status %d): %d taken, %d merged, %d conflicts\n", ended, n, c.Name, c.End, c.Status, len(c.Taken), len(c.Merged), len(c.Conflicts))
	if len(c.Conflicts) > 0 && c.Dir != "" {
		fmt.Fprintf(w, "  %s's versions of the conflicted paths are in %s\n", c.Name, filepath.Join(c.Dir, "conflicts"))
	}
}
