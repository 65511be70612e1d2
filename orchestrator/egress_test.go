package orchestrator

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/paddockhq/paddock/egress"
	"github.com/paddockhq/paddock/images"
	"github.com/paddockhq/paddock/internal/peer"
	"github.com/paddockhq/paddock/transport"
	"github.com/paddockhq/paddock/transport/local"
)

type hostNames map[string]netip.Addr

func (n hostNames) LookupNetIP(_ context.Context, _, h string) ([]netip.Addr, error) {
	if a, ok := n[h]; ok {
		return []netip.Addr{a}, nil
	}
	return nil, &net.DNSError{Err: "no such host", Name: h, IsNotFound: true}
}

func rules(t *testing.T, e ...string) []egress.Rule {
	t.Helper()
	r, err := egress.ParseRules(e)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func auditLines(t *testing.T, file string) []auditRecord {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []auditRecord
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var r auditRecord
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatal(err)
		}
		out = append(out, r)
	}
	return out
}

// A local session's steps reach the network through the session's proxy: an allowed target
// is fetched, a target nobody listed is put to the session's client (no, then yes for the
// session), each connection is one audit record with effect net.
func TestEgressSteps(t *testing.T) {
	if _, err := exec.LookPath("curl"); err != nil {
		peer.Missing(t, "no curl: %v", err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "hi from "+r.Host) }))
	defer srv.Close()
	port := srv.Listener.Addr().(*net.TCPAddr).Port
	dir := t.TempDir()
	audit := filepath.Join(t.TempDir(), "audit.jsonl")
	s := openLocal(t, dir, Config{Policy: Policy{AuditFile: audit}, Egress: &Egress{
		Loopback: true,
		Allow:    rules(t, srv.Listener.Addr().String(), "127.0.0.0/8"),
		Resolver: hostNames{"asked.test": netip.MustParseAddr("127.0.0.1")},
	}})
	if !strings.Contains(s.EgressURL(), "@127.0.0.1:") {
		t.Fatalf("proxy URL %q", s.EgressURL())
	}
	run := func(script string) *Result {
		t.Helper()
		res, err := s.Bash(context.Background(), script)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	res := run("curl -sS " + srv.URL + "/")
	if got := res.Steps[0].Stdout.Text; got != "hi from "+srv.Listener.Addr().String() {
		t.Fatalf("allowed: %q %q", got, res.Steps[0].Stderr.Text)
	}
	// Nobody attached: refused as unanswered.
	u := fmt.Sprintf("http://asked.test:%d/", port)
	res = run("curl -sS -o /dev/null -w '%{http_code}' " + u)
	if got := res.Steps[0].Stdout.Text; got != "403" {
		t.Fatalf("unanswered: %q", got)
	}
	no := false
	c := &testClient{kind: Interactive, answer: &no, s: s}
	c.detach = s.Attach(c)
	res = run("curl -sS -o /dev/null -w '%{http_code}' " + u)
	if got := res.Steps[0].Stdout.Text; got != "403" {
		t.Fatalf("denied: %q", got)
	}
	q := c.asked()
	if len(q) != 1 || q[0].Connect != fmt.Sprintf("asked.test:%d", port) || q[0].Effects.String() != "net" ||
		!strings.Contains(q[0].Command, "curl") {
		t.Fatalf("question %+v", q)
	}
	c.detach()
	always := &sessionAnswerer{s: s}
	defer s.Attach(always)()
	for range 2 {
		res = run("curl -sS " + u)
		if got := res.Steps[0].Stdout.Text; !strings.HasPrefix(got, "hi from asked.test") {
			t.Fatalf("approved for the session: %q %q", got, res.Steps[0].Stderr.Text)
		}
	}
	if always.n != 1 {
		t.Fatalf("asked %d times after a yes for the session", always.n)
	}
	s.Close()
	var nets []auditRecord
	for _, r := range auditLines(t, audit) {
		if r.Net != nil {
			nets = append(nets, r)
		}
	}
	want := []string{"allow_rule/allowed", "unanswered/refused", "denied/refused", "approved/allowed", "session/allowed"}
	if len(nets) != len(want) {
		t.Fatalf("%d connection records, want %d: %+v", len(nets), len(want), nets)
	}
	for i, r := range nets {
		if got := r.DecidedBy + "/" + r.Outcome; got != want[i] || r.Effects.String() != "net" || !strings.HasPrefix(r.Command, "connect ") {
			t.Errorf("record %d: %s (%+v), want %s", i, got, r, want[i])
		}
	}
	if nets[0].Net.Received == 0 || nets[0].Net.Addr == "" {
		t.Errorf("first record %+v", nets[0].Net)
	}
}

// sessionAnswerer answers yes, for the session, to every question.
type sessionAnswerer struct {
	s *Session
	n int
}

