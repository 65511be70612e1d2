package egress

import (
	"context"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/singleflight"
)

// User is the proxy's user name in a proxy URL; the password is Config.Token.
const User = "paddock"

// Limits of the proxy.
const (
	// MaxHeaderBytes bounds a request's head: a longer one is refused (431) unread.
	MaxHeaderBytes = 64 << 10
	// HeaderTimeout closes a connection that has not sent a whole request head by then.
	HeaderTimeout = 30 * time.Second
	// DialTimeout bounds resolving and dialling an allowed target.
	DialTimeout = 30 * time.Second
)

// Answer is how a person's answer to a connection came back on the approval route.
type Answer struct {
	Run        bool
	ForSession bool   // yes, and every connection to this target for the rest of the session
	Code       string // when not run: denied, unanswered, gateway_refused, cancelled
	Outcome    string // approved, denied, gateway, unanswered, cancelled
	Question   string // the question's id
	At, By     string // the session and the client that answered
}

// Resolver resolves host names (net.Resolver's method).
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// Config configures a proxy.
type Config struct {
	// Allow and Deny are the trusted lists (network.allow and --allow-net, network.deny).
	Allow, Deny []Rule
	// Ask puts a target no list names to a person; nil refuses it as unanswered.
	Ask func(ctx context.Context, t Target) Answer
	// Token, when set, is the password every request must carry (Proxy-Authorization, user
	// User): a proxy on a loopback other programs of the machine reach serves only its own
	// sandbox's.
	Token string
	// Resolver resolves allowed names; nil: net.DefaultResolver.
	Resolver Resolver
	// Dial dials the address chosen; nil: a net.Dialer.
	Dial func(ctx context.Context, network, address string) (net.Conn, error)
	// Record receives one record per connection (a CONNECT tunnel, a plain-HTTP request),
	// allowed or refused, once it has ended; nil keeps none.
	Record func(Record)
	// Log receives diagnostics; nil discards them.
	Log *slog.Logger
	// Limits bound what the proxy holds at once, with the other proxies that share them
	// (a session tree's); nil: bounds of its own, NewLimits's defaults.
	Limits *Limits
	// Own are the host's own addresses (its interfaces'): reached only when an allow entry
	// names them by address, as a private address is, whatever range they are in. nil: the
	// interfaces' addresses when the proxy is made.
	Own []netip.Addr
}

// Record is what became of one connection, for the audit, the metrics and the event stream.
type Record struct {
	Time   time.Time `json:"time"`
	Method string    `json:"method"` // CONNECT, or a plain-HTTP request's method
	Target string    `json:"target"` // host:port as asked
	Host   string    `json:"host"`
	Port   uint16    `json:"port"`
	Addr   string    `json:"addr,omitempty"` // the address dialled, after resolution
	// Verdict: allowed or refused.
	Verdict string `json:"verdict"`
	// DecidedBy: allow_rule, deny_rule, session (an earlier "always" answer), approved,
	// denied, unanswered, gateway, cancelled (the approval route), busy (too many questions
	// under way), address (what the name
	// resolved to, Dialable), proxy (the request itself: its form, its token), host (a
	// resolve or dial that failed after the allow).
	DecidedBy string        `json:"decided_by"`
	Rule      string        `json:"rule,omitempty"`
	Code      string        `json:"code,omitempty"` // a refusal's code, as the sandbox got it
	Question  string        `json:"question,omitempty"`
	At        string        `json:"at,omitempty"`
	By        string        `json:"by,omitempty"`
	Sent      int64         `json:"sent"`     // bytes from the sandbox to the target
	Received  int64         `json:"received"` // bytes from the target to the sandbox
	Duration  time.Duration `json:"duration_ns"`
}

// Proxy is an HTTP proxy (CONNECT tunnels and plain-HTTP requests in absolute form) that
// judges every connection before it dials.
type Proxy struct {
	cfg  Config
	srv  *http.Server
	log  *slog.Logger
	ask  singleflight.Group // one question per target at a time, its answer shared
	life context.Context    // ends at Close: the questions' lifetime
	end  context.CancelFunc

	mu      sync.Mutex
	session []Rule                // guarded by mu: targets answered "always for this session"
	conns   map[net.Conn]struct{} // guarded by mu: open tunnels' connections and forwards' upstream ones
	closed  bool                  // guarded by mu
	wg      sync.WaitGroup        // the requests being served (enter)
	seen    sync.Map              // net.Conn -> struct{}: connections that brought a request (audit)

	open atomic.Int64
}

