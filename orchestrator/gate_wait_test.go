package orchestrator

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/paddockhq/paddock/transport/wire"
)

// pipeGate runs g over an io.Pipe, as a kernel's stdout: a frame written returns once the gate
// has read it. The gate's replies come on the returned channel.
type pipeGate struct {
	t       testing.TB
	w       *io.PipeWriter
	replies chan wire.Frame
	done    chan error
}

func startPipeGate(t testing.TB, g *Gate, max int) *pipeGate {
	pr, pw := io.Pipe()
	p := &pipeGate{t: t, w: pw, replies: make(chan wire.Frame, 4096), done: make(chan error, 1)}
	if g.Reply == nil {
		g.Reply = func(f *wire.Frame) error { p.replies <- *f; return nil }
	}
	if g.Route == nil {
		g.Route = func(wire.Head, wire.Line) {}
	}
	go func() { p.done <- g.Run(context.Background(), wire.NewReaderSize(pr, max)) }()
	return p
}

func (p *pipeGate) send(line string) {
	p.t.Helper()
	if _, err := io.WriteString(p.w, line+"\n"); err != nil {
		p.t.Fatal(err)
	}
}

// reply waits for the next reply.
func (p *pipeGate) reply(what string) wire.Frame {
	p.t.Helper()
	select {
	case f := <-p.replies:
		return f
	case <-time.After(guard):
		p.t.Fatalf("no reply to %s", what)
	}
	return wire.Frame{}
}

// end closes the stream and waits for Run; no reply is left over.
func (p *pipeGate) end() {
	p.t.Helper()
	p.w.Close()
	select {
	case err := <-p.done:
		if err != nil {
			p.t.Fatalf("Run: %v", err)
		}
	case <-time.After(guard):
		p.t.Fatal("Run did not return")
	}
	select {
	case f := <-p.replies:
		p.t.Fatalf("a reply too many: %+v", f)
	default:
	}
}

func hostRequest(id, typ, body string) string {
	return fmt.Sprintf(`{"event":"host_request","id":%q,"type":%q,"body":%s}`, id, typ, body)
}

// blocker is a handler that waits until released, telling when it started.
type blocker struct {
	started chan string
	release chan struct{}
}

func newBlocker() *blocker {
	return &blocker{started: make(chan string, 1024), release: make(chan struct{})}
}

func (b *blocker) handle(ctx context.Context, req HostRequest) (any, error) {
	b.started <- req.ID
	<-b.release
	return map[string]string{"id": req.ID, "slow": "yes"}, nil
}

func (b *blocker) waitStarted(t testing.TB) string {
	t.Helper()
	select {
	case id := <-b.started:
		return id
	case <-time.After(guard):
		t.Fatal("the slow handler did not start")
	}
	return ""
}

func echoHandler(_ context.Context, req HostRequest) (any, error) {
	return map[string]string{"id": req.ID}, nil
}

// A request whose handler waits holds back no other: 100 requests, served and refused, each
// get their reply while it waits; released, it gets its one reply.
//
// law: request_not_held_back, proto_one_reply_each
func TestGateRequestNotHeldBack(t *testing.T) {
	slow := newBlocker()
	p := startPipeGate(t, &Gate{Handlers: map[string]Handler{"slow": slow.handle, "a": echoHandler}}, 6000)
	p.send(hostRequest("s", "slow", `{}`))
	slow.waitStarted(t)
	for i := range 100 {
		id := fmt.Sprint(i)
		var line, status, code string
		switch i % 5 {
		case 0:
			line, status, code = hostRequest(id, "nope", `{}`), wire.StatusError, CodeUnknownType
		case 1:
			line, status, code = hostRequest("s", "a", `{}`), wire.StatusDuplicate, CodeDuplicate
			id = "s"
		case 2:
			line, status, code = hostRequest(id, "a", `"`+strings.Repeat("x", 7000)+`"`), wire.StatusError, CodeTooLarge
		default:
			line, status = hostRequest(id, "a", `{}`), wire.StatusOK
		}
		p.send(line)
		f := p.reply("request " + id + " while a slow request waits")
		if f.ID != id || f.Status != status || (code != "" && (f.Error == nil || f.Error.Code != code)) {
			t.Fatalf("request %d: reply %+v, want id %q status %q code %q", i, f, id, status, code)
		}
	}
	close(slow.release)
	if f := p.reply("the slow request"); f.ID != "s" || f.Status != wire.StatusOK || !strings.Contains(string(f.Body), `"slow"`) {
		t.Fatalf("slow request: reply %+v", f)
	}
	p.end()
}