func (a *sessionAnswerer) Kind() ClientKind { return Interactive }
func (a *sessionAnswerer) Notify(e Event) {
	if e.Kind == EventQuestion {
		a.n++
		go a.s.Answer(e.Question.ID, Answer{Approve: true, ForSession: true, Client: "always"})
	}
}

// law: egress_gateway_never_connects — a gateway-only session never opens a connection to a
// target nobody listed: the gateway rule runs steps, not connections.
func TestEgressGatewayRefuses(t *testing.T) {
	dir := t.TempDir()
	s := openLocal(t, dir, Config{Egress: &Egress{Loopback: true, Allow: rules(t, "127.0.0.0/8"),
		Resolver: hostNames{"asked.test": netip.MustParseAddr("127.0.0.1")}}})
	defer s.Attach(&testClient{kind: Gateway})()
	a := s.askConnect(context.Background(), egress.Target{Host: "asked.test", Port: 80})
	if a.Run || a.Code != "gateway_refused" {
		t.Fatalf("%+v", a)
	}
}

// The proxy's variables reach every step and never the kernel's own environment: on an ssh
// box a kernel's command line, which carries its environment, is visible to other users,
// and the URL may carry the session's token.
func TestEgressVariablesOnlyInSteps(t *testing.T) {
	k, err := images.Default.Find(context.Background(), runtime.GOARCH)
	if err != nil {
		t.Fatal(err)
	}
	rec := &specRecorder{Transport: &local.Transport{}}
	s, err := Open(context.Background(), Config{Workspace: t.TempDir(), Transport: rec, Kernel: k,
		Env: []string{"PATH=/usr/bin:/bin"}, Egress: &Egress{Loopback: true}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, kv := range rec.spec().Env {
		if strings.Contains(strings.ToLower(kv), "proxy=") {
			t.Errorf("the kernel's own environment holds %q", kv)
		}
	}
	r, err := s.Bash(context.Background(), "printenv HTTPS_PROXY")
	if err != nil || r.Steps[0].Stdout.Text != s.EgressURL()+"\n" {
		t.Errorf("a step's HTTPS_PROXY: %+v %v, want %s", r, err, s.EgressURL())
	}
}

// specRecorder keeps the spec of the kernel it starts.
type specRecorder struct {
	transport.Transport
	mu   sync.Mutex
	last transport.Spec
}

func (r *specRecorder) Start(ctx context.Context, spec transport.Spec) (transport.Kernel, error) {
	r.mu.Lock()
	r.last = spec
	r.mu.Unlock()
	return r.Transport.Start(ctx, spec)
}

func (r *specRecorder) spec() transport.Spec {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.last
}

// The proxy's socket is made connectable without following a link: a link put where the
// socket is, or where its directory is, moves nothing; a directory deeper than a socket's
// address can name is no matter.
func TestListenInFollowsNoLink(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "secret")
	os.WriteFile(target, []byte("x"), 0o600)
	os.Mkdir(filepath.Join(dir, "real"), 0o755)
	os.Symlink(filepath.Join(dir, "real"), filepath.Join(dir, "link"))
	if _, err := listenIn(filepath.Join(dir, "link"), "proxy.sock", 0o666); err == nil {
		t.Error("a link was taken for the directory")
	}
	deep := dir
	for range 12 {
		deep = filepath.Join(deep, "a-long-directory-name")
	}
	if err := os.MkdirAll(deep, 0o755); err != nil {
		t.Fatal(err)
	}
	l, err := listenIn(deep, "proxy.sock", 0o666)
	if err != nil {
		t.Fatalf("a socket %d bytes deep: %v", len(deep), err)
	}
	defer l.Close()
	sock := filepath.Join(deep, "proxy.sock")
	if fi, err := os.Lstat(sock); err != nil || fi.Mode().Perm() != 0o666 || fi.Mode().Type() != os.ModeSocket {
		t.Errorf("the socket: %v %v", fi, err)
	}
	go func() {
		if c, err := l.Accept(); err == nil {
			c.Close()
		}
	}()
	c, err := dialDeep(sock)
	if err != nil {
		t.Fatalf("connecting to the deep socket: %v", err)
	}
	c.Close()
	// A link where the socket is: its target's mode is left as it was.
	dfd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(dfd)
	os.Symlink(target, filepath.Join(dir, "proxy.sock"))
	if err := chmodAt(dfd, "proxy.sock", 0o666); err == nil {
		t.Error("a link was taken for the socket")
	}
	if fi, _ := os.Stat(target); fi.Mode().Perm() != 0o600 {
		t.Errorf("the link's target is now %v", fi.Mode())
	}
}

// dialDeep connects to a socket whatever its path's length, through its directory.
func dialDeep(p string) (net.Conn, error) {
	dfd, err := unix.Open(filepath.Dir(p), unix.O_PATH|unix.O_DIRECTORY, 0)
	if err != nil {
		return nil, err
	}
	defer unix.Close(dfd)
	return net.Dial("unix", fmt.Sprintf("/proc/self/fd/%d/%s", dfd, filepath.Base(p)))
}