// New makes a proxy; Serve serves it on listeners.
func New(cfg Config) *Proxy {
	if cfg.Limits == nil {
		cfg.Limits = NewLimits(0, 0, 0)
	}
	if cfg.Own == nil {
		cfg.Own = ownAddrs()
	}
	p := &Proxy{cfg: cfg, conns: map[net.Conn]struct{}{}, log: cfg.Log}
	p.life, p.end = context.WithCancel(context.Background())
	if p.log == nil {
		p.log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if p.cfg.Resolver == nil {
		p.cfg.Resolver = net.DefaultResolver
	}
	if p.cfg.Dial == nil {
		d := &net.Dialer{}
		p.cfg.Dial = d.DialContext
	}
	p.srv = &http.Server{
		Handler:           p,
		MaxHeaderBytes:    MaxHeaderBytes,
		ReadHeaderTimeout: HeaderTimeout,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(p.log.Handler(), slog.LevelDebug),
		ConnContext:       func(ctx context.Context, c net.Conn) context.Context { return context.WithValue(ctx, connKey{}, c) },
		ConnState:         p.connState,
	}
	return p
}

// connKey is where a request's context holds its connection.
type connKey struct{}

// connState records a connection that closed without a request the proxy judged (one the
// HTTP server refused itself: a head too large, not HTTP at all, or none sent): every
// connection is a record.
func (p *Proxy) connState(c net.Conn, st http.ConnState) {
	switch st {
	case http.StateClosed:
		if _, ok := p.seen.LoadAndDelete(c); !ok {
			p.record(Record{Time: time.Now().UTC(), Verdict: "refused", DecidedBy: "proxy", Code: "bad_request"})
		}
	case http.StateHijacked:
		p.seen.Delete(c)
	}
}

// ownAddrs are the addresses of the host's interfaces.
func ownAddrs() []netip.Addr {
	addrs, _ := net.InterfaceAddrs()
	var out []netip.Addr
	for _, a := range addrs {
		if p, err := netip.ParsePrefix(a.String()); err == nil {
			out = append(out, p.Addr().Unmap())
		}
	}
	return out
}

// Serve serves the proxy on l until the proxy is closed (nil) or l fails; the connections
// it holds at once are bounded by Config.Limits.
func (p *Proxy) Serve(l net.Listener) error {
	err := p.srv.Serve(p.cfg.Limits.listener(l))
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// Close closes the listeners and every connection, and waits for the tunnels to end.
func (p *Proxy) Close() error {
	p.end()
	p.mu.Lock()
	p.closed = true
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	err := p.srv.Close()
	p.wg.Wait()
	return err
}

// enter counts a request being served, for Close to wait for; false once the proxy is
// closing.
func (p *Proxy) enter() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	p.wg.Add(1)
	return true
}

// Open is how many connections are open through the proxy now.
func (p *Proxy) Open() int64 { return p.open.Load() }

// URL is the proxy's URL for the variables of a sandbox that reaches it at addr.
func URL(addr, token string) string {
	if token == "" {
		return "http://" + addr
	}
	return "http://" + User + ":" + token + "@" + addr
}

// Env are the variables that point a sandbox's programs at the proxy: both spellings of
// HTTP_PROXY, HTTPS_PROXY and ALL_PROXY, and NO_PROXY empty so that nothing bypasses it.
func Env(url string) []string {
	var out []string
	for _, n := range []string{"HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"} {
		out = append(out, n+"="+url, strings.ToLower(n)+"="+url)
	}
	return append(out, "NO_PROXY=", "no_proxy=")
}

// Refused is a connection refused: the HTTP status the sandbox gets, the refusal's stable
// code and a message fit for the agent.
type Refused struct {
	Status int
	Code   string
	Msg    string
}

// judged is what became of a target before it was dialled.
type judged struct {
	rec  Record
	addr []netip.Addr // the addresses it may dial, in order
	no   *Refused
}

func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	if c, ok := r.Context().Value(connKey{}).(net.Conn); ok {
		p.seen.Store(c, struct{}{})
	}
	rec := Record{Time: start.UTC(), Method: clip(r.Method, maxMethod)}
	if !p.enter() {
		p.refuse(w, rec, start, &Refused{http.StatusServiceUnavailable, "closing", "the session's proxy is closing"}, "proxy")
		return
	}
	defer p.wg.Done()
	if !methods[r.Method] {
		p.refuse(w, rec, start, &Refused{http.StatusMethodNotAllowed, "bad_method", "not an HTTP method this proxy carries"}, "proxy")
		return
	}
	if !p.authorized(r) {
		w.Header().Set("Proxy-Authenticate", `Basic realm="paddock"`)
		p.refuse(w, rec, start, &Refused{http.StatusProxyAuthRequired, "proxy_auth", "this proxy serves its own sandbox only"}, "proxy")
		return
	}
	rec.Target = clip(r.Host, maxTarget)
	if r.Method != http.MethodConnect {
		rec.Target = clip(r.URL.Host, maxTarget)
	}
	t, no := RequestTarget(r)
	if no != nil {
		p.refuse(w, rec, start, no, "proxy")
		return
	}
	if r.Method != http.MethodConnect && r.Header.Get("Upgrade") != "" {
		// An upgraded plain-HTTP connection would be a tunnel no CONNECT opened; wss:// and
		// https:// go through CONNECT.
		p.refuse(w, rec, start, &Refused{http.StatusBadRequest, "upgrade_refused", "a plain-HTTP request cannot upgrade its connection; use CONNECT (an https:// or wss:// URL)"}, "proxy")
		return
	}
	rec.Target, rec.Host, rec.Port = t.String(), t.Host, t.Port
	if t.Addr.IsValid() {
		rec.Host = t.Addr.String()
	}
	j := p.judge(r.Context(), t, rec)
	if j.no != nil {
		p.refuse(w, j.rec, start, j.no, j.rec.DecidedBy)
		return
	}
	if r.Method == http.MethodConnect {
		p.tunnel(w, r, t, j, start)
		return
	}
	p.forward(w, r, t, j, start)
}

