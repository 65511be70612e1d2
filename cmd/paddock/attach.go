package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/paddockhq/paddock/client"
	"github.com/paddockhq/paddock/daemon"
	"github.com/paddockhq/paddock/daemon/api"
	"github.com/paddockhq/paddock/internal/prompt"
	"github.com/paddockhq/paddock/orchestrator"
)

func init() { commands = append(commands, newAttachCmd) }

// hostFlag registers --host on a command that talks to a daemon.
func hostFlag(fs *pflag.FlagSet, host *string) {
	fs.StringVar(host, "host", "", "the daemon: unix:///path/to/paddock.sock (default: $PADDOCK_HOST, else the default socket)")
}

// dial returns a client of the daemon named by --host, PADDOCK_HOST, or the default socket.
func dial(host string) (*client.Client, error) {
	h := client.FromEnv(host)
	if h == "" {
		h = "unix://" + daemon.DefaultSocket()
	}
	return client.New(h)
}

// withDaemon runs f with a client of the daemon at host, closed after.
func withDaemon(host string, f func(*client.Client) error) error {
	c, err := dial(host)
	if err != nil {
		return err
	}
	defer c.Close()
	return f(c)
}

func newAttachCmd() *cobra.Command {
	var host string
	var watch bool
	cmd := &cobra.Command{
		Use:   "attach SESSION [--host unix://PATH] [--watch]",
		Short: "Attach the terminal to a daemon's session: its questions and its output",
		Long: `Attach shows a session's output as its steps produce it, and asks each question its steps
(and its subagents' steps) raise: the step exactly as it runs, control and bidirectional
characters escaped, and the subagent's name. Enter alone answers no. With --watch the terminal
only watches: questions do not come to it. Attach ends when the session closes, or when the
input ends.`,
		Args: usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withDaemon(host, func(c *client.Client) error {
				ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
				defer stop()
				return attach(ctx, c, args[0], cmd.InOrStdin(), cmd.OutOrStdout(), cmd.ErrOrStderr(), watch)
			})
		},
	}
	hostFlag(cmd.Flags(), &host)
	cmd.Flags().BoolVar(&watch, "watch", false, "only watch: output and job ends, no questions")
	return cmd
}

// attach runs the terminal client of a session until it closes, ctx ends, or (when it
// answers questions) the input ends: the session's output and job ends are printed, its
// questions asked (prompt.Terminal.Serve).
func attach(ctx context.Context, c *client.Client, id string, in io.Reader, out, errOut io.Writer, watch bool) error {
	kind := api.StreamInteractive
	if watch {
		kind = api.StreamWatch
	}
	st, err := c.Events(ctx, id, kind)
	if err != nil {
		return err
	}
	fmt.Fprintf(errOut, "paddock: attached to session %s\n", id)
	show := func(e api.Event) { printEvent(e, id, out, errOut) }
	if watch {
		defer st.Close()
		if err := st.Follow(show); ctx.Err() == nil {
			return err
		}
		return nil
	}
	t := prompt.New(in, errOut, func(q string, a orchestrator.Answer) error {
		return c.Answer(ctx, id, q, api.AnswerRequest{Approve: a.Approve, ForSession: a.ForSession, Client: "attach"})
	})
	return t.Serve(ctx, st, show)
}
