package mcpserver

import (
	"context"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/paddockhq/paddock/images"
	"github.com/paddockhq/paddock/orchestrator"
	"github.com/paddockhq/paddock/transport/local"
)

// openLocal opens a local session in dir.
func openLocal(t testing.TB, dir string) *orchestrator.Session {
	t.Helper()
	k, err := images.Default.Find(context.Background(), runtime.GOARCH)
	if err != nil {
		t.Fatal(err)
	}
	s, err := orchestrator.Open(context.Background(), orchestrator.Config{Workspace: dir, Transport: &local.Transport{Stderr: os.Stderr}, Kernel: k,
		Env: []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + dir, "LC_ALL=C"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// connect serves a server for s in memory and connects the SDK's client to it.
func connect(t testing.TB, s *orchestrator.Session, opts *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	x := New(Local(s), Options{})
	st, ct := mcp.NewInMemoryTransports()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- x.Run(ctx, st) }()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test"}, opts).Connect(context.Background(), ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close(); cancel(); <-done })
	return cs
}

func callText(t testing.TB, cs *mcp.ClientSession, name string, args map[string]any) (string, bool) {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String(), res.IsError
}

// A round's state names a call waiting; any other is refused with its code, and the session
// goes on.
func TestUnknownRoundState(t *testing.T) {
	t.Parallel()
	s := openLocal(t, t.TempDir())
	cs := connect(t, s, &mcp.ClientOptions{ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
		return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"answer": "yes"}}, nil
	}})
	for _, state := range []string{"call-999", "call-1", "x"} {
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "bash", Arguments: map[string]any{"command": "echo forged"},
			RequestState: state, InputResponses: mcp.InputResponseMap{"q1": &mcp.ElicitResult{Action: "accept", Content: map[string]any{"answer": "yes"}}}})
		if err != nil {
			t.Fatal(err)
		}
		var text string
		for _, c := range res.Content {
			if tc, ok := c.(*mcp.TextContent); ok {
				text += tc.Text
			}
		}
		if !res.IsError || !strings.Contains(text, "[unknown_state]") || strings.Contains(text, "forged") {
			t.Fatalf("state %q: %s", state, text)
		}
	}
	if out, isErr := callText(t, cs, "bash", map[string]any{"command": "echo still"}); isErr || !strings.Contains(out, "still") {
		t.Fatalf("after: %s", out)
	}
}

// BenchmarkStep is a `true` step through the MCP server in memory beside the same step on
// the session itself: what the protocol adds.
func BenchmarkStep(b *testing.B) {
	s := openLocal(b, b.TempDir())
	cs := connect(b, s, nil)
	b.Run("mcp", func(b *testing.B) {
		for range b.N {
			if out, isErr := callText(b, cs, "bash", map[string]any{"command": "true"}); isErr {
				b.Fatal(out)
			}
		}
	})
	b.Run("session-budgeted", func(b *testing.B) {
		for range b.N {
			if _, err := s.Run(context.Background(), orchestrator.Call{Script: "true", Budget: time.Minute}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("session", func(b *testing.B) {
		for range b.N {
			if _, err := s.Bash(context.Background(), "true"); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// raw calls a tool with the client's round-trip handling off: its result as it comes.
func raw(t *testing.T, cs *mcp.ClientSession, p *mcp.CallToolParams) *mcp.CallToolResult {
	t.Helper()
	res, err := cs.CallTool(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// ids is the question ids of an input-required result.
func ids(res *mcp.CallToolResult) []string {
	var out []string
	for id := range res.InputRequests {
		out = append(out, id)
	}
	slices.Sort(out)
	return out
}

// In rounds, an answer is taken only for a question the call itself handed out: a yes for
// another question, known or forged, changes nothing. A question a call handed out and never
// came back for is handed out again by the next call.
func TestRoundsAnswerOnlyWhatWasAsked(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := os.WriteFile(dir+"/.env", []byte("TOKEN=hunter2\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s := openLocal(t, dir)
	cs := connect(t, s, &mcp.ClientOptions{MultiRoundTrip: &mcp.MultiRoundTripOptions{Disabled: true},
		ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			t.Error("an elicitation request was sent on a protocol that has rounds")
			return &mcp.ElicitResult{Action: "decline"}, nil
		}})
	yes := &mcp.ElicitResult{Action: "accept", Content: map[string]any{"answer": "yes"}}
	no := &mcp.ElicitResult{Action: "decline"}

	a := raw(t, cs, &mcp.CallToolParams{Name: "read", Arguments: map[string]any{"path": ".env"}})
	if !a.NeedsInput() || len(a.InputRequests) != 1 {
		t.Fatalf("the read did not ask: %+v", a)
	}
	qa := ids(a)[0]
	// A second call is handed the first call's question, which nobody answered.
	b := raw(t, cs, &mcp.CallToolParams{Name: "bash", Arguments: map[string]any{"command": "cat .env"}})
	if !b.NeedsInput() || !slices.Contains(ids(b), qa) {
		t.Fatalf("the second call was not handed the open question: %v", ids(b))
	}
	// b goes on until its own step asks.
	for !slices.ContainsFunc(ids(b), func(id string) bool { return id != qa }) {
		b = raw(t, cs, &mcp.CallToolParams{Name: "bash", Arguments: map[string]any{"command": "cat .env"}, RequestState: b.RequestState})
		if !b.NeedsInput() {
			t.Fatalf("the step ran unasked: %+v", b)
		}
	}
	qb := slices.DeleteFunc(ids(b), func(id string) bool { return id == qa })[0]
	// A yes to b's question through a's state, and a forged one, are not taken.
	a = raw(t, cs, &mcp.CallToolParams{Name: "read", Arguments: map[string]any{"path": ".env"}, RequestState: a.RequestState,
		InputResponses: mcp.InputResponseMap{qb: yes, "forged": yes}})
	if !a.NeedsInput() {
		t.Fatalf("the read ended: %+v", a)
	}
	// b's own answers: no to its step, no to the read; both are refused.
	b = raw(t, cs, &mcp.CallToolParams{Name: "bash", Arguments: map[string]any{"command": "cat .env"}, RequestState: b.RequestState,
		InputResponses: mcp.InputResponseMap{qb: no, qa: no}})
	if b.NeedsInput() {
		t.Fatalf("the step still waits: %v", ids(b))
	}
	text := b.Content[0].(*mcp.TextContent).Text
	if strings.Contains(text, "hunter2") || !strings.Contains(text, "denied") {
		t.Fatalf("the step: %s", text)
	}
	a = raw(t, cs, &mcp.CallToolParams{Name: "read", Arguments: map[string]any{"path": ".env"}, RequestState: a.RequestState})
	if a.NeedsInput() || !a.IsError || strings.Contains(a.Content[0].(*mcp.TextContent).Text, "hunter2") {
		t.Fatalf("the read: %+v", a)
	}
}

// Calls that ended with nobody come back for their result are kept, the newest keptEnded of
// them: a client that never comes back leaks nothing.
func TestEndedCallsBounded(t *testing.T) {
	t.Parallel()
	x := &Server{calls: map[string]*round{}}
	for i := range 3 * keptEnded {
		id := "call-" + strconv.Itoa(i)
		x.calls[id] = &round{}
		x.ended(id)
	}
	if len(x.calls) != keptEnded || x.calls["call-"+strconv.Itoa(3*keptEnded-1)] == nil {
		t.Fatalf("%d calls kept", len(x.calls))
	}
}