// methods are the methods the proxy carries: HTTP's and WebDAV's (git and package
// registries use no others). Any other is refused unrecorded beyond its first bytes.
var methods = map[string]bool{
	"GET": true, "HEAD": true, "POST": true, "PUT": true, "PATCH": true, "DELETE": true, "OPTIONS": true, "TRACE": true,
	"CONNECT": true, "PROPFIND": true, "PROPPATCH": true, "MKCOL": true, "COPY": true, "MOVE": true, "LOCK": true,
	"UNLOCK": true, "REPORT": true, "SEARCH": true,
}

// Bounds of what a record keeps of a request's own words.
const (
	maxMethod = 16
	maxTarget = 300
)

// clip is s cut to n bytes, marked when cut.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "") + "…"
}

// RequestTarget is where a proxy request asks to go: a CONNECT's authority (a port
// required), or a plain-HTTP request's absolute http:// URL (port 80 by default). Any other
// form is refused.
func RequestTarget(r *http.Request) (Target, *Refused) {
	var t Target
	var err error
	switch {
	case r.Method == http.MethodConnect:
		t, err = ParseTarget(r.Host, 0)
	case r.URL != nil && r.URL.IsAbs() && r.URL.Scheme == "http" && r.URL.Opaque == "":
		t, err = ParseTarget(r.URL.Host, 80)
	default:
		return Target{}, &Refused{http.StatusBadRequest, "bad_request",
			"a proxy request is CONNECT host:port or a plain-HTTP request with an absolute http:// URL"}
	}
	if err != nil {
		return Target{}, &Refused{http.StatusBadRequest, "bad_target", err.Error()}
	}
	return t, nil
}

// authorized checks the request's Proxy-Authorization against the token, in constant time.
func (p *Proxy) authorized(r *http.Request) bool {
	if p.cfg.Token == "" {
		return true
	}
	h := r.Header.Get("Proxy-Authorization")
	enc, ok := strings.CutPrefix(h, "Basic ")
	if !ok {
		return false
	}
	raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(enc))
	if err != nil {
		return false
	}
	_, pass, _ := strings.Cut(string(raw), ":")
	return subtle.ConstantTimeCompare([]byte(pass), []byte(p.cfg.Token)) == 1
}

