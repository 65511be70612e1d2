package integration

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/paddockhq/paddock/client"
	"github.com/paddockhq/paddock/daemon/api"
	"github.com/paddockhq/paddock/transport/ssh/sshtest"
)

// mcpClient is the SDK's own client connected to a real `paddock mcp` process over stdio.
// Questions are answered by answer (nil: every question declined); each is kept.
type mcpClient struct {
	t  testing.TB
	cs *mcp.ClientSession

	mu       sync.Mutex
	asked    []string                           // guarded by mu: the questions' messages
	answerFn func(msg string) *mcp.ElicitResult // guarded by mu
}

func startMCP(t testing.TB, ws string, elicit bool, args ...string) *mcpClient {
	t.Helper()
	return startMCPWith(t, ws, elicit, nil, nil, nil, args...)
}

// startMCPWith is startMCP with the client's own options (nil: none), session options (nil:
// the latest protocol version) and variables for the process (after a clean settings home).
func startMCPWith(t testing.TB, ws string, elicit bool, opts *mcp.ClientOptions, so *mcp.ClientSessionOptions, env []string, args ...string) *mcpClient {
	t.Helper()
	bin := paddockBinary(t)
	c := &mcpClient{t: t}
	if opts == nil {
		opts = &mcp.ClientOptions{}
	}
	if elicit {
		opts.ElicitationHandler = func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			c.mu.Lock()
			defer c.mu.Unlock()
			c.asked = append(c.asked, req.Params.Message)
			if c.answerFn == nil {
				return &mcp.ElicitResult{Action: "decline"}, nil
			}
			return c.answerFn(req.Params.Message), nil
		}
	}
	cmd := exec.Command(bin, append([]string{"mcp"}, args...)...)
	cmd.Dir = ws
	cmd.Env = append(append(os.Environ(), "XDG_CONFIG_HOME="+t.TempDir()), env...)
	cmd.Stderr = testWriter{t}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "paddock-test", Version: "1"}, opts).Connect(context.Background(), &mcp.CommandTransport{Command: cmd}, so)
	if err != nil {
		t.Fatal(err)
	}
	c.cs = cs
	t.Cleanup(func() {
		if err := cs.Close(); err != nil {
			t.Errorf("closing the MCP session: %v", err)
		}
	})
	return c
}

func (c *mcpClient) answer(f func(msg string) *mcp.ElicitResult) {
	c.mu.Lock()
	c.answerFn = f
	c.mu.Unlock()
}

func (c *mcpClient) questions() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.asked)
}

// call calls a tool; the text of its result, and whether it is a tool error.
func (c *mcpClient) call(name string, args map[string]any) (string, bool) {
	c.t.Helper()
	res, err := c.cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		c.t.Fatalf("%s %v: %v", name, args, err)
	}
	var b strings.Builder
	for _, ct := range res.Content {
		if tc, ok := ct.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String(), res.IsError
}

// ok calls a tool that must succeed.
func (c *mcpClient) ok(name string, args map[string]any) string {
	c.t.Helper()
	out, isErr := c.call(name, args)
	if isErr {
		c.t.Fatalf("%s %v: %s", name, args, out)
	}
	return out
}

// refused calls a tool that must fail with code.
func (c *mcpClient) refused(name string, args map[string]any, code string) string {
	c.t.Helper()
	out, isErr := c.call(name, args)
	if !isErr || !strings.Contains(out, "["+code+"]") {
		c.t.Fatalf("%s %v: %s, want the error %s", name, args, out, code)
	}
	return out
}