// A kernel that sends 60 frames of nearly the line limit to a handler that waits (3.2 GB of
// host memory before the gate counted bytes) does not make the host hold them: the gate
// holds at most its byte bound of requests and refuses the rest busy at once.
//
// law: proto_one_reply_each
func TestGateHoldsBoundedBytes(t *testing.T) {
	slow := newBlocker()
	var mu sync.Mutex
	var heapPeak uint64 // guarded by mu
	g := &Gate{Handlers: map[string]Handler{"w": slow.handle}, Read: func() {
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		mu.Lock()
		heapPeak = max(heapPeak, m.HeapInuse)
		mu.Unlock()
	}}
	p := startPipeGate(t, g, wire.MaxLine)
	body := `"` + strings.Repeat("x", wire.MaxLine-200) + `"`
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	const n = 60
	go func() {
		for i := range n {
			if _, err := io.WriteString(p.w, hostRequest(fmt.Sprint(i), "w", body)+"\n"); err != nil {
				return
			}
		}
	}()
	// Each request is served (its handler starts and waits) or refused busy at once.
	served, busy := 0, 0
	for served+busy < n {
		select {
		case <-slow.started:
			served++
		case f := <-p.replies:
			if f.Error == nil || f.Error.Code != CodeBusy {
				t.Fatalf("reply %+v, want busy", f)
			}
			busy++
		case <-time.After(guard):
			t.Fatalf("%d served and %d refused of %d", served, busy, n)
		}
	}
	if served == 0 || served > int(DefaultMaxHeld/wire.MaxLine) {
		t.Errorf("%d requests of %d MiB served at once, under a bound of %d MiB", served, wire.MaxLine>>20, DefaultMaxHeld>>20)
	}
	runtime.GC()
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	g.mu.Lock()
	peak, held := g.peak, g.held
	g.mu.Unlock()
	mu.Lock()
	reading := int64(heapPeak) - int64(before.HeapInuse)
	mu.Unlock()
	grown := int64(after.HeapInuse) - int64(before.HeapInuse)
	t.Logf("%d served, %d refused busy; gate held at most %d MiB; heap in use grew by %d MiB, at most %d MiB while reading", served, busy, peak>>20, grown>>20, reading>>20)
	if peak > DefaultMaxHeld || held > DefaultMaxHeld {
		t.Errorf("the gate held %d bytes, at most %d; its bound is %d", held, peak, int64(DefaultMaxHeld))
	}
	// The gate's requests, the reader's buffer, and room for the collector.
	if grown > 256<<20 || reading > 1<<30 {
		t.Errorf("the host holds %d MiB more after %d frames of %d MiB (%d MiB at most while reading)", grown>>20, n, wire.MaxLine>>20, reading>>20)
	}
	close(slow.release)
	for range served {
		if f := p.reply("a served large request"); f.Status != wire.StatusOK {
			t.Fatalf("reply %+v", f)
		}
	}
	p.end()
	if g.held != 0 || g.inFlight != 0 {
		t.Errorf("after the end the gate holds %d bytes, %d requests", g.held, g.inFlight)
	}
}

// Past MaxInFlight requests being served, a request is refused busy at once; once one is
// answered, the next is served.
//
// law: proto_one_reply_each
func TestGateBusy(t *testing.T) {
	slow := newBlocker()
	g := &Gate{Handlers: map[string]Handler{"slow": slow.handle, "a": echoHandler}, MaxInFlight: 3}
	p := startPipeGate(t, g, 6000)
	for i := range 3 {
		p.send(hostRequest(fmt.Sprint(i), "slow", `{}`))
		slow.waitStarted(t)
	}
	p.send(hostRequest("x", "a", `{}`))
	if f := p.reply("a request past the bound"); f.ID != "x" || f.Error == nil || f.Error.Code != CodeBusy {
		t.Fatalf("reply %+v, want busy", f)
	}
	// A refusal needs no room: it is still its own.
	p.send(hostRequest("y", "nope", `{}`))
	if f := p.reply("an unserved request"); f.ID != "y" || f.Error == nil || f.Error.Code != CodeUnknownType {
		t.Fatalf("reply %+v", f)
	}
	close(slow.release)
	for range 3 {
		if f := p.reply("a slow request"); f.Status != wire.StatusOK {
			t.Fatalf("reply %+v", f)
		}
	}
	// A request is in flight until its reply is written: once the three replies are, the
	// gate has room again.
	p.send(hostRequest("z", "a", `{}`))
	if f := p.reply("a request once there is room"); f.ID != "z" || f.Status != wire.StatusOK {
		t.Fatalf("reply %+v", f)
	}
	p.end()
}

