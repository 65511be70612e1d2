package prompt

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/creack/pty"

	"github.com/paddockhq/paddock/daemon/api"
	"github.com/paddockhq/paddock/images"
	"github.com/paddockhq/paddock/orchestrator"
	"github.com/paddockhq/paddock/policy"
	"github.com/paddockhq/paddock/transport/local"
)

func TestEscape(t *testing.T) {
	for in, want := range map[string]string{
		"plain text":     "plain text",
		"tab\tok":        "tab\tok",
		"esc\x1b[31m":    `esc$'\x1b'[31m`,
		"bell\a":         `bell$'\x07'`,
		"rtl\u202eevil":  `rtl$'\u202e'evil`,
		"del\x7f":        `del$'\x7f'`,
		"cr\rhidden":     `cr$'\x0d'hidden`,
		"isolate\u2066x": `isolate$'\u2066'x`,
	} {
		if got := Escape(in); got != want {
			t.Errorf("Escape(%q) = %q, want %q", in, got, want)
		}
	}
}

// A connection's question names its target and asks to allow it, the steps that were
// running escaped as a step's are.
func TestRenderConnection(t *testing.T) {
	got := Render(orchestrator.Question{Step: -1, Effects: policy.Net, Connect: "example.com:443",
		Command: "'connect example.com:443 (from: curl \x1b[2J https://example.com)'"})
	for _, want := range []string{"a step asks to connect to example.com:443 [net]:", `curl $'\x1b'[2J`, "Allow it? [y]es, [a]lways for this session, [N]o: "} {
		if !strings.Contains(got, want) {
			t.Errorf("the question reads:\n%s\nwant %q in it", got, want)
		}
	}
	if strings.Contains(got, "run step") {
		t.Errorf("a connection is shown as a step:\n%s", got)
	}
}

// readUntil reads from r until the text holds want or the deadline passes.
func readUntil(t *testing.T, r *os.File, want string) string {
	t.Helper()
	var got bytes.Buffer
	buf := make([]byte, 4096)
	r.SetReadDeadline(time.Now().Add(20 * time.Second))
	for !strings.Contains(got.String(), want) {
		n, err := r.Read(buf)
		got.Write(buf[:n])
		if err != nil {
			t.Fatalf("waiting for %q: %v; read %q", want, err, got.String())
		}
	}
	return got.String()
}

// On a real pseudo-terminal: the prompt names the subagent, shows a control character
// escaped and keeps every line; Enter alone denies.
func TestTerminalOnPTY(t *testing.T) {
	master, tty, err := pty.Open()
	if err != nil {
		t.Fatalf("no pseudo-terminal: %v", err)
	}
	defer master.Close()
	defer tty.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	kernel, err := images.Default.Find(ctx, runtime.GOARCH)
	if err != nil {
		t.Fatal(err)
	}
	auto, _ := policy.ParseAutoSet([]string{"read"})
	root, err := orchestrator.Open(ctx, orchestrator.Config{
		Workspace: t.TempDir(), Transport: &local.Transport{}, Kernel: kernel,
		Env: []string{"PATH=/usr/bin:/bin"}, Policy: orchestrator.Policy{Auto: &auto},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	term := New(tty, tty, root.Answer)
	defer root.Attach(term)()
	go term.Run(ctx)
	child, err := root.Spawn(ctx, orchestrator.ChildConfig{Name: "builder"})
	if err != nil {
		t.Fatal(err)
	}
	defer child.Close()
	type outcome struct {
		res *orchestrator.Result
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		res, err := child.Bash(ctx, "echo $'\\e[31mred\\nsecond line' > out.txt")
		done <- outcome{res, err}
	}()
	screen := readUntil(t, master, "[N]o: ")
	if !strings.Contains(screen, "subagent builder") {
		t.Errorf("the prompt does not name the subagent:\n%s", screen)
	}
	if strings.Contains(screen, "\x1b") || !strings.Contains(screen, `\E[31m`) && !strings.Contains(screen, `\x1b[31m`) {
		t.Errorf("the control character is not shown escaped:\n%q", screen)
	}
	if !strings.Contains(screen, "second line") {
		t.Errorf("a line of the step is missing:\n%q", screen)
	}
	master.Write([]byte("\r")) // Enter alone
	o := <-done
	if o.err != nil || o.res.End.Kind != orchestrator.Refused || o.res.End.Code != "denied" {
		t.Fatalf("Enter alone: %v %+v", o.err, o.res)
	}
}

// The terminal ends when its input ends, with no question shown (attach </dev/null).
func TestTerminalEndsAtInputEnd(t *testing.T) {
	term := New(strings.NewReader(""), io.Discard, func(string, orchestrator.Answer) error {
		t.Error("an answer with no question")
		return nil
	})
	if err := term.Run(context.Background()); !errors.Is(err, io.EOF) {
		t.Fatalf("Run = %v, want the input's end", err)
	}
}

// Lines read ahead answer the questions in order, as piped answers do: "y" then Enter
// alone approve the first and refuse the second; the input's end then ends the terminal.
func TestTerminalAnswersReadAhead(t *testing.T) {
	var mu sync.Mutex
	var answers []orchestrator.Answer
	term := New(strings.NewReader("y\n\n"), io.Discard, func(_ string, a orchestrator.Answer) error {
		mu.Lock()
		answers = append(answers, a)
		mu.Unlock()
		return nil
	})
	term.Notify(orchestrator.Event{Kind: orchestrator.EventQuestion, Question: &orchestrator.Question{ID: "q1", Command: "touch a"}})
	term.Notify(orchestrator.Event{Kind: orchestrator.EventQuestion, Question: &orchestrator.Question{ID: "q2", Command: "touch b"}})
	if err := term.Run(context.Background()); !errors.Is(err, io.EOF) {
		t.Fatalf("Run = %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(answers) != 2 || !answers[0].Approve || answers[1].Approve {
		t.Fatalf("answers %+v, want yes then no", answers)
	}
}

// A daemon's question is queued and shown as a session's, its settling drops it; an event
// lacking its part is ignored, never a panic.
func TestNotifyEvent(t *testing.T) {
	t.Parallel()
	term := New(strings.NewReader(""), io.Discard, func(string, orchestrator.Answer) error { return nil })
	for _, e := range []api.Event{{Kind: api.EventQuestion}, {Kind: api.EventSettled}, {Kind: api.EventOutput},
		{Kind: api.EventQuestion, Settled: &api.Settlement{ID: "q0"}}} {
		term.NotifyEvent(e)
	}
	term.NotifyEvent(api.Event{Kind: api.EventQuestion, Question: &api.Question{ID: "q1", Step: 1, Command: "rm\x1b[2J x", Effects: []string{"write"}}})
	term.NotifyEvent(api.Event{Kind: api.EventQuestion, Question: &api.Question{ID: "q2", Step: 2, Command: "touch y", Effects: []string{"write"}}})
	term.NotifyEvent(api.Event{Kind: api.EventSettled, Settled: &api.Settlement{ID: "q2"}})
	term.mu.Lock()
	defer term.mu.Unlock()
	if len(term.queue) != 2 || term.queue[0].ID != "q1" || term.queue[0].Command != "rm\x1b[2J x" || !term.settled["q2"] || term.settled["q0"] {
		t.Errorf("queue %+v, settled %v", term.queue, term.settled)
	}
}
