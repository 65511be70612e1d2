package main

import (
	"fmt"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/paddockhq/paddock/client"
	"github.com/paddockhq/paddock/daemon/api"
	"github.com/paddockhq/paddock/orchestrator"
)

func init() { commands = append(commands, newJobsCmd, newSessionsCmd) }

func newJobsCmd() *cobra.Command {
	var host, timeout string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "jobs",
		Short: "List, wait for and kill a daemon session's jobs (calls that went on past their budget)",
	}
	list := &cobra.Command{
		Use:   "list SESSION",
		Short: "List a session's jobs",
		Args:  usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withDaemon(host, func(c *client.Client) error {
				jobs, err := c.Jobs(cmd.Context(), args[0])
				if err != nil {
					return err
				}
				if asJSON {
					return printJSON(cmd.OutOrStdout(), jobs)
				}
				tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
				printJobs(tw, jobs)
				return tw.Flush()
			})
		},
	}
	// show prints a job's result as run prints one; the exit status is the job's.
	show := func(cmd *cobra.Command, res *api.Result) error {
		if asJSON {
			return printJSON(cmd.OutOrStdout(), res)
		}
		fmt.Fprint(cmd.OutOrStdout(), resultText(res))
		if st := resultStatus(res); st != 0 {
			return outcome(st, nil)
		}
		return nil
	}
	wait := &cobra.Command{
		Use:   "wait SESSION JOB [--timeout D]",
		Short: "Wait for a job's end and print its result; the exit status is the job's",
		Args:  usageArgs(cobra.ExactArgs(2)),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withDaemon(host, func(c *client.Client) error {
				j, err := c.Wait(cmd.Context(), args[0], args[1], timeout)
				if err != nil {
					return err
				}
				if !j.Done {
					return fmt.Errorf("job %s is still running after %s", j.ID, timeout)
				}
				return show(cmd, j.Result)
			})
		},
	}
	wait.Flags().StringVar(&timeout, "timeout", "", "the longest wait, e.g. 30s (default: until the end)")
	kill := &cobra.Command{
		Use:   "kill SESSION JOB",
		Short: "Kill a job and its process groups; print its result",
		Args:  usageArgs(cobra.ExactArgs(2)),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withDaemon(host, func(c *client.Client) error {
				j, err := c.Kill(cmd.Context(), args[0], args[1])
				if err != nil {
					return err
				}
				show(cmd, j.Result)
				return nil
			})
		},
	}
	for _, sub := range []*cobra.Command{list, wait, kill} {
		hostFlag(sub.Flags(), &host)
		sub.Flags().BoolVar(&asJSON, "json", false, "print JSON")
		cmd.AddCommand(sub)
	}
	return cmd
}

