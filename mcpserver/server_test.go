package mcpserver

import (
	"context"
	"os"
	"runtime"
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
	x := New(s, Options{})
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

// A round's state names a call waiting; any other is refused, and the session goes on.
func TestUnknownRoundState(t *testing.T) {
	t.Parallel()
	s := openLocal(t, t.TempDir())
	cs := connect(t, s, &mcp.ClientOptions{ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
		return &mcp.ElicitResult{Action: "decline"}, nil
	}})
	p := &mcp.CallToolParams{Name: "bash", Arguments: map[string]any{"command": "true"}}
	res, err := cs.CallTool(context.Background(), p)
	if err != nil || res.IsError {
		t.Fatalf("bash: %v %+v", err, res)
	}
	raw := &mcp.CallToolParamsRaw{Name: "bash", Arguments: []byte(`{"command":"echo hi"}`), RequestState: "call-999"}
	_ = raw
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
