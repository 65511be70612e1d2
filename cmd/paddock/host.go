package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"golang.org/x/term"

	"github.com/paddockhq/paddock/client"
	"github.com/paddockhq/paddock/daemon/api"
	"github.com/paddockhq/paddock/internal/prompt"
	"github.com/paddockhq/paddock/orchestrator"
)

// daemonHost is the daemon a command runs through: --host when it names a socket
// (unix://…; any other --host is the ssh transport's box), else $PADDOCK_HOST; "" runs
// embedded.
func daemonHost(fs *pflag.FlagSet) string {
	if f := fs.Lookup("host"); f != nil && strings.HasPrefix(f.Value.String(), "unix://") {
		return f.Value.String()
	}
	return os.Getenv(client.HostEnv)
}

// commandsOwn are the flags of the commands that run through a daemon which are not a
// session's options.
var commandsOwn = map[string]bool{"workspace": true, "json": true, "budget": true, "no-output-timeout": true, "children": true, "parallel": true,
	"listen": true, "session": true}

// hostedRequest turns a command line into a session request (client.OpenRequest) in
// workspace, made absolute (the daemon's directory is not ours): the flags given are its
// options, the commands' own and a daemon's --host aside.
func hostedRequest(fs *pflag.FlagSet, workspace string) (api.OpenRequest, error) {
	workspace, err := filepath.Abs(workspace)
	if err != nil {
		return api.OpenRequest{}, err
	}
	var opts []client.Option
	fs.Visit(func(f *pflag.Flag) {
		if commandsOwn[f.Name] || f.Name == "host" && strings.HasPrefix(f.Value.String(), "unix://") {
			return
		}
		o := client.Option{Name: f.Name, Values: []string{f.Value.String()}}
		if sv, ok := f.Value.(pflag.SliceValue); ok {
			o.Values = sv.GetSlice()
		}
		opts = append(opts, o)
	})
	return client.OpenRequest(workspace, opts...)
}

// runHosted runs a script in a new session of the daemon at host, printing its output as
// the event stream brings it and asking the terminal its questions; the session is closed
// at the end.
func runHosted(ctx context.Context, cmd *cobra.Command, host, workspace, script string, asJSON bool) error {
	out, errOut := cmd.OutOrStdout(), cmd.ErrOrStderr()
	req, err := hostedRequest(cmd.Flags(), workspace)
	if err != nil {
		return err
	}
	c, err := client.New(host)
	if err != nil {
		return err
	}
	defer c.Close()
	tctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var t *prompt.Terminal
	var id string // the session's, once open; the terminal answers there
	o := client.RunOptions{Open: req, Script: script,
		Opened: func(s api.Session) {
			for _, w := range s.Warnings {
				fmt.Fprintln(errOut, "paddock:", w)
			}
			if t != nil {
				id = s.ID
				go t.Run(tctx)
			}
		}}
	if !asJSON {
		o.Output = func(fd int, data string) { io.WriteString(byFD(fd, out, errOut), data) }
		if term.IsTerminal(int(os.Stdin.Fd())) {
			t = prompt.New(os.Stdin, errOut, func(q string, a orchestrator.Answer) error {
				return c.Answer(ctx, id, q, api.AnswerRequest{Approve: a.Approve, ForSession: a.ForSession, Client: "terminal"})
			})
			o.Questions = t.NotifyEvent
		}
	}
	ran, err := c.Run(ctx, o)
	if err != nil {
		return err
	}
	res, ended := ran.Bash, ran.Closed
	showHandback(errOut, ended.Handback) // a workspace synced to a box, handed back
	for _, w := range ended.Warnings {
		fmt.Fprintln(errOut, "paddock: warning:", w)
	}
	if err := printEnd(out, errOut, res.Result, asJSON); err != nil {
		return err
	}
	if ended.HandbackError != "" { // the box's work is in a local copy only
		return errors.New(ended.HandbackError)
	}
	return conflicted(ended.Handback)
}