func newSessionsCmd() *cobra.Command {
	var host string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "sessions",
		Short: "Open, list, run in, spawn from and close a daemon's sessions",
	}
	list := &cobra.Command{
		Use:   "list",
		Short: "List the daemon's sessions, open and ended",
		Args:  usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return withDaemon(host, func(c *client.Client) error {
				ss, err := c.Sessions(cmd.Context())
				if err != nil {
					return err
				}
				if asJSON {
					return printJSON(cmd.OutOrStdout(), ss)
				}
				tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
				printSessions(tw, ss)
				return tw.Flush()
			})
		},
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
		RunE: func(cmd *cobra.Command, args []string) error {
			return withDaemon(host, func(c *client.Client) error {
				var closed []api.Session
				var err error
				if all {
					closed, err = c.CloseAll(cmd.Context())
				} else {
					var s api.Session
					if s, err = c.CloseSession(cmd.Context(), args[0]); err == nil {
						closed = append(closed, s)
					}
				}
				conflicts := false
				for _, s := range closed {
					if !asJSON {
						fmt.Fprintf(cmd.OutOrStdout(), "session %s closed\n", s.ID)
					}
					if h := s.Handback; h != nil {
						if !asJSON {
							fmt.Fprintf(cmd.OutOrStdout(), "handed back: %d taken, %d conflicts\n", len(h.Taken), len(h.Conflicts))
						}
						conflicts = conflicts || len(h.Conflicts) > 0
					}
				}
				if err != nil {
					return err
				}
				if asJSON {
					var v any = closed // --all: the list
					if !all {
						v = closed[0]
					}
					if err := printJSON(cmd.OutOrStdout(), v); err != nil {
						return err
					}
				}
				if conflicts {
					return outcome(exitConflicts, nil)
				}
				return nil
			})
		},
	}
	closeCmd.Flags().BoolVar(&all, "all", false, "close every session the daemon holds")
	var (
		workspace, budget, noOutput string
		isolated                    bool
		name                        string
		tf                          transportFlags
	)
	open := &cobra.Command{
		Use:   "open [--workspace DIR] [--budget D] [--no-output-timeout D] [transport flags]",
		Short: "Open a session in the daemon and print its id",
		Args:  usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			req, err := hostedRequest(cmd.Flags(), workspace) // "": the current directory

			if err != nil {
				return err
			}
			req.BlockingBudget, req.NoOutputTimeout = budget, noOutput
			c, err := dial(daemonHost(cmd.Flags())) // --host is the daemon only as unix://…
			if err != nil {
				return err
			}
			defer c.Close()
			s, err := c.Open(cmd.Context(), req)
			if err != nil {
				return err
			}
			for _, w := range s.Warnings {
				fmt.Fprintln(cmd.ErrOrStderr(), "paddock:", w)
			}
			if asJSON {
				return printJSON(cmd.OutOrStdout(), s)
			}
			fmt.Fprintln(cmd.OutOrStdout(), s.ID)
			return nil
		},
	}
	open.Flags().StringVarP(&workspace, "workspace", "w", "", "the session's workspace and working directory (default: the current directory)")
	open.Flags().StringVar(&budget, "budget", "", "how long a call blocks before it goes on as a job (default: shell.blockingBudget)")
	open.Flags().StringVar(&noOutput, "no-output-timeout", "", "kill a job that printed nothing for this long (default: never)")
	tf.register(open.Flags())
	registerRunFlags(open.Flags())
	spawn := &cobra.Command{
		Use:   "spawn PARENT --name NAME [--isolated]",
		Short: "Spawn a child of a daemon's session and print its id",
		Args:  usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withDaemon(host, func(c *client.Client) error {
				mode := orchestrator.Shared
				if isolated {
					mode = orchestrator.Isolated
				}
				s, err := c.Spawn(cmd.Context(), args[0], api.SpawnRequest{Name: name, Workspace: mode})
				if err != nil {
					return err
				}
				if asJSON {
					return printJSON(cmd.OutOrStdout(), s)
				}
				fmt.Fprintln(cmd.OutOrStdout(), s.ID)
				return nil
			})
		},
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
		RunE: func(cmd *cobra.Command, args []string) error {
			return withDaemon(host, func(c *client.Client) error {
				r, err := c.Bash(cmd.Context(), args[0], api.BashRequest{Script: args[1], Budget: callBudget})
				if err != nil {
					return err
				}
				if asJSON {
					if err := printJSON(cmd.OutOrStdout(), r); err != nil {
						return err
					}
				} else {
					fmt.Fprint(cmd.OutOrStdout(), resultText(r.Result))
				}
				if st := resultStatus(r.Result); st != 0 {
					return outcome(st, nil)
				}
				return nil
			})
		},
	}
	runIn.Flags().StringVar(&callBudget, "budget", "", "this call's blocking budget (default: the session's)")
	for _, sub := range []*cobra.Command{list, closeCmd, open, spawn, runIn} {
		if sub != open { // open has the transport flags' --host, read by daemonHost
			hostFlag(sub.Flags(), &host)
		}
		sub.Flags().BoolVar(&asJSON, "json", false, "print JSON")
		cmd.AddCommand(sub)
	}
	return cmd
}
