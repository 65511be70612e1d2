package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/paddockhq/paddock/daemon/api"
	"github.com/paddockhq/paddock/front"
	"github.com/paddockhq/paddock/orchestrator"
)

func init() { commands = append(commands, newRunCmd) }

func newRunCmd() *cobra.Command {
	var (
		sf     sessionFlags
		asJSON bool
	)
	cmd := &cobra.Command{
		Use:   "run [--workspace DIR] [--json] [--host unix://PATH] -- SCRIPT",
		Short: "Run a shell script in a sandbox, step by step",
		Long: `Run opens a session in the workspace, runs the script through the session's kernel and
prints each step's output as it comes, then how the script ended. A step outside the auto set
asks the terminal (when standard input is one) and is refused as unanswered otherwise. The exit
status is the script's (126 when a step was refused).`,
		Args: usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			dir, err := sf.workspace()
			if err != nil {
				return err
			}
			out, errOut := cmd.OutOrStdout(), cmd.ErrOrStderr()
			sc := front.Script{Script: args[0]}
			if !asJSON {
				sc.Output = func(fd int, data []byte) { byFD(fd, out, errOut).Write(data) }
				if term.IsTerminal(int(os.Stdin.Fd())) {
					sc.In, sc.Out = os.Stdin, errOut
				}
			}
			res, rep, err := sf.where(cmd, dir, api.OptionKeys()).Run(cmd.Context(), sc)
			if res == nil {
				return err
			}
			if perr := printEnd(out, errOut, res, asJSON); perr != nil {
				if err != nil {
					tell(errOut)(err.Error())
				}
				return perr
			}
			if err != nil {
				return err
			}
			return conflicted(rep) // a workspace that came back from a box with conflicts
		},
	}
	sf.register(cmd.Flags(), "the session's workspace and working directory", true)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the result as one JSON object instead of the output")
	return cmd
}

// printEnd prints how a script ended, as run prints it once its output went as it came: the
// result as JSON, or a refusal's line; the script's status is the run's outcome.
func printEnd(out, errOut io.Writer, res *api.Result, asJSON bool) error {
	if asJSON {
		if err := printJSON(out, res); err != nil {
			return err
		}
	} else if res.End.Kind == orchestrator.Refused {
		fmt.Fprintln(errOut, "paddock:", strings.Trim(orchestrator.EndOf(res.End).String(), "[]"))
	}
	if res.End.Status != 0 {
		return outcome(res.End.Status, nil)
	}
	return nil
}

// showHandback says what came back of a workspace copied to a box; nothing when none was.
func showHandback(errOut io.Writer, rep *api.Report) {
	if rep == nil {
		return
	}
	fmt.Fprintf(errOut, "paddock: workspace handed back: %d changes taken, %d conflicts\n", rep.Counts.Taken, rep.Counts.Conflicts)
	for _, c := range rep.Conflicts {
		fmt.Fprintf(errOut, "paddock: conflict: %s (%s); the box's version is in %s\n", c.Path, c.Reason, filepath.Join(rep.Dir, c.Saved))
	}
}

// conflicted is the outcome of a workspace that came back from a box with conflicts.
func conflicted(rep *api.Report) error {
	if rep != nil && rep.Counts.Conflicts > 0 {
		return outcome(exitConflicts, fmt.Errorf("the workspace came back with conflicts: %d", rep.Counts.Conflicts))
	}
	return nil
}

// byFD is where output of descriptor fd goes: errOut for 2, else out.
func byFD(fd int, out, errOut io.Writer) io.Writer {
	if fd == 2 {
		return errOut
	}
	return out
}
