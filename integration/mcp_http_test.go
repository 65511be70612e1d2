package integration

import (
	"bufio"
	"context"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// startMCPHTTP starts `paddock mcp --listen listen` in ws and returns the endpoint it says
// it serves, once it says so.
func startMCPHTTP(t *testing.T, ws, listen string, env []string, args ...string) string {
	t.Helper()
	cmd := exec.Command(paddockBinary(t), append([]string{"mcp", "--listen", listen}, args...)...)
	cmd.Dir = ws
	cmd.Env = append(append(os.Environ(), "XDG_CONFIG_HOME="+t.TempDir()), env...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	t.Cleanup(func() {
		cmd.Process.Signal(os.Interrupt)
		<-done
	})
	lines := bufio.NewScanner(stderr)
	for lines.Scan() {
		if at, ok := strings.CutPrefix(lines.Text(), "paddock: serving MCP on "); ok {
			go func() {
				for lines.Scan() {
					t.Log(lines.Text())
				}
				cmd.Wait()
				close(done)
			}()
			return at
		}
		t.Log(lines.Text())
	}
	cmd.Wait()
	close(done)
	t.Fatal("paddock mcp --listen ended before it served")
	return ""
}

// withHeader adds a header to every request.
type withHeader struct {
	rt          http.RoundTripper
	name, value string
}

func (h withHeader) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set(h.name, h.value)
	return h.rt.RoundTrip(r)
}

// connectHTTP connects the SDK's client over streamable HTTP with hc.
func connectHTTP(t *testing.T, endpoint string, hc *http.Client, elicit func(msg string) *mcp.ElicitResult) *mcpClient {
	t.Helper()
	c := &mcpClient{t: t, answerFn: elicit}
	opts := &mcp.ClientOptions{ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
		c.mu.Lock()
		defer c.mu.Unlock()
		c.asked = append(c.asked, req.Params.Message)
		if c.answerFn == nil {
			return &mcp.ElicitResult{Action: "decline"}, nil
		}
		return c.answerFn(req.Params.Message), nil
	}}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "paddock-test"}, opts).Connect(context.Background(),
		&mcp.StreamableClientTransport{Endpoint: endpoint, HTTPClient: hc, MaxRetries: -1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	c.cs = cs
	t.Cleanup(func() { cs.Close() })
	return c
}

// On loopback, every request carries the bearer token: one without it, or with another, is
// refused before the MCP server sees it; with it, the session is served as on stdio (the
// shell kept, a secret asked and answered).
func TestMCPHTTPLoopback(t *testing.T) {
	ws := mcpWorkspace(t)
	endpoint := startMCPHTTP(t, ws, "127.0.0.1:0", []string{"PADDOCK_MCP_TOKEN=s3cret"}, "--transport", "local")
	for _, auth := range []string{"", "Bearer wrong", "Bearer s3cre", "s3cret"} {
		req, _ := http.NewRequest("POST", endpoint, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
		req.Header.Set("Content-Type", "application/json")
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusUnauthorized {
			t.Fatalf("Authorization %q: status %d", auth, res.StatusCode)
		}
	}
	hc := &http.Client{Transport: withHeader{http.DefaultTransport, "Authorization", "Bearer s3cret"}}
	c := connectHTTP(t, endpoint, hc, func(string) *mcp.ElicitResult {
		return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"answer": "yes"}}
	})
	c.ok("bash", map[string]any{"command": "cd src && export V=kept"})
	if out := c.ok("bash", map[string]any{"command": `pwd; echo "$V"`}); !strings.Contains(out, filepath.Join(ws, "src")+"\n") || !strings.Contains(out, "kept\n") {
		t.Fatalf("the shell over HTTP: %s", out)
	}
	if out := c.ok("read", map[string]any{"path": "../.env"}); !strings.Contains(out, "hunter2") {
		t.Fatalf("an accepted secret read over HTTP: %s", out)
	}
	if q := c.questions(); len(q) != 1 {
		t.Fatalf("questions %q", q)
	}
	// A request naming another host through loopback (DNS rebinding) is refused.
	req, _ := http.NewRequest("POST", endpoint, strings.NewReader(`{}`))
	req.Host = "evil.example"
	req.Header.Set("Authorization", "Bearer s3cret")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusForbidden {
		t.Fatalf("a rebound host: status %d", res.StatusCode)
	}
}

// On a unix socket the peer's uid is the check; a non-loopback address is refused before
// anything is opened.
func TestMCPHTTPUnixSocket(t *testing.T) {
	ws := mcpWorkspace(t)
	dir := filepath.Join(t.TempDir(), "s")
	sock := filepath.Join(dir, "mcp.sock")
	endpoint := startMCPHTTP(t, ws, "unix://"+sock, nil, "--transport", "local")
	if !strings.HasPrefix(endpoint, "unix://"+sock) {
		t.Fatalf("endpoint %q", endpoint)
	}
	if fi, err := os.Stat(sock); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("the socket: %v %v", fi, err)
	}
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", sock)
	}}}
	c := connectHTTP(t, "http://paddock/mcp", hc, nil)
	if out := c.ok("bash", map[string]any{"command": "echo over the socket"}); !strings.Contains(out, "over the socket") {
		t.Fatalf("bash: %s", out)
	}
	_, errOut, code := runPaddock(t, paddockBinary(t), ws, nil, "mcp", "--transport", "local", "--listen", "0.0.0.0:0")
	if code != 2 || !strings.Contains(errOut, "only a loopback address") {
		t.Fatalf("a non-loopback address: status %d, %s", code, errOut)
	}
}
