package main

import (
	"fmt"
	"io"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/paddockhq/paddock/workspace"
)

func init() { commands = append(commands, newWorkspaceCmd) }

func newWorkspaceCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "workspace",
		Short: "Make isolated workspaces (reflink clones) and hand them back path by path",
	}
	c.AddCommand(newWorkspaceListCmd(), newWorkspaceCloneCmd(), newWorkspaceHandbackCmd())
	return c
}

// kindMark follows an entry's path in a listing, as ls -F marks it.
var kindMark = map[workspace.Kind]string{workspace.Dir: "/", workspace.Symlink: "@"}

func newWorkspaceListCmd() *cobra.Command {
	var asJSON bool
	c := &cobra.Command{
		Use:   "list [--json] PARENT",
		Short: "List the files an isolated workspace of PARENT would copy",
		Args:  usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			es, err := workspace.List(cmd.Context(), args[0], workspace.ListOptions{})
			if err != nil {
				return err
			}
			if es == nil {
				es = []workspace.Entry{} // a list, even an empty one
			}
			return show(cmd.OutOrStdout(), asJSON, es, func(w io.Writer) error {
				for _, e := range es {
					fmt.Fprintf(w, "%s%s\n", e.Path, kindMark[e.Kind])
				}
				return nil
			})
		},
	}
	c.Flags().BoolVar(&asJSON, "json", false, "print the listing as JSON")
	return c
}

func newWorkspaceCloneCmd() *cobra.Command {
	var asJSON bool
	c := &cobra.Command{
		Use:   "clone [--json] PARENT DIR",
		Short: "Make DIR/base, DIR/copy and DIR/manifest: an isolated workspace of PARENT",
		Long: `Clone lists PARENT's files (tracked and untracked, not ignored; at most 100,000) and
makes two copies in DIR: base, the tree as the child finds it, and copy, where the child
works. Files are cloned by extents where the filesystem can (XFS, btrfs, APFS), else copied
by bytes with a warning. DIR must not exist or be empty.`,
		Args: usageArgs(cobra.ExactArgs(2)),
		RunE: func(cmd *cobra.Command, args []string) error {
			rep, err := workspace.Clone(cmd.Context(), args[0], args[1], workspace.Options{})
			if err != nil {
				return err
			}
			for _, w := range rep.Warnings {
				fmt.Fprintln(cmd.ErrOrStderr(), "paddock: warning:", w)
			}
			return show(cmd.OutOrStdout(), asJSON, rep, printed(fmt.Sprintf("%sthe child works in %s\n", rep, filepath.Join(rep.Dir, workspace.CopyDir))))
		},
	}
	c.Flags().BoolVar(&asJSON, "json", false, "print the report as JSON")
	return c
}

func newWorkspaceHandbackCmd() *cobra.Command {
	var asJSON bool
	c := &cobra.Command{
		Use:   "handback [--json] DIR",
		Short: "Merge DIR/copy back into the parent recorded in DIR, path by path",
		Long: `Handback merges the child's copy into its parent path by path (README.md's "Isolated
workspaces" gives the table): what only the child changed is taken, a path both changed
differently is a conflict, the child's version saved under DIR/conflicts. The report is written
to DIR/handback.json and printed; a hand-back cut at any moment can be rerun to the same
result. Exits 3 when there were conflicts.`,
		Args: usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			rep, err := workspace.Handback(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			if err := show(cmd.OutOrStdout(), asJSON, rep, printed(rep)); err != nil {
				return err
			}
			if len(rep.Conflicts) > 0 {
				return outcome(exitConflicts, nil)
			}
			return nil
		},
	}
	c.Flags().BoolVar(&asJSON, "json", false, "print the report as JSON (the content of handback.json)")
	return c
}