func mcpWorkspace(t testing.TB) string {
	ws, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for p, body := range map[string]string{
		"a.txt":        "alpha\nbeta\n",
		"twice.txt":    "x and x\n",
		"unread.txt":   "never read\n",
		"src/main.go":  "package main\n\nfunc main() {}\n",
		".env":         "TOKEN=hunter2\n",
		".gitignore":   "build/\n",
		"build/out.go": "package build\n",
	} {
		full := filepath.Join(ws, p)
		os.MkdirAll(filepath.Dir(full), 0o755)
		if err := os.WriteFile(full, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return ws
}

// An agent's session through MCP, on the local and Docker transports: the SDK's own client
// lists the tools, runs a shell that keeps cd and exports, reads, edits, writes, globs and
// greps a real workspace, is asked for a secret (declined: nothing read; accepted: read),
// and waits for a step that detached. Bad input is a tool error with a stable code, and
// the session goes on.
//
// Through a daemon (--host), the same: a session the server opens there, or one already
// open that it attaches to (--session); the shell is a named shell of the daemon's.
func TestMCP(t *testing.T) {
	for _, mode := range []string{"local", "docker", "daemon", "daemon-session"} {
		t.Run(mode, func(t *testing.T) {
			kind := mode
			ws := mcpWorkspace(t)
			// Writes outside the workspace ask (the default auto set lets them run).
			args := []string{"--transport", kind, "--auto-effects", "read,write,exec,net"}
			switch mode {
			case "docker":
				engine(t)
			case "daemon", "daemon-session":
				kind = "local"
				sock, state := serveDirs(t)
				startServe(t, paddockBinary(t), sock, state, append(os.Environ(), "XDG_CONFIG_HOME="+t.TempDir()))
				host := "unix://" + sock
				args = []string{"--host", host, "--transport", kind, "--auto-effects", "read,write,exec,net"}
				dc, err := client.New(host)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(dc.Close)
				// Once the server has gone (its cleanup runs first): a session it opened is
				// closed, one it attached to is still open.
				want := []string{}
				t.Cleanup(func() {
					var open []string
					list, err := dc.Sessions(context.Background())
					if err != nil {
						t.Fatal(err)
					}
					for _, s := range list {
						if s.State == api.Open {
							open = append(open, s.ID)
						}
					}
					if !slices.Equal(open, want) {
						t.Errorf("sessions open after the server left: %v, want %v", open, want)
					}
				})
				if mode == "daemon-session" {
					s, err := dc.Open(context.Background(), api.OpenRequest{Workspace: ws, Transport: kind,
						Settings: map[string]string{"shell.autoEffects": "read,write,exec,net"}})
					if err != nil {
						t.Fatal(err)
					}
					want = []string{s.ID}
					args = []string{"--host", host, "--session", s.ID}
				}
			}
			c := startMCP(t, ws, true, args...)
			tools, err := c.cs.ListTools(context.Background(), nil)
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, tl := range tools.Tools {
				names = append(names, tl.Name)
				if tl.Description == "" || tl.InputSchema == nil {
					t.Errorf("tool %s has no description or schema", tl.Name)
				}
			}
			slices.Sort(names)
			if want := []string{"bash", "edit", "glob", "grep", "job_kill", "job_list", "job_wait", "ls", "read", "write"}; !slices.Equal(names, want) {
				t.Fatalf("tools %v, want %v", names, want)
			}

			// One shell: cd and exports hold; a pipeline runs.
			c.ok("bash", map[string]any{"command": "cd src && export GREETING=hello"})
			if out := c.ok("bash", map[string]any{"command": `pwd; echo "$GREETING"; printf 'b\na\n' | sort | head -n 1`}); !strings.Contains(out, "$ pwd\n"+filepath.Join(ws, "src")+"\n$ echo hello\nhello\n") || !strings.HasSuffix(out, "$ head -n 1\na\n[finished with status 0]\n") {
				t.Fatalf("the second call: %s", out)
			}
			// Relative paths of the file tools start where the shell is.
			if out := c.ok("read", map[string]any{"path": "main.go"}); !strings.Contains(out, "     1\tpackage main\n") {
				t.Fatalf("read: %s", out)
			}
			c.ok("bash", map[string]any{"command": "cd .."})

			// read, edit, write.
			if out := c.ok("read", map[string]any{"path": "a.txt", "offset": 2, "limit": 1}); !strings.Contains(out, "     2\tbeta\n") || strings.Contains(out, "alpha") {
				t.Fatalf("read with offset: %s", out)
			}
			c.ok("edit", map[string]any{"path": "a.txt", "old_string": "alpha", "new_string": "gamma"})
			if b, _ := os.ReadFile(filepath.Join(ws, "a.txt")); string(b) != "gamma\nbeta\n" {
				t.Fatalf("after the edit: %q", b)
			}
			c.ok("read", map[string]any{"path": "twice.txt"})
			c.refused("edit", map[string]any{"path": "twice.txt", "old_string": "x", "new_string": "y"}, "many_matches")
			c.refused("edit", map[string]any{"path": "twice.txt", "old_string": "zzz", "new_string": "y"}, "no_match")
			c.refused("edit", map[string]any{"path": "twice.txt", "edits": []map[string]any{{"old_string": "and", "new_string": "or"}, {"old_string": "zzz", "new_string": "y"}}}, "no_match")
			if b, _ := os.ReadFile(filepath.Join(ws, "twice.txt")); string(b) != "x and x\n" {
				t.Fatalf("a failed edit changed the file: %q", b)
			}
			c.ok("edit", map[string]any{"path": "twice.txt", "edits": []map[string]any{{"old_string": "and", "new_string": "or"}, {"old_string": "x", "new_string": "y", "replace_all": true}}})
			if b, _ := os.ReadFile(filepath.Join(ws, "twice.txt")); string(b) != "y or y\n" {
				t.Fatalf("after two edits: %q", b)
			}
			c.ok("write", map[string]any{"path": "new.txt", "content": "fresh\n"})
			if b, _ := os.ReadFile(filepath.Join(ws, "new.txt")); string(b) != "fresh\n" {
				t.Fatalf("a new file: %q", b)
			}
			c.refused("write", map[string]any{"path": "unread.txt", "content": "x"}, "not_read")
			c.refused("edit", map[string]any{"path": "unread.txt", "old_string": "never", "new_string": "x"}, "not_read")
			if b, _ := os.ReadFile(filepath.Join(ws, "unread.txt")); string(b) != "never read\n" {
				t.Fatalf("a file not read was written: %q", b)
			}
			os.WriteFile(filepath.Join(ws, "src/main.go"), []byte("package changed\n"), 0o644)
			c.refused("write", map[string]any{"path": "src/main.go", "content": "x"}, "changed_since_read")
			c.refused("edit", map[string]any{"path": "src/main.go", "old_string": "changed", "new_string": "main"}, "changed_since_read")

			// glob and grep: .gitignore kept, the secret never read by a walk.
			if out := c.ok("glob", map[string]any{"pattern": "**/*.go"}); strings.TrimSpace(out) != filepath.Join(ws, "src/main.go") {
				t.Fatalf("glob: %s", out)
			}
			out := c.ok("grep", map[string]any{"pattern": "^package|TOKEN"})
			if !strings.Contains(out, filepath.Join(ws, "src/main.go")+":1:package changed") || strings.Contains(out, "hunter2") || !strings.Contains(out, ".env") {
				t.Fatalf("grep: %s", out)
			}
			if out := c.ok("grep", map[string]any{"pattern": "beta", "output_mode": "files_with_matches"}); !strings.HasPrefix(out, filepath.Join(ws, "a.txt")+"\n[not searched") {
				t.Fatalf("grep files: %s", out)
			}
			if out := c.ok("ls", map[string]any{}); !strings.Contains(out, "  src/\n") || !strings.Contains(out, "  a.txt (11 bytes)\n") {
				t.Fatalf("ls: %s", out)
			}

			// A secret read asks: declined, nothing read; accepted, read.
			out = c.refused("read", map[string]any{"path": ".env"}, "needs_approval")
			if strings.Contains(out, "hunter2") {
				t.Fatalf("a declined read gave the secret: %s", out)
			}
			if q := c.questions(); len(q) != 1 || !strings.Contains(q[0], "fs.read "+filepath.Join(ws, ".env")) || !strings.Contains(q[0], "secret") {
				t.Fatalf("questions %q", q)
			}
			c.answer(func(string) *mcp.ElicitResult {
				return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"answer": "yes"}}
			})
			if out := c.ok("read", map[string]any{"path": ".env"}); !strings.Contains(out, "TOKEN=hunter2") {
				t.Fatalf("an accepted read: %s", out)
			}
			if out := c.ok("bash", map[string]any{"command": "cat .env | tr a-z A-Z"}); !strings.Contains(out, "TOKEN=HUNTER2") {
				t.Fatalf("an accepted step: %s", out)
			}
			c.answer(nil)
			if out, _ := c.call("bash", map[string]any{"command": "cat .env"}); strings.Contains(out, "hunter2") || !strings.Contains(out, "denied") {
				t.Fatalf("a declined step: %s", out)
			}

			// A long step detaches and is waited for.
			gate := filepath.Join(ws, "gate")
			out = c.ok("bash", map[string]any{"command": "until [ -e " + gate + " ]; do sleep 0.05; done; echo through", "timeout": 0.5})
			i := strings.Index(out, "still running as job ")
			if i < 0 {
				t.Fatalf("the step did not detach: %s", out)
			}
			job := strings.TrimRight(strings.Fields(out[i+len("still running as job "):])[0], "]")
			if out := c.ok("job_list", map[string]any{}); !strings.Contains(out, job+"\trunning") {
				t.Fatalf("job_list: %s", out)
			}
			os.WriteFile(gate, nil, 0o644)
			if out := c.ok("job_wait", map[string]any{"job": job}); !strings.Contains(out, "through") || strings.Contains(out, "still running") {
				t.Fatalf("job_wait: %s", out)
			}

			// Bad input: each a tool error with a stable code, the session still usable.
			if _, err := c.cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "rm_rf", Arguments: map[string]any{}}); err == nil {
				t.Fatal("an unknown tool was called")
			}
			if res, err := c.cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "bash", Arguments: map[string]any{"command": 42}}); err == nil && !res.IsError {
				t.Fatal("a command that is not a string ran")
			}
			// Outside the workspace: a container's path map has no such mount; the local
			// transport's map is the host's own, and a write there asks.
			outsideCode := map[string]string{"local": "not_found", "docker": "outside"}[kind]
			c.refused("read", map[string]any{"path": "/no-such-mount/x"}, outsideCode)
			c.refused("read", map[string]any{"path": "missing.txt"}, "not_found")
			c.refused("job_wait", map[string]any{"job": "j999"}, "not_found")
			c.refused("bash", map[string]any{"command": "true", "timeout": 9999}, "bad_timeout")
			outside := filepath.Join(t.TempDir(), "outside.txt")
			c.refused("write", map[string]any{"path": outside, "content": "x"}, map[string]string{"local": "needs_approval", "docker": "outside"}[kind])
			if _, err := os.Stat(outside); err == nil {
				t.Fatal("a refused write outside the workspace wrote")
			}
			if out := c.ok("bash", map[string]any{"command": "echo still here"}); !strings.Contains(out, "still here") {
				t.Fatalf("after bad input: %s", out)
			}
		})
	}
}