// A handler's result over the line limit is answered with an error: the kernel would drop a
// reply it cannot read, and its program would wait for ever.
//
// law: proto_one_reply_each
func TestGateReplyTooLarge(t *testing.T) {
	big := func(context.Context, HostRequest) (any, error) { return strings.Repeat("x", wire.MaxLine), nil }
	p := startPipeGate(t, &Gate{Handlers: map[string]Handler{"big": big, "a": echoHandler}}, 6000)
	p.send(hostRequest("1", "big", `{}`))
	if f := p.reply("a request with a large result"); f.ID != "1" || f.Error == nil || f.Error.Code != CodeTooLarge {
		t.Fatalf("reply %+v", f)
	}
	p.send(hostRequest("2", "a", `{}`))
	if f := p.reply("the next request"); f.ID != "2" || f.Status != wire.StatusOK {
		t.Fatalf("reply %+v", f)
	}
	p.end()
}

// When the kernel's stream ends, handlers still working are told (their context ends), each
// still gives its one reply, and Run returns.
//
// law: proto_one_reply_each
func TestGateEndCancelsHandlers(t *testing.T) {
	started := make(chan struct{})
	waiting := func(ctx context.Context, req HostRequest) (any, error) {
		close(started)
		<-ctx.Done()
		return nil, ctx.Err()
	}
	p := startPipeGate(t, &Gate{Handlers: map[string]Handler{"wait": waiting}}, 6000)
	p.send(hostRequest("1", "wait", `{}`))
	select {
	case <-started:
	case <-time.After(guard):
		t.Fatal("the handler did not start")
	}
	p.w.Close()
	if f := p.reply("a request cancelled at the end"); f.ID != "1" || f.Error == nil {
		t.Fatalf("reply %+v", f)
	}
	p.end()
}

// A kernel keeps at most as many requests waiting as the gate serves at once, and sends the
// next as soon as it reads a reply: a request leaves the count in flight before its reply is
// written, so that next one is never refused busy, however the goroutines are scheduled.
// law: request_not_held_back
func TestGateReplyFreesItsPlaceFirst(t *testing.T) {
	const n = 20
	read := make(chan struct{}, n)
	replies := make(chan string, 2*n)
	var p *pipeGate
	g := &Gate{
		MaxInFlight: 1,
		Handlers:    map[string]Handler{"a": func(context.Context, HostRequest) (any, error) { return nil, nil }},
		Read:        func() { read <- struct{}{} },
		Reply: func(f *wire.Frame) error {
			code := f.Status
			if f.Error != nil {
				code = f.Error.Code
			}
			if i, _ := strconv.Atoi(f.ID); i < n && f.Status == wire.StatusOK {
				// The kernel reads this reply and sends its next request at once, while
				// the reply is still being written.
				p.send(fmt.Sprintf(`{"event":"host_request","id":"%d","type":"a"}`, i+1))
				<-read
			}
			replies <- f.ID + ":" + code
			return nil
		},
	}
	p = startPipeGate(t, g, wire.MaxLine)
	p.send(`{"event":"host_request","id":"1","type":"a"}`)
	<-read
	var got, want []string
	for i := 1; i <= n; i++ {
		want = append(want, fmt.Sprintf("%d:ok", i))
		select {
		case r := <-replies:
			got = append(got, r)
		case <-time.After(guard):
			t.Fatalf("replies %v, then none", got)
		}
	}
	if !sameMultiset(got, want) {
		t.Fatalf("replies %v, want %v", got, want)
	}
	p.w.Close()
	if err := <-p.done; err != nil {
		t.Fatal(err)
	}
}

