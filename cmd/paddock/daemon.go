package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/paddockhq/paddock/client"
	"github.com/paddockhq/paddock/daemon"
	"github.com/paddockhq/paddock/daemon/api"
	"github.com/paddockhq/paddock/front"
	"github.com/paddockhq/paddock/internal/place"
	"github.com/paddockhq/paddock/internal/prompt"
	"github.com/paddockhq/paddock/orchestrator"
)

func init() { commands = append(commands, newServeCmd, newAttachCmd, newJobsCmd, newSessionsCmd) }

func newServeCmd() *cobra.Command {
	var socket, state string
	var drain bool
	cmd := &cobra.Command{
		Use:   "serve [--socket PATH] [--state DIR] [--drain]",
		Short: "Serve sessions over HTTP/JSON on a private unix socket",
		Long: `Serve runs the daemon: sessions, their bash tool, files, children, answers, jobs and event
streams, over HTTP/JSON on a unix socket in a directory of yours with no group or other write
(a missing one is made 0700); the socket is 0600, a peer of another uid refused. Sessions are
opened as "paddock run" would; the API's document is at /openapi.json, metrics at /metrics.`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			sock, err := daemon.SocketPath(socket)
			if err != nil {
				return err
			}
			log := slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), nil))
			srv, err := daemon.New(daemon.Config{Open: daemon.OpenRequest, Recover: daemon.RecoverSession, Settings: daemon.RequestSettings,
				StateDir: state, Socket: sock, Drain: drain, Log: log})
			if err != nil {
				return err
			}
			return srv.Run(cmd.Context())
		},
	}
	cmd.Flags().BoolVar(&drain, "drain", false, "on SIGTERM or Ctrl-C close every session, ending its kernel and jobs (default: leave them for the next daemon)")
	cmd.Flags().StringVar(&socket, "socket", daemon.DefaultSocket(), "the unix socket to listen on")
	cmd.Flags().StringVar(&state, "state", place.StateDir(), "where sessions' files are kept (0700)")
	return cmd
}

func newAttachCmd() *cobra.Command {
	var host string
	var watch bool
	cmd := &cobra.Command{
		Use:   "attach SESSION [--host unix://PATH] [--watch]",
		Short: "Attach the terminal to a daemon's session: its questions and its output",
		Long: `Attach shows a session's output as its steps produce it, and asks each question its steps
(and its subagents' steps) raise, the step escaped as it runs; Enter alone answers no. It ends
when the session closes, or when the input ends.`,
		Args: usageArgs(cobra.ExactArgs(1)),
		RunE: onDaemon(&host, func(cmd *cobra.Command, c *client.Client, args []string) error {
			return prompt.Attach(cmd.Context(), c, args[0], cmd.InOrStdin(), cmd.OutOrStdout(), cmd.ErrOrStderr(), watch)
		}),
	}
	hostFlag(cmd.Flags(), &host)
	cmd.Flags().BoolVar(&watch, "watch", false, "only watch: output and job ends, no questions")
	return cmd
}

// daemonVerbs adds subs to parent, each with --json and --host (unless the transport flags
// gave it theirs, read by daemonHost).
func daemonVerbs(parent *cobra.Command, host *string, asJSON *bool, subs ...*cobra.Command) *cobra.Command {
	for _, sub := range subs {
		if sub.Flags().Lookup("host") == nil {
			hostFlag(sub.Flags(), host)
		}
		sub.Flags().BoolVar(asJSON, "json", false, "print JSON")
		parent.AddCommand(sub)
	}
	return parent
}

