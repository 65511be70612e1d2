package client

import (
	"context"
	"errors"

	"github.com/paddockhq/paddock/daemon/api"
)

// RunOptions say how a script runs in a session of its own.
type RunOptions struct {
	Open   api.OpenRequest
	Script string
	// Opened, when set, is called once the session is open (its warnings are the caller's
	// to show), before the script starts.
	Opened func(api.Session)
	// Output, when set, receives the script's output as the event stream brings it.
	Output func(fd int, data string)
	// Questions, when set, is told of each question of the session and of its settling; the
	// stream is then interactive (the session's questions wait for an answer: Answer).
	Questions func(api.Event)
}

// Ran is what came of a script run in a session of its own: the call's answer, and the
// session's close answer (a workspace synced to a box, handed back or not).
type Ran struct {
	Bash   api.BashResponse
	Closed api.Session
}

// Run opens a session, runs the script in it with no budget while following its event
// stream, and closes it: the front end of `paddock run --host`. The session is closed
// whatever happens; the stream ends after every output event.
func (c *Client) Run(ctx context.Context, o RunOptions) (*Ran, error) {
	s, err := c.Open(ctx, o.Open)
	if err != nil {
		return nil, err
	}
	closed := false
	defer func() {
		if !closed {
			c.CloseSession(context.WithoutCancel(ctx), s.ID)
		}
	}()
	if o.Opened != nil {
		o.Opened(s)
	}
	kind := api.StreamWatch
	if o.Questions != nil {
		kind = api.StreamInteractive
	}
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	st, err := c.Events(sctx, s.ID, kind)
	if err != nil {
		return nil, err
	}
	defer st.Close()
	streamed := make(chan error, 1)
	go func() { streamed <- st.Follow(func(e api.Event) { runEvent(o, e) }) }()
	res, err := c.Bash(ctx, s.ID, api.BashRequest{Script: o.Script, Budget: "-1"})
	if err != nil {
		return nil, err
	}
	closed = true
	ended, err := c.CloseSession(ctx, s.ID)
	if err != nil {
		return nil, err
	}
	if err := <-streamed; err != nil {
		return nil, err
	}
	if res.Result == nil {
		return nil, errors.New("the daemon answered with no result")
	}
	return &Ran{Bash: res, Closed: ended}, nil
}

// runEvent hands an event of a run's stream to the options' callbacks: a question or its
// settling, or output (an output event without its part is skipped).
func runEvent(o RunOptions, e api.Event) {
	switch e.Kind {
	case api.EventQuestion, api.EventSettled:
		if o.Questions != nil {
			o.Questions(e)
		}
	case api.EventOutput:
		if o.Output != nil && e.Output != nil {
			o.Output(e.Output.FD, e.Output.Data)
		}
	}
}
