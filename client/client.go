// Package client is the Go client of Paddock's daemon API (package daemon/api): sessions,
// the bash tool, file access, children, answers, jobs and the event stream, over the
// daemon's unix socket.
package client

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"

	"github.com/paddockhq/paddock/daemon/api"
	"github.com/paddockhq/paddock/errdefs"
)

// Client talks to one daemon.
type Client struct {
	hc     *http.Client
	base   string
	socket string
}

// HostEnv is the environment variable naming the daemon, like --host.
const HostEnv = "PADDOCK_HOST"

// New returns a client of the daemon at host: unix:///path/to/paddock.sock (or a bare
// socket path).
func New(host string) (*Client, error) {
	path, err := SocketPath(host)
	if err != nil {
		return nil, err
	}
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", path)
		},
		MaxIdleConnsPerHost: 64,
	}
	return &Client{hc: &http.Client{Transport: tr}, base: "http://paddock", socket: path}, nil
}

// SocketPath reads a host: unix://PATH or a path.
func SocketPath(host string) (string, error) {
	switch {
	case strings.HasPrefix(host, "unix://"):
		host = strings.TrimPrefix(host, "unix://")
	case strings.Contains(host, "://"):
		return "", fmt.Errorf("host %q: only unix://PATH is served", host)
	}
	if host == "" {
		return "", errors.New("host: no socket path")
	}
	return host, nil
}

// Close closes idle connections.
func (c *Client) Close() { c.hc.CloseIdleConnections() }

// Error is an error the daemon answered; Code is its stable code.
type Error struct {
	Status int
	API    api.Error
}

func (e *Error) Error() string { return e.API.Message }

// Code is the stable code of the error.
func (e *Error) Code() string { return e.API.Code }

// Class is the error's class, as the daemon's status says it.
func (e *Error) Class() errdefs.Class { return errdefs.FromHTTPStatus(e.Status) }

func (c *Client) do(ctx context.Context, method, path string, in, out any) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, body)
	if err != nil {
		return err
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 300 {
		var e api.Error
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		if json.Unmarshal(b, &e) != nil || e.Code == "" {
			e = api.Error{Code: "failed", Message: fmt.Sprintf("%s %s: %s: %s", method, path, resp.Status, bytes.TrimSpace(b))}
		}
		return &Error{Status: resp.StatusCode, API: e}
	}
	if out == nil {
		_, err = io.Copy(io.Discard, resp.Body)
		return err
	}
	return json.NewDecoder(resp.Body).Decode(out)
}

func sp(id string, rest ...string) string {
	p := "/v1/sessions/" + url.PathEscape(id)
	for _, r := range rest {
		p += "/" + r
	}
	return p
}

// Settings returns the settings a session opened with req would have, each with its source.
func (c *Client) Settings(ctx context.Context, req api.OpenRequest) (api.Settings, error) {
	var out api.Settings
	return out, c.do(ctx, "POST", "/v1/settings", req, &out)
}

// Health asks the daemon who it is.
func (c *Client) Health(ctx context.Context) (api.Health, error) {
	var h api.Health
	return h, c.do(ctx, "GET", "/v1/health", nil, &h)
}

// Open opens a session.
func (c *Client) Open(ctx context.Context, req api.OpenRequest) (api.Session, error) {
	var s api.Session
	return s, c.do(ctx, "POST", "/v1/sessions", req, &s)
}

// Sessions lists the sessions.
func (c *Client) Sessions(ctx context.Context) ([]api.Session, error) {
	var s []api.Session
	return s, c.do(ctx, "GET", "/v1/sessions", nil, &s)
}

// Session inspects a session.
func (c *Client) Session(ctx context.Context, id string) (api.Session, error) {
	var s api.Session
	return s, c.do(ctx, "GET", sp(id), nil, &s)
}