// A client that cannot elicit is never asked: a step that asks is refused with guidance,
// as in CI.
func TestMCPWithoutElicitation(t *testing.T) {
	ws := mcpWorkspace(t)
	c := startMCP(t, ws, false, "--transport", "local")
	out := c.refused("read", map[string]any{"path": ".env"}, "needs_approval")
	if strings.Contains(out, "hunter2") || !strings.Contains(out, "nobody was attached") {
		t.Fatalf("read of a secret: %s", out)
	}
	if out, _ := c.call("bash", map[string]any{"command": "cat .env"}); strings.Contains(out, "hunter2") || !strings.Contains(out, "refused step 1") {
		t.Fatalf("cat of a secret: %s", out)
	}
}

// A client of a protocol before 2026-07-28 is asked by elicitation requests of the server's
// own while its call waits; "always" answers the step and every later one that starts with
// the same command (a secret still asks each time).
func TestMCPOlderProtocol(t *testing.T) {
	ws := mcpWorkspace(t)
	c := startMCPWith(t, ws, true, nil, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"}, nil, "--transport", "local", "--auto-effects", "read")
	if v := c.cs.InitializeResult().ProtocolVersion; v != "2025-11-25" {
		t.Fatalf("protocol %s", v)
	}
	c.refused("read", map[string]any{"path": ".env"}, "needs_approval")
	c.answer(func(string) *mcp.ElicitResult {
		return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"answer": "always"}}
	})
	if out := c.ok("read", map[string]any{"path": ".env"}); !strings.Contains(out, "TOKEN=hunter2") {
		t.Fatalf("read with a yes: %s", out)
	}
	c.ok("bash", map[string]any{"command": "touch made1"})
	c.answer(nil)
	if out := c.ok("bash", map[string]any{"command": "touch made2 && ls made1 made2"}); !strings.Contains(out, "made1\nmade2\n") {
		t.Fatalf("a step after always: %s", out)
	}
	if out, _ := c.call("read", map[string]any{"path": ".env"}); strings.Contains(out, "hunter2") {
		t.Fatalf("a secret read again without a yes: %s", out)
	}
	q := c.questions()
	if len(q) != 4 || !strings.Contains(q[2], "touch made1") || !strings.Contains(q[3], "fs.read") {
		t.Fatalf("questions %q", q)
	}
}