func newJobsCmd() *cobra.Command {
	var host, timeout string
	var asJSON bool
	list := &cobra.Command{
		Use:   "list SESSION",
		Short: "List a session's jobs",
		Args:  usageArgs(cobra.ExactArgs(1)),
		RunE: onDaemon(&host, func(cmd *cobra.Command, c *client.Client, args []string) error {
			jobs, err := c.Jobs(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			return show(cmd.OutOrStdout(), asJSON, jobs, func(w io.Writer) error { return printJobs(w, jobs) })
		}),
	}
	wait := &cobra.Command{
		Use:   "wait SESSION JOB [--timeout D]",
		Short: "Wait for a job's end and print its result; the exit status is the job's",
		Args:  usageArgs(cobra.ExactArgs(2)),
		RunE: onDaemon(&host, func(cmd *cobra.Command, c *client.Client, args []string) error {
			j, err := c.Wait(cmd.Context(), args[0], args[1], timeout)
			if err != nil {
				return err
			}
			if !j.Done {
				return fmt.Errorf("job %s is still running after %s", j.ID, timeout)
			}
			if asJSON {
				return printJSON(cmd.OutOrStdout(), j.Result)
			}
			return printResult(cmd.OutOrStdout(), j.Result)
		}),
	}
	wait.Flags().StringVar(&timeout, "timeout", "", "the longest wait, e.g. 30s (default: until the end)")
	kill := &cobra.Command{
		Use:   "kill SESSION JOB",
		Short: "Kill a job and its process groups; print its result",
		Args:  usageArgs(cobra.ExactArgs(2)),
		RunE: onDaemon(&host, func(cmd *cobra.Command, c *client.Client, args []string) error {
			j, err := c.Kill(cmd.Context(), args[0], args[1])
			if err != nil {
				return err
			}
			if asJSON { // killed: exit 0 whatever its status
				printJSON(cmd.OutOrStdout(), j.Result)
			} else {
				printResult(cmd.OutOrStdout(), j.Result)
			}
			return nil
		}),
	}
	return daemonVerbs(&cobra.Command{
		Use:   "jobs",
		Short: "List, wait for and kill a daemon session's jobs (calls that went on past their budget)",
	}, &host, &asJSON, list, wait, kill)
}

func newSessionsCmd() *cobra.Command {
	var host string
	var asJSON bool
	list := &cobra.Command{
		Use:   "list",
		Short: "List the daemon's sessions, open and ended",
		Args:  usageArgs(cobra.NoArgs),
		RunE: onDaemon(&host, func(cmd *cobra.Command, c *client.Client, _ []string) error {
			ss, err := c.Sessions(cmd.Context())
			if err != nil {
				return err
			}
			return show(cmd.OutOrStdout(), asJSON, ss, func(w io.Writer) error { return printSessions(w, ss) })
		}),
	}
	var all bool
	closeCmd := &cobra.Command{
		Use:   "close SESSION | --all",
		Short: "Close a session, or every root session with --all (a child's workspace is handed back; its report is printed)",
		Args: usageArgs(func(cmd *cobra.Command, args []string) error {
			if all {
				return cobra.NoArgs(cmd, args)
			}
			return cobra.ExactArgs(1)(cmd, args)
		}),
		RunE: onDaemon(&host, func(cmd *cobra.Command, c *client.Client, args []string) error {
			out := cmd.OutOrStdout()
			closed, err := closeSessions(cmd.Context(), c, args, all)
			conflicts := false
			for _, s := range closed {
				h := s.Handback
				if !asJSON {
					fmt.Fprintf(out, "session %s closed\n", s.ID)
					if h != nil {
						fmt.Fprintf(out, "handed back: %d taken, %d conflicts\n", len(h.Taken), len(h.Conflicts))
					}
				}
				conflicts = conflicts || h != nil && len(h.Conflicts) > 0
			}
			if err != nil {
				return err
			}
			if asJSON {
				var v any = closed // --all: the list
				if !all {
					v = closed[0]
				}
				if err := printJSON(out, v); err != nil {
					return err
				}
			}
			if conflicts {
				return outcome(exitConflicts, nil)
			}
			return nil
		}),
	}
	closeCmd.Flags().BoolVar(&all, "all", false, "close every session the daemon holds")
	var (
		sf                     sessionFlags
		budget, noOutput, name string
		isolated               bool
	)
	open := &cobra.Command{
		Use:   "open [--workspace DIR] [--budget D] [--no-output-timeout D] [transport flags]",
		Short: "Open a session in the daemon and print its id",
		Args:  usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			req, err := hostedRequest(cmd.Flags(), sf.dir) // "": the current directory
			if err != nil {
				return err
			}
			req.BlockingBudget, req.NoOutputTimeout = budget, noOutput
			c, s, err := front.OpenHosted(cmd.Context(), daemonHost(cmd.Flags()), req, tell(cmd.ErrOrStderr())) // --host is the daemon only as unix://…
			if err != nil {
				return err
			}
			defer c.Close()
			return show(cmd.OutOrStdout(), asJSON, s, printed(s.ID+"\n"))
		},
	}
	sf.register(open.Flags(), "the session's workspace and working directory", true)
	open.Flags().StringVar(&budget, "budget", "", "how long a call blocks before it goes on as a job (default: shell.blockingBudget)")
	open.Flags().StringVar(&noOutput, "no-output-timeout", "", "kill a job that printed nothing for this long (default: never)")
	spawn := &cobra.Command{
		Use:   "spawn PARENT --name NAME [--isolated]",
		Short: "Spawn a child of a daemon's session and print its id",
		Args:  usageArgs(cobra.ExactArgs(1)),
		RunE: onDaemon(&host, func(cmd *cobra.Command, c *client.Client, args []string) error {
			mode := orchestrator.Shared
			if isolated {
				mode = orchestrator.Isolated
			}
			s, err := c.Spawn(cmd.Context(), args[0], api.SpawnRequest{Name: name, Workspace: mode})
			if err != nil {
				return err
			}
			return show(cmd.OutOrStdout(), asJSON, s, printed(s.ID+"\n"))
		}),
	}
	spawn.Flags().StringVar(&name, "name", "", "the child's name, shown with its questions")
	spawn.Flags().BoolVar(&isolated, "isolated", false, "work in a clone of the parent's workspace, handed back when the child closes")
	var callBudget string
	runIn := &cobra.Command{
		Use:   "run SESSION [--budget D] -- SCRIPT",
		Short: "Run a script in a daemon's session; past its budget it goes on as a job",
		Long: `Run runs a script in an open session and prints its result. A call that passes its blocking
budget ends "detached" with the output so far and the job's id (paddock jobs wait, kill); the
exit status is the script's, 0 when detached.`,
		Args: usageArgs(cobra.ExactArgs(2)),
		RunE: onDaemon(&host, func(cmd *cobra.Command, c *client.Client, args []string) error {
			r, err := c.Bash(cmd.Context(), args[0], api.BashRequest{Script: args[1], Budget: callBudget})
			if err != nil {
				return err
			}
			if !asJSON {
				return printResult(cmd.OutOrStdout(), r.Result)
			}
			if err := printJSON(cmd.OutOrStdout(), r); err != nil {
				return err
			}
			return statusOf(r.Result)
		}),
	}
	runIn.Flags().StringVar(&callBudget, "budget", "", "this call's blocking budget (default: the session's)")
	return daemonVerbs(&cobra.Command{
		Use:   "sessions",
		Short: "Open, list, run in, spawn from and close a daemon's sessions",
	}, &host, &asJSON, list, closeCmd, open, spawn, runIn)
}

