package prompt

import (
	"context"
	"errors"
	"io"

	"github.com/paddockhq/paddock/client"
	"github.com/paddockhq/paddock/daemon/api"
	"github.com/paddockhq/paddock/orchestrator"
)

// Serve is the terminal as the interactive client of a daemon's session on its event
// stream st (client.Events, api.StreamInteractive): it asks the session's questions and
// hands every other event to show, until the session closes, ctx ends or the input does
// (none of them an error). It closes st, and returns once nothing more is shown.
func (t *Terminal) Serve(ctx context.Context, st *client.Stream, show func(api.Event)) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	inputDone := make(chan error, 1)
	go func() { inputDone <- t.Run(ctx) }()
	streamDone, followed := make(chan error, 1), make(chan struct{})
	defer func() { st.Close(); <-followed }()
	go func() {
		defer close(followed)
		streamDone <- st.Follow(func(e api.Event) {
			if e.Kind == api.EventQuestion || e.Kind == api.EventSettled {
				t.NotifyEvent(e)
			} else {
				show(e)
			}
		})
	}()
	select {
	case err := <-streamDone:
		if ctx.Err() != nil {
			return nil
		}
		return err
	case err := <-inputDone:
		if errors.Is(err, io.EOF) || errors.Is(err, context.Canceled) {
			return nil
		}
		return err
	case <-ctx.Done():
		return nil
	}
}

// AskFor makes a script's run in a session of its own in a daemon (client.Run with o) ask
// the terminal of in and out the session's questions: each is told the terminal
// (o.Questions), and once the session is open (after o.Opened) the terminal reads the
// answers, given through c as the client "terminal", until ctx ends.
func AskFor(ctx context.Context, c *client.Client, o *client.RunOptions, in io.Reader, out io.Writer) {
	var id string // the session's, once open
	t := New(in, out, func(q string, a orchestrator.Answer) error {
		return c.Answer(ctx, id, q, api.AnswerRequest{Approve: a.Approve, ForSession: a.ForSession, Client: "terminal"})
	})
	opened := o.Opened
	o.Opened = func(s api.Session) {
		if opened != nil {
			opened(s)
		}
		id = s.ID
		go t.Run(ctx)
	}
	o.Questions = t.NotifyEvent
}