// A long step sends its output as progress notifications to a client that asks for them.
// The client's SDK may hand a notification to its handler after the call's result, so the
// test waits for the second step's notification rather than reading what came before it.
func TestMCPProgress(t *testing.T) {
	ws := mcpWorkspace(t)
	var mu sync.Mutex
	var got []string
	second := make(chan struct{})
	opts := &mcp.ClientOptions{ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, req.Params.Message)
		if strings.Contains(req.Params.Message, "step 2: second") {
			close(second)
		}
	}}
	c := startMCPWith(t, ws, false, opts, nil, nil, "--transport", "local")
	params := &mcp.CallToolParams{Name: "bash", Arguments: map[string]any{"command": "echo first; echo second"}}
	params.SetProgressToken("p1")
	res, err := c.cs.CallTool(context.Background(), params)
	if err != nil || res.IsError {
		t.Fatalf("bash: %v %+v", err, res)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	select {
	case <-second:
	case <-ctx.Done():
	}
	mu.Lock()
	defer mu.Unlock()
	if all := strings.Join(got, "|"); !strings.Contains(all, "step 1: first") || !strings.Contains(all, "step 2: second") {
		t.Fatalf("progress %q", got)
	}
}

// ssh://HOST/PATH reads a file on a box the trusted settings list, numbered as any read; a
// box they do not list, or a session with none, is refused.
func TestMCPReadOverSSH(t *testing.T) {
	srv := sshtest.Start(t)
	home := srv.Home(t)
	conf := filepath.Join(home, ".config")
	if err := os.MkdirAll(filepath.Join(conf, "paddock"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(conf, "paddock", "settings.json"), []byte(`{"ssh":{"hosts":["`+sshtest.Alias+`"]}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	remote := t.TempDir()
	os.WriteFile(filepath.Join(remote, "notes.txt"), []byte("first\nsecond\nthird\n"), 0o644)
	ws := mcpWorkspace(t)
	c := startMCPWith(t, ws, false, nil, nil, []string{"XDG_CONFIG_HOME=" + conf}, "--transport", "local")
	url := "ssh://" + sshtest.Alias + remote + "/notes.txt"
	if out := c.ok("read", map[string]any{"path": url, "offset": 2, "limit": 1}); !strings.Contains(out, "     2\tsecond\n") || strings.Contains(out, "first") {
		t.Fatalf("a read over ssh: %s", out)
	}
	c.refused("read", map[string]any{"path": "ssh://" + sshtest.Alias + remote + "/missing"}, "not_found")
	c.refused("read", map[string]any{"path": "ssh://other" + remote + "/notes.txt"}, "not_allowed")
	c.refused("read", map[string]any{"path": "ssh://" + sshtest.Alias + "/.." + remote}, "escapes")
	bare := startMCP(t, ws, false, "--transport", "local")
	bare.refused("read", map[string]any{"path": url}, "not_allowed")
}
