package prompt

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/paddockhq/paddock/daemon/api"
	"github.com/paddockhq/paddock/orchestrator"
)

// syncBuffer is a buffer written by one goroutine and read by another, which can wait for
// what it holds (await).
type syncBuffer struct {
	mu      sync.Mutex
	b       strings.Builder
	written chan struct{} // guarded by mu: closed and replaced at each write
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.written != nil {
		close(s.written)
		s.written = nil
	}
	return s.b.Write(p)
}

// await waits until cond holds of what the buffer holds, looking again at each write.
func (s *syncBuffer) await(ctx context.Context, cond func(string) bool) error {
	for {
		s.mu.Lock()
		held := s.b.String()
		if s.written == nil {
			s.written = make(chan struct{})
		}
		w := s.written
		s.mu.Unlock()
		if cond(held) {
			return nil
		}
		select {
		case <-w:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Attach shows a session's output and its questions as the terminal renders them
// (escaped, the subagent named); its answer decides; Enter alone answers no.
func TestAttach(t *testing.T) {
	c := daemonOf(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ws := t.TempDir()
	s, err := c.Open(ctx, api.OpenRequest{Workspace: ws})
	if err != nil {
		t.Fatal(err)
	}
	if s.Transport != "local" {
		t.Errorf("transport %q", s.Transport)
	}
	child, err := c.Spawn(ctx, s.ID, api.SpawnRequest{Name: "writer\x1b[31m"})
	if err != nil {
		t.Fatal(err)
	}
	// The terminal answers yes to the first question and Enter alone to the second.
	inR, inW, _ := os.Pipe()
	defer inW.Close()
	inW.WriteString("y\n\n")
	var out, errOut syncBuffer
	attached := make(chan error, 1)
	go func() { attached <- Attach(ctx, c, s.ID, inR, &out, &errOut, false) }()
	shows := func(b *syncBuffer, what, want string) {
		t.Helper()
		if b.await(ctx, func(s string) bool { return strings.Contains(s, want) }) != nil {
			t.Fatalf("%s; stdout %q, stderr %q", what, out.String(), errOut.String())
		}
	}
	shows(&errOut, "attached", "attached to session")

	r, err := c.Bash(ctx, s.ID, api.BashRequest{Script: "echo hello; touch $'a\\tb'"})
	if err != nil || r.End.Kind != orchestrator.Finished {
		t.Fatalf("%v %+v", err, r.Result)
	}
	if _, err := os.Stat(filepath.Join(ws, "a\tb")); err != nil {
		t.Errorf("the approved step did not run: %v", err)
	}
	r, err = c.Bash(ctx, child.ID, api.BashRequest{Script: "touch nope"})
	if err != nil || r.End.Kind != orchestrator.Refused || r.End.Code != "denied" {
		t.Fatalf("Enter alone: %v %+v", err, r.Result)
	}
	shows(&out, "the output shown", "hello\n")
	prompts := errOut.String()
	for _, want := range []string{
		"a step asks to run step 2 [write]:\n  touch $'a\\x09b'\n",
		"subagent writer$'\\x1b'[31m asks to run step 1 [write]:\n  touch nope\n",
		"[N]o: ",
	} {
		if !strings.Contains(prompts, want) {
			t.Errorf("the terminal lacks %q:\n%s", want, prompts)
		}
	}
	c.CloseSession(ctx, s.ID)
	select {
	case err := <-attached:
		if err != nil {
			t.Errorf("attach: %v", err)
		}
	case <-ctx.Done():
		t.Fatal("attach did not end with its session")
	}
}