// judge decides a target: the lists, the session's answers, a person; then, once allowed,
// the addresses its name resolves to.
func (p *Proxy) judge(ctx context.Context, t Target, rec Record) judged {
	d := Decide(p.cfg.Allow, p.cfg.Deny, t)
	rec.Rule = d.Rule
	switch d.Verdict {
	case Deny:
		rec.DecidedBy = "deny_rule"
		return judged{rec: rec, no: &Refused{http.StatusForbidden, "net_denied", fmt.Sprintf("%s is denied by network.deny (%s)", t, d.Rule)}}
	case Allow:
		rec.DecidedBy = "allow_rule"
	case Ask:
		p.mu.Lock()
		sd := Decide(p.session, nil, t)
		p.mu.Unlock()
		if sd.Verdict == Allow {
			rec.DecidedBy = "session"
			break
		}
		a := p.question(t)
		rec.Question, rec.At, rec.By, rec.DecidedBy = a.Question, a.At, a.By, a.Outcome
		if !a.Run {
			code := a.Code
			if code == "" {
				code = "unanswered"
			}
			return judged{rec: rec, no: &Refused{http.StatusForbidden, code, fmt.Sprintf("%s is not in network.allow and was not approved (%s)", t, code)}}
		}
	}
	// Resolved only now, when allowed: a name nobody allowed reaches no resolver.
	ctx, cancel := context.WithTimeout(ctx, DialTimeout)
	defer cancel()
	addrs := []netip.Addr{t.Addr}
	if !t.Addr.IsValid() {
		var err error
		addrs, err = p.cfg.Resolver.LookupNetIP(ctx, "ip", t.Host)
		if err != nil || len(addrs) == 0 {
			rec.DecidedBy = "host"
			return judged{rec: rec, no: &Refused{http.StatusBadGateway, "resolve_failed", fmt.Sprintf("%s does not resolve", t.Host)}}
		}
	}
	var ok []netip.Addr
	var why Refusal
	for _, a := range addrs {
		if r := DialableFrom(p.cfg.Allow, p.cfg.Deny, p.cfg.Own, a, t.Port); r != "" {
			if why == "" {
				why, rec.Addr = r, a.Unmap().String()
			}
			continue
		}
		ok = append(ok, a.Unmap())
	}
	if len(ok) == 0 {
		rec.DecidedBy = "address"
		// The address itself stays in the audit record: the sandbox is not told what the
		// host's resolver says of names inside its networks.
		msg := fmt.Sprintf("%s resolves to a private, loopback, link-local, metadata or host address that network.allow does not name by address", t)
		if why == Denied {
			msg = fmt.Sprintf("%s resolves to an address network.deny holds", t)
		}
		return judged{rec: rec, no: &Refused{http.StatusForbidden, string(why), msg}}
	}
	return judged{rec: rec, addr: ok}
}

// question asks about t once for every connection that waits on it at the same time; a yes
// for the session is kept for the connections after it.
func (p *Proxy) question(t Target) Answer {
	if p.cfg.Ask == nil {
		return Answer{Code: "unanswered", Outcome: "unanswered"}
	}
	v, _, _ := p.ask.Do(t.String(), func() (any, error) {
		p.mu.Lock()
		sd := Decide(p.session, nil, t)
		p.mu.Unlock()
		if sd.Verdict == Allow {
			return Answer{Run: true, Outcome: "session"}, nil
		}
		release, ok := p.cfg.Limits.ask()
		if !ok {
			return Answer{Code: "busy", Outcome: "busy"}, nil
		}
		defer release()
		// The question outlives the connection that raised it, for the others that wait on
		// it, and ends with the proxy.
		a := p.cfg.Ask(p.life, t)
		if a.Run && a.ForSession {
			r := Rule{Name: t.Host, Port: t.Port}
			if t.Addr.IsValid() {
				r = Rule{Prefix: netip.PrefixFrom(t.Addr, t.Addr.BitLen()), Port: t.Port}
			}
			p.mu.Lock()
			p.session = append(p.session, r)
			p.mu.Unlock()
		}
		return a, nil
	})
	return v.(Answer)
}

