package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"golang.org/x/term"

	"github.com/paddockhq/paddock/config"
	"github.com/paddockhq/paddock/daemon/api"
	"github.com/paddockhq/paddock/internal/prompt"
	"github.com/paddockhq/paddock/orchestrator"
	"github.com/paddockhq/paddock/orchestrator/output"
	"github.com/paddockhq/paddock/session"
	"github.com/paddockhq/paddock/workspace"
)

func init() { commands = append(commands, newRunCmd) }

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

// finish closes a command's session, then finishes what was prepared for it: a workspace
// copied to a box is handed back, and what came back is shown.
func finish(s *orchestrator.Session, p *session.Prepared, errOut io.Writer) (*workspace.Report, error) {
	err := s.Close()
	rep, ferr := p.Finish(context.Background())
	showHandback(errOut, rep.API())
	if ferr != nil {
		fmt.Fprintln(errOut, "paddock:", ferr)
	}
	return rep, errors.Join(err, ferr)
}

// openSession opens a command's session in dir as run does: the settings (files, variables,
// the command's flags: l), the transport, its notices told on errOut. fin closes the session
// and finishes what was prepared for it (a synced workspace comes back), once.
func openSession(ctx context.Context, cmd *cobra.Command, dir string, tf *transportFlags, errOut io.Writer) (s *orchestrator.Session, l *config.Loaded, fin func() (*workspace.Report, error), err error) {
	l, err = loadSettings(dir, cmd.Flags(), api.OptionKeys(), errOut)
	if err != nil {
		return nil, nil, nil, err
	}
	p, err := tf.prepare(ctx, dir, l)
	if err != nil {
		return nil, nil, nil, err
	}
	for _, n := range p.Notices {
		fmt.Fprintln(errOut, "paddock:", n)
	}
	s, err = orchestrator.Open(ctx, p.Config)
	if err != nil {
		p.Finish(ctx)
		return nil, nil, nil, err
	}
	return s, l, sync.OnceValues(func() (*workspace.Report, error) { return finish(s, p, errOut) }), nil
}

func newRunCmd() *cobra.Command {
	var (
		dir    string
		asJSON bool
		tf     transportFlags
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
			if dir == "" {
				wd, err := os.Getwd()
				if err != nil {
					return err
				}
				dir = wd
			}
			out, errOut := cmd.OutOrStdout(), cmd.ErrOrStderr()
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			if host := daemonHost(cmd.Flags()); host != "" {
				return runHosted(ctx, cmd, host, dir, args[0], asJSON)
			}
			s, _, fin, err := openSession(ctx, cmd, dir, &tf, errOut)
			if err != nil {
				return err
			}
			defer fin()
			if !asJSON && term.IsTerminal(int(os.Stdin.Fd())) {
				t := prompt.New(os.Stdin, os.Stderr, s.Answer)
				defer s.Attach(t)()
				tctx, cancel := context.WithCancel(ctx)
				defer cancel()
				go t.Run(tctx)
			}
			call := orchestrator.Call{Script: args[0]}
			if !asJSON {
				call.Live = func(_, fd int, data []byte) { byFD(fd, out, errOut).Write(data) }
			}
			res, err := s.Run(ctx, call)
			if err != nil {
				return err
			}
			if err := printEnd(out, errOut, res.API(), asJSON); err != nil {
				return err
			}
			// A workspace copied to a box comes back when the session closes; a hand-back
			// that conflicted is the run's outcome.
			rep, err := fin()
			if err != nil {
				return err
			}
			return conflicted(rep.API())
		},
	}
	f := cmd.Flags()
	f.StringVarP(&dir, "workspace", "w", "", "the session's workspace and working directory (default: the current directory)")
	f.BoolVar(&asJSON, "json", false, "print the result as one JSON object instead of the output")
	registerRunFlags(f)
	tf.register(f)
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

// registerRunFlags registers run's settings flags: the session's output and shell options
// (api.RunKeys).
func registerRunFlags(f *pflag.FlagSet) {
	def := output.Default()
	f.Int("max-bytes", def.Bytes, "bytes of each step's output kept in the result (0: all)")
	f.Int("max-lines", def.Lines, "lines of each step's output kept in the result (0: all)")
	f.String("keep", def.Mode.String(), "which end of a long output the result keeps: head or tail")
	f.StringSlice("auto-effects", nil, "effects a step may have and still run unasked (default: every effect but secret)")
	f.String("job-timeout", "", "kill the script once it has run this long, e.g. 30m (default: shell.jobTimeout, none)")
}
