package ssh_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/paddockhq/paddock/egress"
	"github.com/paddockhq/paddock/orchestrator"
	"github.com/paddockhq/paddock/transport/pathmap"
	"github.com/paddockhq/paddock/transport/ssh"
	"github.com/paddockhq/paddock/transport/ssh/sshtest"
)

// With the host's proxy offered through the connection (--egress-via-host), a box's steps
// reach an allowed target through the box's loopback, the forward back to the host and the
// host's judging proxy; a target nobody allowed is refused (nobody is attached), and the
// proxy serves only requests that carry the session's token: the box's loopback is shared
// with its other users.
func TestEgressViaHost(t *testing.T) {
	b := newBox(t)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "through the host") }))
	t.Cleanup(srv.Close)
	target := strings.TrimPrefix(srv.URL, "http://")
	allow, err := egress.ParseRules([]string{target})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	m, err := pathmap.New(pathmap.Mount{Sandbox: dir, Host: dir})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	recs := make(chan egress.Record, 16)
	s, err := orchestrator.Open(ctx, orchestrator.Config{
		Workspace: dir, Transport: b.tr, PathMap: m, Kernel: kernelPath(t),
		Env:    []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + dir, "LC_ALL=C"},
		Egress: &orchestrator.Egress{Allow: allow, Listen: b.tr.ListenEgress, Record: func(_ string, r egress.Record) { recs <- r }},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	proxy := s.EgressURL()
	if !strings.Contains(proxy, egress.User+":") {
		t.Fatalf("the proxy URL %q carries no token", proxy)
	}
	res, err := s.Bash(ctx, "curl -sS "+srv.URL+"/x; echo; curl -sS -o /dev/null -w '%{http_code}' http://192.0.2.1:9/")
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	for _, st := range res.Steps {
		out.WriteString(st.Stdout.Text)
	}
	if got := out.String(); got != "through the host\n403" {
		t.Errorf("steps on the box printed %q, want the allowed page, then 403 for a target nobody allowed", got)
	}
	// Both went through the proxy: the box is this machine, and a page fetched directly would
	// look the same.
	// (A record comes once its connection has ended, which may be after the step.)
	got := map[string]string{}
	for range 2 {
		r := <-recs
		got[r.Target] = r.Verdict + "/" + r.Code
	}
	if got[target] != "allowed/" || got["192.0.2.1:9"] != "refused/unanswered" {
		t.Errorf("the proxy recorded %v, want the allowed fetch and the unanswered one", got)
	}
	// The forward listens on the box's loopback: another program there, without the token,
	// is refused.
	at := strings.TrimPrefix(proxy, "http://")
	at = at[strings.LastIndex(at, "@")+1:]
	c, err := net.Dial("tcp", at)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", target, target)
	buf := make([]byte, 64)
	n, _ := c.Read(buf)
	if !strings.HasPrefix(string(buf[:n]), "HTTP/1.1 407") {
		t.Errorf("a request without the token got %q, want 407", buf[:n])
	}
}

// A box whose sshd refuses remote forwards refuses the proxy with a typed error, and the
// session does not open.
func TestEgressViaHostRefused(t *testing.T) {
	b := newBoxWith(t, sshtest.Options{NoRemoteForward: true})
	_, err := b.tr.ListenEgress(context.Background())
	var e *ssh.Error
	if !errors.As(err, &e) || e.Code != ssh.CodeForwardRefused {
		t.Fatalf("ListenEgress on a box that refuses remote forwards: %v, want code %s", err, ssh.CodeForwardRefused)
	}
	dir := t.TempDir()
	_, err = orchestrator.Open(context.Background(), orchestrator.Config{
		Workspace: dir, Transport: b.tr, Kernel: kernelPath(t), Env: []string{"PATH=/usr/bin:/bin"},
		Egress: &orchestrator.Egress{Listen: b.tr.ListenEgress},
	})
	if !errors.As(err, &e) || e.Code != ssh.CodeForwardRefused {
		t.Errorf("a session with the proxy through a box that refuses: %v", err)
	}
}