// dial dials the first of the addresses that answers.
func (p *Proxy) dial(ctx context.Context, j *judged, port uint16) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(ctx, DialTimeout)
	defer cancel()
	var errs []error
	for _, a := range j.addr {
		addr := netip.AddrPortFrom(a, port).String()
		c, err := p.cfg.Dial(ctx, "tcp", addr)
		if err == nil {
			j.rec.Addr = addr
			return c, nil
		}
		errs = append(errs, err)
	}
	j.rec.Addr = netip.AddrPortFrom(j.addr[0], port).String()
	return nil, errors.Join(errs...)
}

func (p *Proxy) refuse(w http.ResponseWriter, rec Record, start time.Time, no *Refused, by string) {
	rec.Verdict, rec.Code, rec.DecidedBy = "refused", no.Code, by
	rec.Duration = time.Since(start)
	w.Header().Set("X-Paddock-Refusal", no.Code)
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Connection", "close")
	w.WriteHeader(no.Status)
	fmt.Fprintf(w, "paddock: %s: %s\n", no.Code, no.Msg)
	p.record(rec)
}

func (p *Proxy) record(rec Record) {
	if p.cfg.Record != nil {
		p.cfg.Record(rec)
	}
}

// track adds connections Close must close (a tunnel's two, a forward's upstream one);
// false, tracking none, when the proxy is closing.
func (p *Proxy) track(cs ...net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	for _, c := range cs {
		p.conns[c] = struct{}{}
	}
	return true
}

func (p *Proxy) untrack(cs ...net.Conn) {
	p.mu.Lock()
	for _, c := range cs {
		delete(p.conns, c)
	}
	p.mu.Unlock()
}

// tunnel serves an allowed CONNECT: it dials, answers 200, and copies both ways until both
// directions have ended.
func (p *Proxy) tunnel(w http.ResponseWriter, r *http.Request, t Target, j judged, start time.Time) {
	out, err := p.dial(r.Context(), &j, t.Port)
	if err != nil {
		j.rec.Verdict = "refused"
		p.refuse(w, j.rec, start, &Refused{http.StatusBadGateway, "dial_failed", fmt.Sprintf("%s did not answer", t)}, "host")
		return
	}
	hj, ok := w.(http.Hijacker)
	if !ok {
		out.Close()
		p.refuse(w, j.rec, start, &Refused{http.StatusInternalServerError, "failed", "the connection cannot be taken over"}, "proxy")
		return
	}
	in, buf, err := hj.Hijack()
	if err != nil {
		out.Close()
		return
	}
	if !p.track(in, out) {
		in.Close()
		out.Close()
		return
	}
	p.open.Add(1)
	defer func() {
		p.untrack(in, out)
		in.Close()
		out.Close()
		p.open.Add(-1)
		j.rec.Verdict = "allowed"
		j.rec.Duration = time.Since(start)
		p.record(j.rec)
	}()
	if _, err := io.WriteString(in, "HTTP/1.1 200 Connection Established\r\n\r\n"); err != nil {
		return
	}
	// The bytes are copied between the connections themselves (a listener's wrapper set
	// aside), so that the kernel moves them without a copy through this process (splice).
	raw := in
	if u, ok := in.(interface{ NetConn() net.Conn }); ok {
		raw = u.NetConn()
	}
	var sent, received atomic.Int64
	var both sync.WaitGroup
	both.Add(2)
	go func() {
		defer both.Done()
		// What the client sent after its head (a TLS hello, eagerly) is in buf.
		early, _ := buf.Reader.Peek(buf.Reader.Buffered())
		n, err := out.Write(early)
		if err == nil {
			var m int64
			m, _ = io.Copy(out, raw)
			n += int(m)
		}
		sent.Store(int64(n))
		closeWrite(out)
	}()
	go func() {
		defer both.Done()
		n, _ := io.Copy(raw, out)
		received.Store(n)
		closeWrite(in)
	}()
	both.Wait()
	j.rec.Sent, j.rec.Received = sent.Load(), received.Load()
}

// closeWrite ends one direction of a connection, or the whole of one that cannot half-close.
func closeWrite(c net.Conn) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		cw.CloseWrite()
		return
	}
	c.Close()
}

// copyBuffer is the size of the buffers a plain-HTTP response is copied through: a copy
// costs two system calls a buffer, and ReverseProxy's own 32 KiB made them the download's
// cost; larger ones held too much of the host per request (Limits bounds their number).
const copyBuffer = 64 << 10

var bufferPool = sync.Pool{New: func() any { return new([copyBuffer]byte) }}