// CloseSession closes a session; a child's answer carries its hand-back report.
func (c *Client) CloseSession(ctx context.Context, id string) (api.Session, error) {
	var s api.Session
	return s, c.do(ctx, "DELETE", sp(id), nil, &s)
}

// CloseAll closes every root session the daemon holds, open or ended (a root closes its
// children first, handing their workspaces back), and returns the answers of those it
// closed: on an error, those closed before it.
func (c *Client) CloseAll(ctx context.Context) ([]api.Session, error) {
	ss, err := c.Sessions(ctx)
	if err != nil {
		return nil, err
	}
	var closed []api.Session
	for _, s := range ss {
		if s.Parent != "" {
			continue
		}
		s, err := c.CloseSession(ctx, s.ID)
		if err != nil {
			return closed, err
		}
		closed = append(closed, s)
	}
	return closed, nil
}

// Bash runs a script.
func (c *Client) Bash(ctx context.Context, id string, req api.BashRequest) (api.BashResponse, error) {
	var r api.BashResponse
	return r, c.do(ctx, "POST", sp(id, "bash"), req, &r)
}

// Read reads a file through the session.
func (c *Client) Read(ctx context.Context, id, path string) (api.FSReply, error) {
	var r api.FSReply
	return r, c.do(ctx, "POST", sp(id, "fs", "read"), api.FSReadRequest{Path: path}, &r)
}

// Write writes a file through the session.
func (c *Client) Write(ctx context.Context, id string, req api.FSWriteRequest) (api.FSReply, error) {
	var r api.FSReply
	return r, c.do(ctx, "POST", sp(id, "fs", "write"), req, &r)
}

// FS operations of a session beyond read and write: each served as the sandbox's own host
// requests are (the path map, the policy, an audit record).
const (
	FSEdit = "edit" // api.FSEditRequest -> api.FSEditReply
	FSStat = "stat" // api.FSPathRequest -> api.FSEntry
	FSList = "list" // api.FSPathRequest -> api.FSListReply
	FSGlob = "glob" // api.FSGlobRequest -> api.FSGlobReply
	FSGrep = "grep" // api.FSGrepRequest -> api.FSGrepReply
)

// FS makes a file request of a session: op is read, write or one of the FS operations; in
// and out are its body and its reply (the api package's types, or any of the same JSON).
func (c *Client) FS(ctx context.Context, id, op string, in, out any) error {
	return c.do(ctx, "POST", sp(id, "fs", url.PathEscape(op)), in, out)
}

// Spawn spawns a child.
func (c *Client) Spawn(ctx context.Context, id string, req api.SpawnRequest) (api.Session, error) {
	var s api.Session
	return s, c.do(ctx, "POST", sp(id, "children"), req, &s)
}

// Children lists a session's children.
func (c *Client) Children(ctx context.Context, id string) ([]api.Session, error) {
	var s []api.Session
	return s, c.do(ctx, "GET", sp(id, "children"), nil, &s)
}

// Answer answers a question; a late one gets an error of class errdefs.Gone (code
// shell_approval_gone)
// to errors.As.
func (c *Client) Answer(ctx context.Context, id, question string, a api.AnswerRequest) error {
	return c.do(ctx, "POST", sp(id, "questions", url.PathEscape(question), "answer"), a, nil)
}

// Jobs lists a session's jobs.
func (c *Client) Jobs(ctx context.Context, id string) ([]api.Job, error) {
	var j []api.Job
	return j, c.do(ctx, "GET", sp(id, "jobs"), nil, &j)
}

// Job inspects a job.
func (c *Client) Job(ctx context.Context, id, job string) (api.Job, error) {
	var j api.Job
	return j, c.do(ctx, "GET", sp(id, "jobs", url.PathEscape(job)), nil, &j)
}

// Wait waits for a job's end (timeout "": until it ends or ctx does).
func (c *Client) Wait(ctx context.Context, id, job, timeout string) (api.Job, error) {
	var j api.Job
	p := sp(id, "jobs", url.PathEscape(job), "wait")
	if timeout != "" {
		p += "?timeout=" + url.QueryEscape(timeout)
	}
	return j, c.do(ctx, "POST", p, nil, &j)
}