// What the CLI prints of the records a daemon sends. A record can lack any part (a lost
// job has no result, an event only the part its kind names), so each function here prints
// what there is and never assumes the rest: FuzzDaemonRecords holds them to it.

// printResult prints a script's result as run prints one; the exit status is the script's.
func printResult(w io.Writer, r *api.Result) error {
	if r == nil {
		io.WriteString(w, "[no result recorded]\n")
	} else {
		io.WriteString(w, orchestrator.ResultOf(r).String())
	}
	return statusOf(r)
}

// statusOf is the outcome of a script's result: its exit status (1 when none was recorded).
func statusOf(r *api.Result) error {
	switch {
	case r == nil:
		return outcome(1, nil)
	case r.End.Status != 0:
		return outcome(r.End.Status, nil)
	}
	return nil
}

// closeSessions closes the daemon's sessions: every root session with all, else the one
// named. What was closed is given with the error, all the same.
func closeSessions(ctx context.Context, c *client.Client, args []string, all bool) ([]api.Session, error) {
	if all {
		return c.CloseAll(ctx)
	}
	s, err := c.CloseSession(ctx, args[0])
	if err != nil {
		return nil, err
	}
	return []api.Session{s}, nil
}

// printJobs prints a listing of jobs, in columns.
func printJobs(w io.Writer, jobs []api.Job) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "JOB\tSTATE\tSCRIPT")
	for _, j := range jobs {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", j.ID, j.State(), strings.ReplaceAll(j.Script, "\n", "; "))
	}
	return tw.Flush()
}

// printSessions prints a listing of sessions, in columns.
func printSessions(w io.Writer, ss []api.Session) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SESSION\tSTATE\tTRANSPORT\tJOBS\tPARENT\tWORKSPACE")
	for _, s := range ss {
		parent := s.Parent
		if parent == "" {
			parent = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\n", s.ID, s.State, s.Transport, len(s.Jobs), parent, s.Workspace)
	}
	return tw.Flush()
}