// buffers lends ReverseProxy its copy buffers.
type buffers struct{}

func (buffers) Get() []byte  { return bufferPool.Get().(*[copyBuffer]byte)[:] }
func (buffers) Put(b []byte) { bufferPool.Put((*[copyBuffer]byte)(b)) }

// counted counts a dialled connection's bytes each way. A write is counted once it has
// returned, which may be after the response it asked for was read: held tells when none
// is under way (see settle).
type counted struct {
	net.Conn
	sent, received atomic.Int64
	held           sync.Mutex // held while a write is under way
	settled        bool       // guarded by held
}

func (c *counted) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	c.received.Add(int64(n))
	return n, err
}

func (c *counted) Write(b []byte) (int, error) {
	c.held.Lock()
	defer c.held.Unlock()
	if c.settled {
		return 0, net.ErrClosed
	}
	n, err := c.Conn.Write(b)
	c.sent.Add(int64(n))
	return n, err
}

// settle closes the connection and waits for a write under way to return: the counts are
// final then, and no write is made after.
func (c *counted) settle() {
	c.Conn.Close()
	c.held.Lock()
	c.settled = true
	c.held.Unlock()
}

// forward serves an allowed plain-HTTP request: one new connection to the address chosen,
// the response copied back.
func (p *Proxy) forward(w http.ResponseWriter, r *http.Request, t Target, j judged, start time.Time) {
	release, err := p.cfg.Limits.forward(r.Context())
	if err != nil {
		return // the client left while waiting
	}
	defer release()
	// The one connection the request is sent on (no keep-alive, a transport of its own),
	// dialled on the transport's goroutine; Close closes it.
	var (
		mu sync.Mutex
		up *counted // guarded by mu
	)
	tr := &http.Transport{
		Proxy:             nil,
		DisableKeepAlives: true,
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			c, err := p.dial(ctx, &j, t.Port)
			if err == nil && !p.track(c) {
				c.Close()
				err = net.ErrClosed
			}
			if err != nil {
				return nil, err
			}
			mu.Lock()
			defer mu.Unlock()
			up = &counted{Conn: c}
			return up, nil
		},
		ResponseHeaderTimeout: 5 * time.Minute,
		ReadBufferSize:        copyBuffer,
	}
	defer tr.CloseIdleConnections()
	failed := false
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.URL = r.URL
			pr.Out.Host = r.Host
			pr.Out.Header.Del("Proxy-Authorization")
		},
		Transport:  tr,
		BufferPool: buffers{},
		ErrorLog:   slog.NewLogLogger(p.log.Handler(), slog.LevelDebug),
		ErrorHandler: func(w http.ResponseWriter, _ *http.Request, err error) {
			failed = true
			mu.Lock()
			dialled := up != nil
			mu.Unlock()
			if !dialled {
				p.refuse(w, j.rec, start, &Refused{http.StatusBadGateway, "dial_failed", fmt.Sprintf("%s did not answer", t)}, "host")
				return
			}
			// The connection was made and the request (some of it) sent: it is recorded as
			// allowed, with what it carried, whatever the target answered.
			w.Header().Set("X-Paddock-Refusal", "upstream_failed")
			w.WriteHeader(http.StatusBadGateway)
			fmt.Fprintf(w, "paddock: upstream_failed: %s did not answer the request as HTTP\n", t)
			j.rec.Code = "upstream_failed"
		},
	}
	p.open.Add(1)
	rp.ServeHTTP(w, r)
	p.open.Add(-1)
	mu.Lock()
	c := up
	mu.Unlock()
	if failed && c == nil {
		return // refused, recorded
	}
	if c != nil {
		c.settle()
		p.untrack(c.Conn)
		j.rec.Sent, j.rec.Received = c.sent.Load(), c.received.Load()
	}
	j.rec.Verdict = "allowed"
	j.rec.Duration = time.Since(start)
	p.record(j.rec)
}

// Port is the port the kernel's listener takes in a sandbox's own network namespace:
// loopback there is the sandbox's alone, so a fixed port is free, and a sandbox's variables
// can be known before it starts.
const Port = 3128

// SandboxAddr is where a sandbox's programs reach the kernel's listener.
var SandboxAddr = "127.0.0.1:" + strconv.Itoa(Port)
