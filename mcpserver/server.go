// Package mcpserver serves one Paddock session as a Model Context Protocol server: an agent
// harness (Claude Code, Codex CLI, any MCP client) gets a shell tool and file tools whose
// every step and access runs in the session's sandbox and is decided by its policy. A
// question the policy puts to a person becomes an elicitation request to the client; a
// client that cannot elicit gets the refusal, as in CI.
//
// It is built on the official Go SDK (github.com/modelcontextprotocol/go-sdk): the SDK does
// the protocol, the schemas and their validation; this package only maps tools onto the
// session (bash onto Session.Run with one Shell for the connection, the file tools onto the
// fs.* host requests, which map and judge every path as the kernel's own requests are).
package mcpserver

import (
	"context"
	"fmt"
	"net/http"
	"path"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/paddockhq/paddock/errdefs"
	"github.com/paddockhq/paddock/internal/sshfile"
)

// Options configure a server.
type Options struct {
	// Name and Version are what the server tells a client it is.
	Name, Version string
	// SSH reads ssh://HOST/PATH for the read tool (the hosts of the trusted setting
	// ssh.hosts); nil: such a read is refused.
	SSH *sshfile.Reader
}

// Server serves one session over MCP. The shell the bash tool continues and the versions
// of the files read are the server's, so one server is one agent's view of the session.
type Server struct {
	s   Session
	srv *mcp.Server
	ssh *sshfile.Reader

	mu         sync.Mutex
	seen       map[string]string             // guarded by mu: sandbox path -> the content's hash as read or written
	rounds     *asker                        // guarded by mu: the clients of 2026-07-28 and later, once one can answer
	direct     map[*mcp.ServerSession]*asker // guarded by mu: older clients that can answer, by connection
	detach     []func()                      // guarded by mu: Close's
	calls      map[string]*round             // guarded by mu: tool calls waiting for answers, by request state
	endedCalls []string                      // guarded by mu: calls that ended, oldest first (see ended)
	n          int                           // guarded by mu: rounds made
}

// New makes a server for s (Local, Remote) with every tool registered.
func New(s Session, o Options) *Server {
	if o.Name == "" {
		o.Name = "paddock"
	}
	x := &Server{s: s, ssh: o.SSH, seen: map[string]string{}, calls: map[string]*round{}, direct: map[*mcp.ServerSession]*asker{}}
	x.srv = mcp.NewServer(&mcp.Implementation{Name: o.Name, Version: o.Version}, &mcp.ServerOptions{
		Instructions: instructions,
	})
	x.addShellTools()
	x.addFileTools()
	return x
}

const instructions = `Every shell step and file access runs in a Paddock sandbox and is decided by its policy.
The bash tool is one shell: cd and exported variables hold from one call to the next. A step
outside the policy's auto set is asked of the person (through this client when it supports
elicitation) or refused with its reason; a refused step stops the script there.`

// Run serves the server on t until the client leaves or ctx ends, then closes it.
func (x *Server) Run(ctx context.Context, t mcp.Transport) error {
	defer x.Close()
	return x.srv.Run(ctx, t)
}

// Handler serves the server over streamable HTTP (the SDK's handler, with its protection
// against DNS rebinding: a loopback request naming another host is refused). It does no
// authentication of its own.
func (x *Server) Handler() http.Handler {
	return mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return x.srv }, nil)
}

// Close detaches the clients that answer questions: a question posed after it is refused
// as unanswered.
func (x *Server) Close() {
	x.mu.Lock()
	detach := x.detach
	x.detach, x.rounds = nil, nil
	x.mu.Unlock()
	for _, d := range detach {
		d()
	}
}

// cwd is the sandbox directory relative paths and the next step start from.
func (x *Server) cwd() string { return x.s.Cwd() }

// abs is p made absolute against the shell's directory.
func (x *Server) abs(p string) string {
	if p == "" {
		return x.cwd()
	}
	if path.IsAbs(p) {
		return p
	}
	return path.Join(x.cwd(), p)
}

// text is a tool's result as text.
func text(s string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
}

// ToolError is a tool's refusal or failure as the agent gets it: a stable code, the error's
// class, a message safe to show.
type ToolError struct {
	Code    string `json:"code"`
	Class   string `json:"class"`
	Message string `json:"message"`
}

// fail is err as a tool error result: its code and class (errdefs) in the structured
// content and the text, so an agent and a program both read it; the session goes on.
func fail(err error) (*mcp.CallToolResult, any, error) {
	c, code := errdefs.Of(err)
	te := ToolError{Code: code, Class: c.String(), Message: err.Error()}
	return &mcp.CallToolResult{
		IsError:           true,
		Content:           []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf("error [%s]: %s", te.Code, te.Message)}},
		StructuredContent: map[string]any{"error": te},
	}, nil, nil
}

// refuse is a tool error of this package's own, with its class and code.
func refuse(c errdefs.Class, code, format string, args ...any) (*mcp.CallToolResult, any, error) {
	return fail(errdefs.New(c, code, fmt.Sprintf(format, args...)))
}
