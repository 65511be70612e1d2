// Package prompt is the terminal's interactive client: it shows each question a session's
// steps ask, every line of the step escaped, and reads the answer. Enter alone answers no.
package prompt

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
	"unicode"

	"github.com/paddockhq/paddock/daemon/api"
	"github.com/paddockhq/paddock/errdefs"
	"github.com/paddockhq/paddock/orchestrator"
)

// Terminal is an interactive client on a terminal.
type Terminal struct {
	in     *bufio.Reader
	out    io.Writer
	answer func(id string, a orchestrator.Answer) error

	mu      sync.Mutex
	queue   []orchestrator.Question // guarded by mu
	settled map[string]bool         // guarded by mu
	wake    chan struct{}
}

// New returns a terminal client reading answers from in and writing prompts to out; answer
// delivers an answer to the session the client is attached to.
func New(in io.Reader, out io.Writer, answer func(id string, a orchestrator.Answer) error) *Terminal {
	return &Terminal{in: bufio.NewReader(in), out: out, answer: answer, settled: map[string]bool{}, wake: make(chan struct{}, 1)}
}

// Kind says the terminal is shown every question.
func (t *Terminal) Kind() orchestrator.ClientKind { return orchestrator.Interactive }

// Notify queues a question, or notes that one is settled. It never blocks.
func (t *Terminal) Notify(e orchestrator.Event) {
	t.mu.Lock()
	switch e.Kind {
	case orchestrator.EventQuestion:
		t.queue = append(t.queue, *e.Question)
	case orchestrator.EventSettled:
		t.settled[e.Settled.ID] = true
	}
	t.mu.Unlock()
	select {
	case t.wake <- struct{}{}:
	default:
	}
}

// NotifyEvent is Notify for an event of a daemon's stream: a question or its settling. An
// event that lacks the part its kind names is ignored.
func (t *Terminal) NotifyEvent(e api.Event) {
	switch {
	case e.Kind == api.EventQuestion && e.Question != nil:
		t.Notify(orchestrator.EventOf(e.Kind, e.Question, nil))
	case e.Kind == api.EventSettled && e.Settled != nil:
		t.Notify(orchestrator.EventOf(e.Kind, nil, e.Settled))
	}
}

// Run asks the queued questions one by one until ctx ends or the input does. The input is
// read all the time, not only while a question is shown, so that its end is seen at once
// (attach </dev/null ends with no question asked); lines read ahead answer the next
// questions in order, as piped answers do, and the input's end ends Run once they are used.
func (t *Terminal) Run(ctx context.Context) error {
	type read struct {
		line string
		err  error
	}
	lines := make(chan read)
	// The reader ends at the input's end or at the first read after Run returned; a read
	// that blocks on a terminal cannot be interrupted, so it is left to the process's end.
	go func() {
		for {
			line, err := t.in.ReadString('\n')
			select {
			case lines <- read{line, err}:
			case <-ctx.Done():
				return
			}
			if err != nil {
				return
			}
		}
	}()
	var (
		shown   *orchestrator.Question
		pending []string // lines read, not yet an answer
		end     error    // the input's end, once read
	)
	for {
		if shown == nil {
			if q, ok := t.next(); ok {
				fmt.Fprint(t.out, Render(q))
				shown = &q
			}
		}
		if shown != nil && len(pending) > 0 {
			q, line := *shown, pending[0]
			shown, pending = nil, pending[1:]
			a := orchestrator.Answer{Client: "terminal"}
			switch strings.ToLower(strings.TrimSpace(line)) {
			case "y", "yes":
				a.Approve = true
			case "a", "always":
				a.Approve, a.ForSession = true, true
			}
			err := t.answer(q.ID, a)
			if c, _ := errdefs.Of(err); err != nil && c == errdefs.Gone {
				fmt.Fprintln(t.out, "(already settled)")
			} else if err != nil {
				return err
			}
			continue
		}
		if end != nil && len(pending) == 0 {
			return end
		}
		var in <-chan read
		if end == nil {
			in = lines
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.wake:
		case r := <-in:
			if r.line != "" {
				pending = append(pending, r.line)
			}
			end = r.err
		}
	}
}

// next takes the first queued question that is not settled yet.
func (t *Terminal) next() (orchestrator.Question, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for len(t.queue) > 0 {
		q := t.queue[0]
		t.queue = t.queue[1:]
		if !t.settled[q.ID] {
			return q, true
		}
	}
	return orchestrator.Question{}, false
}

// Render writes a question as the terminal shows it: who asks, the effects, every line of
// the step with control and bidirectional characters escaped, and the choices. The default
// (Enter alone) is no.
func Render(q orchestrator.Question) string {
	var b strings.Builder
	who := "a step"
	if q.Subagent != "" {
		who = fmt.Sprintf("subagent %s", Escape(q.Subagent))
	}
	if q.Connect != "" {
		// A connection a step's program opens through the session's proxy: the target, and
		// the steps running when it was opened.
		fmt.Fprintf(&b, "\n%s asks to connect to %s [%s]:\n", who, Escape(q.Connect), strings.Join(q.Effects.Strings(), ", "))
	} else {
		fmt.Fprintf(&b, "\n%s asks to run step %d [%s]:\n", who, q.Step+1, strings.Join(q.Effects.Strings(), ", "))
	}
	for _, line := range strings.Split(q.Command, "\n") {
		fmt.Fprintf(&b, "  %s\n", Escape(line))
	}
	if q.Connect != "" {
		b.WriteString("Allow it? [y]es, [a]lways for this session, [N]o: ")
	} else {
		b.WriteString("Run it? [y]es, [a]lways for this session, [N]o: ")
	}
	return b.String()
}

// Escape writes every control or bidirectional-formatting character of s as a $'…' escape,
// so that what a person reads is what runs.
func Escape(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch {
		case r == '\t' || (r >= 0x20 && r != 0x7f && !unicode.Is(unicode.Bidi_Control, r) && !unicode.IsControl(r) && r != '\u2028' && r != '\u2029'):
			b.WriteRune(r)
		case r < 0x100:
			fmt.Fprintf(&b, `$'\x%02x'`, r)
		default:
			fmt.Fprintf(&b, `$'\u%04x'`, r)
		}
	}
	return b.String()
}