// Kill kills a job.
func (c *Client) Kill(ctx context.Context, id, job string) (api.Job, error) {
	var j api.Job
	return j, c.do(ctx, "POST", sp(id, "jobs", url.PathEscape(job), "kill"), nil, &j)
}

// Metrics returns the daemon's metrics text.
func (c *Client) Metrics(ctx context.Context) (string, error) {
	req, err := http.NewRequestWithContext(ctx, "GET", c.base+"/metrics", nil)
	if err != nil {
		return "", err
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

// Stream is an open event stream.
type Stream struct {
	resp *http.Response
	sc   *bufio.Scanner
}

// Events opens a session's event stream as a client of kind (api.StreamInteractive,
// StreamGateway, StreamWatch). The stream is attached when Events returns: a question asked
// after it reaches it.
func (c *Client) Events(ctx context.Context, id, kind string) (*Stream, error) {
	req, err := http.NewRequestWithContext(ctx, "GET", c.base+sp(id, "events")+"?client="+url.QueryEscape(kind), nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "text/event-stream")
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != 200 {
		defer resp.Body.Close()
		var e api.Error
		json.NewDecoder(resp.Body).Decode(&e)
		return nil, &Error{Status: resp.StatusCode, API: e}
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 64<<20)
	st := &Stream{resp: resp, sc: sc}
	// The server's opening comment says the stream (and the client it stands for) is in place.
	for sc.Scan() {
		if sc.Text() == "" {
			return st, nil
		}
	}
	resp.Body.Close()
	return nil, fmt.Errorf("event stream: %w", errOr(sc.Err(), io.ErrUnexpectedEOF))
}

func errOr(err, def error) error {
	if err != nil {
		return err
	}
	return def
}

// Next returns the next event; io.EOF once the stream ends.
func (s *Stream) Next() (api.Event, error) {
	var data []byte
	for s.sc.Scan() {
		line := s.sc.Bytes()
		switch {
		case len(line) == 0:
			if data != nil {
				var e api.Event
				if err := json.Unmarshal(data, &e); err != nil {
					return api.Event{}, fmt.Errorf("event stream: %w", err)
				}
				return e, nil
			}
		case bytes.HasPrefix(line, []byte("data: ")):
			data = append(data, line[len("data: "):]...)
		}
	}
	if err := s.sc.Err(); err != nil {
		return api.Event{}, err
	}
	return api.Event{}, io.EOF
}

// Follow hands each event to f, in order, until the session closes (f is handed that event
// too) or the stream ends, and then returns nil; a stream that fails returns its error (its
// context's, when that ended).
func (s *Stream) Follow(f func(api.Event)) error {
	for {
		e, err := s.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		f(e)
		if e.Kind == api.EventClosed {
			return nil
		}
	}
}

// Close ends the stream (and detaches the client it stands for).
func (s *Stream) Close() error { return s.resp.Body.Close() }

// FromEnv returns the host named by flag, else by PADDOCK_HOST; "" when neither is set.
func FromEnv(flag string) string {
	if flag != "" {
		return flag
	}
	return os.Getenv(HostEnv)
}

// Host returns the daemon's address, unix://PATH.
func (c *Client) Host() string { return "unix://" + c.socket }

// Collect waits for a child started with a script (timeout "": to its end), closes it and
// hands its workspace back: the child's report.
func (c *Client) Collect(ctx context.Context, id, child, timeout string) (api.Collected, error) {
	var rep api.Collected
	p := sp(id, "children", url.PathEscape(child), "collect")
	if timeout != "" {
		p += "?timeout=" + url.QueryEscape(timeout)
	}
	return rep, c.do(ctx, "POST", p, nil, &rep)
}