// As many requests as the gate serves at once may each wait, every one started while the
// others wait: the reading goes on past each (it is handed on once a request has waited), so
// a request past the bound is refused busy at once, and when they are let go each gives its
// one reply.
//
// law: request_not_held_back, proto_one_reply_each
func TestGateEveryRequestMayWait(t *testing.T) {
	slow := newBlocker()
	p := startPipeGate(t, &Gate{Handlers: map[string]Handler{"slow": slow.handle, "a": echoHandler}}, 6000)
	for i := range DefaultMaxInFlight {
		p.send(hostRequest(fmt.Sprint(i), "slow", `{}`))
	}
	started := map[string]bool{}
	for range DefaultMaxInFlight {
		started[slow.waitStarted(t)] = true
	}
	if len(started) != DefaultMaxInFlight {
		t.Fatalf("%d distinct requests started, want %d", len(started), DefaultMaxInFlight)
	}
	p.send(hostRequest("x", "a", `{}`))
	if f := p.reply("a request past the bound"); f.ID != "x" || f.Error == nil || f.Error.Code != CodeBusy {
		t.Fatalf("reply %+v, want busy", f)
	}
	close(slow.release)
	replied := map[string]bool{}
	for range DefaultMaxInFlight {
		f := p.reply("a request let go")
		if f.Status != wire.StatusOK || replied[f.ID] || !started[f.ID] {
			t.Fatalf("reply %+v (replied before: %v)", f, replied[f.ID])
		}
		replied[f.ID] = true
	}
	p.end()
}

// A handler may wait for a frame that only the reading brings (a reply to a request the host
// sent the kernel while serving): the reading goes on past it, so it is not waiting for itself.
//
// law: request_not_held_back
func TestGateHandlerWaitsForTheReading(t *testing.T) {
	routed := make(chan string, 1)
	waits := func(ctx context.Context, req HostRequest) (any, error) {
		select {
		case id := <-routed:
			return map[string]string{"routed": id}, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	g := &Gate{
		Handlers: map[string]Handler{"waits": waits},
		Route:    func(h wire.Head, _ wire.Line) { routed <- h.ID },
	}
	p := startPipeGate(t, g, 6000)
	p.send(hostRequest("1", "waits", `{}`))
	p.send(`{"event":"reply","id":"h1","status":"ok"}`)
	if f := p.reply("a request waiting for a routed frame"); f.ID != "1" || f.Status != wire.StatusOK || !strings.Contains(string(f.Body), `"h1"`) {
		t.Fatalf("reply %+v", f)
	}
	p.end()
}

// Requests whose handlers return at once, work a random while (near handOnAfter on this
// machine, or far from it), or wait until a later request has been read — which only a
// reading handed on can do: each request gets exactly one reply, no two goroutines ever read
// at once (the race detector watches the reader), and Run returns once all are answered.
// Nothing waits on the clock: a handler waits on the gate's reading, or works.
//
// law: proto_one_reply_each
func TestGateHandOnRandom(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("PADDOCK_GATE_SEED"); s != "" {
		seed, _ = strconv.ParseUint(s, 10, 64)
	}
	t.Logf("PADDOCK_GATE_SEED=%d", seed)
	rng := rand.New(rand.NewPCG(seed, seed))
	const n = 400
	work := make([]int, n)  // spins of work before answering
	after := make([]int, n) // the request whose reading it waits for; itself: none
	read := make([]chan struct{}, n)
	for i := range n {
		read[i] = make(chan struct{})
		after[i] = i
		switch rng.IntN(3) {
		case 1:
			work[i] = rng.IntN(20000)
		case 2:
			after[i] = min(i+1+rng.IntN(5), n-1)
		}
	}
	var reads atomic.Int64
	handle := func(_ context.Context, req HostRequest) (any, error) {
		i, _ := strconv.Atoi(req.ID)
		if after[i] != i {
			<-read[after[i]]
		}
		for range work[i] {
			runtime.Gosched()
		}
		return nil, nil
	}
	var mu sync.Mutex
	replies := map[string]int{}
	all := make(chan struct{})
	slots := make(chan struct{}, wire.MaxHostRequests)
	g := &Gate{
		Handlers: map[string]Handler{"h": handle},
		Read: func() { // one goroutine reads at a time: the requests are read in order
			if k := reads.Add(1) - 1; k < n {
				close(read[k])
			}
		},
		Reply: func(f *wire.Frame) error {
			mu.Lock()
			defer mu.Unlock()
			if f.Status != wire.StatusOK {
				t.Errorf("reply %+v", f)
			}
			replies[f.ID]++
			<-slots
			if len(replies) == n && replies[f.ID] == 1 {
				close(all)
			}
			return nil
		},
	}
	p := startPipeGate(t, g, 6000)
	go func() { // a kernel keeps at most the gate's bound waiting
		for i := range n {
			slots <- struct{}{}
			if _, err := io.WriteString(p.w, hostRequest(fmt.Sprint(i), "h", `{}`)+"\n"); err != nil {
				return
			}
		}
	}()
	select {
	case <-all:
	case <-time.After(guard):
		t.Fatal("not every request was answered")
	}
	p.end()
	for id, k := range replies {
		if k != 1 {
			t.Errorf("request %s: %d replies", id, k)
		}
	}
}
