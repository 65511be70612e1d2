package prompt

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/paddockhq/paddock/client"
	"github.com/paddockhq/paddock/daemon"
	"github.com/paddockhq/paddock/daemon/api"
	"github.com/paddockhq/paddock/images"
	"github.com/paddockhq/paddock/orchestrator"
)

// daemonOf serves a daemon in this process whose sessions run locally and ask before
// touch, and returns a client of it.
func daemonOf(t *testing.T) *client.Client {
	t.Helper()
	k, err := images.Default.Find(context.Background(), runtime.GOARCH)
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("PADDOCK_KERNEL", k)
	cfg := t.TempDir()
	t.Setenv("XDG_CONFIG_HOME", cfg)
	os.MkdirAll(filepath.Join(cfg, "paddock"), 0o700)
	settings := "kernelTransport:\n  kind: local\nshell:\n  rules:\n    - {action: ask, command: touch}\n"
	if err := os.WriteFile(filepath.Join(cfg, "paddock", "settings.yaml"), []byte(settings), 0o600); err != nil {
		t.Fatal(err)
	}
	srv, err := daemon.New(daemon.Config{Open: daemon.OpenRequest, StateDir: filepath.Join(t.TempDir(), "state")})
	if err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(t.TempDir(), "s", daemon.SocketName)
	l, err := daemon.Listen(sock, nil)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(l) }()
	t.Cleanup(func() {
		srv.Close()
		<-done
	})
	c, err := client.New("unix://" + sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// shown gathers what a Serve shows, from its stream's goroutine.
type shown struct {
	mu     sync.Mutex
	events []api.Event
}

func (s *shown) show(e api.Event) {
	s.mu.Lock()
	s.events = append(s.events, e)
	s.mu.Unlock()
}

// The terminal serves a daemon's session: it asks the session's question and its answer
// decides, every other event is shown, and the session's close ends it. A terminal whose
// input ends, or whose context does, stops serving with no error.
func TestServe(t *testing.T) {
	c := daemonOf(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ws := t.TempDir()
	s, err := c.Open(ctx, api.OpenRequest{Workspace: ws})
	if err != nil {
		t.Fatal(err)
	}
	inR, inW := io.Pipe()
	prompts, asked := io.Pipe()
	term := New(inR, asked, func(q string, a orchestrator.Answer) error {
		return c.Answer(ctx, s.ID, q, api.AnswerRequest{Approve: a.Approve, Client: "test"})
	})
	st, err := c.Events(ctx, s.ID, api.StreamInteractive)
	if err != nil {
		t.Fatal(err)
	}
	sh := &shown{}
	served := make(chan error, 1)
	// Served without a deadline: only the session's close can end it.
	go func() { served <- term.Serve(context.Background(), st, sh.show) }()
	ran := make(chan api.BashResponse, 1)
	go func() {
		r, err := c.Bash(ctx, s.ID, api.BashRequest{Script: "echo hello; touch made"})
		if err != nil {
			t.Error(err)
		}
		ran <- r
	}()
	buf := make([]byte, 4096)
	var text strings.Builder
	for !strings.Contains(text.String(), "[N]o: ") {
		n, err := prompts.Read(buf)
		if err != nil {
			t.Fatalf("the question was not asked: %v (%q)", err, text.String())
		}
		text.Write(buf[:n])
	}
	if !strings.Contains(text.String(), "touch made") {
		t.Errorf("the question reads %q", text.String())
	}
	go io.Copy(io.Discard, prompts)
	inW.Write([]byte("y\n"))
	if r := <-ran; r.Result == nil || r.End.Kind != orchestrator.Finished {
		t.Fatalf("the approved step: %+v", r.Result)
	}
	if _, err := os.Stat(filepath.Join(ws, "made")); err != nil {
		t.Errorf("the approved step did not run: %v", err)
	}
	if _, err := c.CloseSession(ctx, s.ID); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-served:
		if err != nil {
			t.Errorf("serve at the session's close: %v", err)
		}
	case <-ctx.Done():
		t.Fatal("the session's close did not end the terminal")
	}
	var kinds []string
	output := ""
	sh.mu.Lock()
	for _, e := range sh.events {
		kinds = append(kinds, e.Kind)
		if e.Output != nil {
			output += e.Output.Data
		}
	}
	sh.mu.Unlock()
	if output != "hello\n" || kinds[len(kinds)-1] != api.EventClosed || strings.Contains(strings.Join(kinds, " "), api.EventQuestion) {
		t.Errorf("shown %v, output %q", kinds, output)
	}

	// The input's end, then the context's, each end a terminal serving an open session.
	s, err = c.Open(ctx, api.OpenRequest{Workspace: ws})
	if err != nil {
		t.Fatal(err)
	}
	for _, stop := range []string{"input", "context"} {
		st, err := c.Events(ctx, s.ID, api.StreamInteractive)
		if err != nil {
			t.Fatal(err)
		}
		var in io.Reader = strings.NewReader("")
		sctx, scancel := context.WithCancel(ctx)
		if stop == "context" {
			r, w := io.Pipe()
			defer w.Close()
			in = r
			scancel()
		}
		if err := New(in, io.Discard, nil).Serve(sctx, st, func(api.Event) {}); err != nil {
			t.Errorf("%s's end: %v", stop, err)
		}
		scancel()
	}
}

// A script run in a session of its own in a daemon asks the terminal AskFor set up; its
// answer decides the step, and what the run was opened with still hears of the opening.
func TestAskFor(t *testing.T) {
	c := daemonOf(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ws := t.TempDir()
	inR, inW := io.Pipe()
	defer inW.Close()
	prompts, asked := io.Pipe()
	opened := make(chan string, 1)
	o := client.RunOptions{Open: api.OpenRequest{Workspace: ws}, Script: "touch made", Opened: func(s api.Session) { opened <- s.ID }}
	AskFor(ctx, c, &o, inR, asked)
	go func() {
		buf := make([]byte, 4096)
		var text strings.Builder
		for !strings.Contains(text.String(), "[N]o: ") {
			n, err := prompts.Read(buf)
			if err != nil {
				return
			}
			text.Write(buf[:n])
		}
		inW.Write([]byte("y\n"))
		io.Copy(io.Discard, prompts)
	}()
	ran, err := c.Run(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	if r := ran.Bash.Result; r.End.Kind != orchestrator.Finished {
		t.Fatalf("the approved step: %+v", r.End)
	}
	if _, err := os.Stat(filepath.Join(ws, "made")); err != nil {
		t.Errorf("the approved step did not run: %v", err)
	}
	if id := <-opened; id != ran.Closed.ID {
		t.Errorf("opened %q, closed %q", id, ran.Closed.ID)
	}
	asked.Close()
}
