package prompt

import (
	"context"
	"fmt"
	"io"

	"github.com/paddockhq/paddock/client"
	"github.com/paddockhq/paddock/daemon/api"
	"github.com/paddockhq/paddock/orchestrator"
)

// Attach runs the terminal client of the daemon's session id (`paddock attach`) until the
// session closes, ctx ends, or (when it answers questions) in ends: the session's output
// and job ends are shown (Show), its questions asked on errOut and answered from in (Serve).
// With watch the terminal only watches: questions do not come to it.
func Attach(ctx context.Context, c *client.Client, id string, in io.Reader, out, errOut io.Writer, watch bool) error {
	kind := api.StreamInteractive
	if watch {
		kind = api.StreamWatch
	}
	st, err := c.Events(ctx, id, kind)
	if err != nil {
		return err
	}
	fmt.Fprintf(errOut, "paddock: attached to session %s\n", id)
	show := func(e api.Event) { Show(e, id, out, errOut) }
	if watch {
		defer st.Close()
		if err := st.Follow(show); ctx.Err() == nil {
			return err
		}
		return nil
	}
	t := New(in, errOut, func(q string, a orchestrator.Answer) error {
		return c.Answer(ctx, id, q, api.AnswerRequest{Approve: a.Approve, ForSession: a.ForSession, Client: "attach"})
	})
	return t.Serve(ctx, st, show)
}

// Show prints an event of session id's stream that is not a question: output to out, or
// errOut for descriptor 2, a job's end and the session's close to errOut. An event that
// lacks the part its kind names (a record a daemon sent) prints nothing, or what there is.
func Show(e api.Event, id string, out, errOut io.Writer) {
	switch e.Kind {
	case api.EventOutput:
		if e.Output == nil {
			return
		}
		w := out
		if e.Output.FD == 2 {
			w = errOut
		}
		io.WriteString(w, e.Output.Data)
	case api.EventJobEnd:
		if e.Job == nil {
			return
		}
		end := "[ended]"
		switch {
		case e.Job.Lost:
			end = "[lost]"
		case e.Job.Result != nil:
			end = orchestrator.EndOf(e.Job.Result.End).String()
		}
		fmt.Fprintf(errOut, "paddock: job %s: %s\n", e.Job.ID, end)
	case api.EventClosed:
		fmt.Fprintf(errOut, "paddock: session %s closed\n", id)
	}
}
