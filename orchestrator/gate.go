package orchestrator

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/paddockhq/paddock/errdefs"
	"github.com/paddockhq/paddock/transport/wire"
)

// HostRequest is an accepted host request, as its handler sees it.
type HostRequest struct {
	ID   string
	Type string
	Body json.RawMessage
}

// Decode decodes the request's body into v; a body that does not decode is the
// agent's error, with code bad_request.
func (r HostRequest) Decode(v any) error {
	if err := json.Unmarshal(r.Body, v); err != nil {
		return &requestError{code: "bad_request", msg: fmt.Sprintf("%s: the body does not decode: %v", r.Type, err)}
	}
	return nil
}

type requestError struct{ code, msg string }

func (e *requestError) Error() string { return e.msg }
func (e *requestError) Code() string  { return e.code }

// Class is the error's class.
func (e *requestError) Class() errdefs.Class { return errdefs.Refused }

// Handler serves one type of host request. Its result is the reply's body; an error is the
// reply's error, with the code of a Coded error (else "failed"). The request's Body is
// valid until the handler returns.
type Handler func(ctx context.Context, req HostRequest) (any, error)

// Coded is an error with a stable code for the agent.
type Coded interface {
	error
	Code() string
}

// Gate reads a kernel's frames and admits them one by one, in the order they arrive
// (admission.go decides). Each accepted host request is served where it was read, and its
// reply goes out as soon as it is made; a request that waits (a question, a collect, a slow
// read) keeps only its own goroutine, the reading going on in another once it has waited
// handOnAfter, so it holds back no other for longer than that; a refusal is written at once
// by the gate's own writer, never behind a handler. Every host request gets exactly one
// reply, with its id; replies go out in the order they are made, not the order their
// requests came. Replies and stream chunks for the host's own requests are routed as they
// are read, so output keeps flowing while handlers work.
//
// What the gate holds is bounded in requests and in bytes: at most MaxInFlight requests are
// served at once, and a request is taken only if, with it, the requests being served and the
// replies not yet written hold at most MaxHeld bytes (a request counted at the memory its line
// keeps, holdCost); one that would pass either bound is refused busy. A reply cannot be
// refused: replies are at most MaxInFlight, each within the line limit, and while they wait
// for a kernel that reads slowly no request is taken. The reading never
// waits for a handler past handOnAfter: it also carries the replies a handler may itself be
// waiting for, so holding it would stall the session; the refusal tells the program to ask
// again.
type Gate struct {
	Handlers map[string]Handler
	// Reply writes one frame to the kernel. It is called from several goroutines at once.
	Reply func(*wire.Frame) error
	// Route takes a reply or stream frame; the line is valid until Route returns.
	Route func(h wire.Head, line wire.Line)
	// Read, when set, is called after each frame is dealt with (routed, started, refused or
	// dropped).
	Read func()
	Log  *slog.Logger
	// MaxInFlight bounds the host requests served at once, from admission until their reply
	// is made (written or not); 0 is DefaultMaxInFlight.
	MaxInFlight int
	// MaxHeld bounds the bytes the gate holds for host requests: the lines of requests being
	// served and the replies not yet written; 0 is DefaultMaxHeld. A request that would pass
	// it is refused busy, so set it at least to the reader's line limit for a request of any
	// size to be served when nothing else is.
	MaxHeld int64

	ids idRing

	mu       sync.Mutex
	inFlight int   // guarded by mu
	held     int64 // guarded by mu
	peak     int64 // guarded by mu: the most bytes held at once
}

// Bounds of a gate.
const (
	DefaultMaxInFlight = wire.MaxHostRequests
	DefaultMaxHeld     = 2 * wire.MaxLine // two requests of the largest size
	// refusalQueue is how many refusals may wait for the writer. Each is small (its id and
	// type are within the head, wire.MaxHead), so the queue holds well under a megabyte.
	refusalQueue = 64
)

// Run reads frames from r until it ends. It returns nil at the end of the stream, a
// *wire.ProtocolFault for a frame that cannot be answered, or the reader's error. When the
// reading ends, the handlers still working are cancelled (their kernel is gone or faulty);
// every host request read before the end has had its reply written, or its write fail,
// before Run returns.
func (g *Gate) Run(ctx context.Context, r *wire.Reader) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	rd := &reading{
		g: g, r: r, ctx: ctx, end: cancel,
		maxInFlight: g.MaxInFlight, maxHeld: g.MaxHeld,
		refusals: make(chan *wire.Frame, refusalQueue),
		done:     make(chan error, 1),
	}
	if rd.maxInFlight <= 0 {
		rd.maxInFlight = DefaultMaxInFlight
	}
	if rd.maxHeld <= 0 {
		rd.maxHeld = DefaultMaxHeld
	}
	// A request leaves the count in flight once its reply is made, while its goroutine may
	// still be writing it: twice the bound of goroutines serve at once.
	rd.serving = make(chan struct{}, 2*rd.maxInFlight)
	rd.wg.Go(func() { // the refusals' writer
		for f := range rd.refusals {
			g.write(f)
		}
	})
	rd.watchdog = time.AfterFunc(time.Hour, rd.watch)
	rd.watchdog.Stop()
	rd.read() // returns at the end, or once the reading has gone on elsewhere and what it served is answered
	err := <-rd.done
	rd.wg.Wait()
	rd.watchdog.Stop()
	return err
}

// handOnAfter is how long the goroutine that reads serves a request itself before the reading
// goes on in another goroutine. Most requests are answered well within it, and serving them
// where they were read costs no hand-off to another goroutine (on a small machine, a wake-up
// on the other core for every request, which made the gate half as fast); one that waits (a
// question, a collect, a slow disk) holds the reading for this long, or for as long as the
// runtime takes to fire a timer when every goroutine waits (about a millisecond), never more.
const handOnAfter = 100 * time.Microsecond

// asideFrom: a request this large is served in a goroutine of its own from the start. Its
// handler's work (checking its bytes, decoding, writing them) takes far longer than the
// hand-off, and the reading meanwhile reads the next line.
const asideFrom = 1 << 20

// reading is a gate's reading while it runs. One goroutine at a time reads; it serves each
// request it accepts itself, and hands the reading on to a fresh goroutine when the request
// takes longer than handOnAfter.
type reading struct {
	g   *Gate
	r   *wire.Reader
	ctx context.Context
	end context.CancelFunc // cancels the handlers still working when the reading ends

	maxInFlight int
	maxHeld     int64

	serving  chan struct{} // a slot for each request served, from admission until its reply is written
	refusals chan *wire.Frame
	done     chan error // the reading's end: nil, a fault or the reader's error
	wg       sync.WaitGroup

	// seq counts requests served where they were read: odd while one is, each one ended
	// twice over (once by its answer, or by the watch that hands the reading on, whichever
	// comes first).
	seq      atomic.Uint64
	armed    atomic.Bool // the watchdog is set, or a watch runs
	watchdog *time.Timer
	seen     uint64 // the watch's own: seq at the last watch
}

// read reads frames until the stream ends, then ends the gate's reading, or until a request it
// serves takes long enough for the reading to go on elsewhere.
func (rd *reading) read() {
	g := rd.g
	for {
		line, err := rd.r.Next()
		if errors.Is(err, io.EOF) {
			rd.finish(nil)
			return
		}
		if err != nil {
			rd.finish(err)
			return
		}
		facts := FrameFacts{Oversize: line.Oversize()}
		var rest bool
		facts.Head, facts.NotUTF8, rest, facts.HeadErr = readHead(line)
		if facts.HeadErr == nil && facts.Head.Event == wire.EventHostRequest {
			_, facts.Served = g.Handlers[facts.Head.Type]
			facts.Seen = g.ids.has(facts.Head.ID)
			g.mu.Lock()
			facts.Busy = g.inFlight >= rd.maxInFlight || g.held+holdCost(line) > rd.maxHeld
			g.mu.Unlock()
		}
		adm := Admit(facts)
		if adm.Remember {
			g.ids.add(facts.Head.ID)
		}
		switch adm.Action {
		case Fault:
			line.Release()
			pf := &wire.ProtocolFault{Reason: "not UTF-8"}
			if facts.HeadErr != nil && !errors.As(facts.HeadErr, &pf) {
				pf = &wire.ProtocolFault{Reason: facts.HeadErr.Error()}
			}
			if facts.Oversize {
				pf = &wire.ProtocolFault{Reason: "over the line limit with no readable head: " + pf.Reason}
			}
			rd.finish(pf)
			return
		case Accept:
			j := job{head: facts.Head, line: line.Bytes, cost: holdCost(line), release: line.Release, checkRest: rest}
			if j.cost < int64(line.Block()) {
				j.line, j.release = bytes.Clone(line.Bytes), nil
				line.Release()
			}
			g.count(1, j.cost)
			if g.Read != nil {
				g.Read()
			}
			if !rd.serve(j) {
				return
			}
			continue
		case Refuse:
			f := wire.ErrorReply(facts.Head.ID, adm.Status, adm.Code, refusalText(adm, facts, line.Size))
			line.Release()
			// Waits only while the writer is blocked on a kernel that does not read; the
			// write bound of the connection ends that.
			rd.refusals <- f
		case Route:
			g.Route(facts.Head, line)
			line.Release()
		case Drop:
			line.Release()
			if adm.Code != "" && g.Log != nil {
				g.Log.Warn("frame dropped", "event", facts.Head.Event, "id", facts.Head.ID, "code", adm.Code, "size", line.Size)
			}
		}
		if g.Read != nil {
			g.Read()
		}
	}
}

// serve answers j here and reports whether this goroutine still reads. If the watch (watch)
// finds j still served after handOnAfter, the reading goes on in a goroutine of its own and
// this one only answers j. The gate has room for j (fewer than maxInFlight requests in
// flight); when every slot to serve in is taken, a request has been answered and its reply is
// being written, so the reading waits for that write (bounded by the connection's write
// deadline), never for a handler.
func (rd *reading) serve(j job) bool {
	rd.serving <- struct{}{}
	if len(j.line) >= asideFrom {
		rd.wg.Go(func() {
			rd.g.answer(rd.ctx, j)
			<-rd.serving
		})
		return true
	}
	s := rd.seq.Add(1) // odd: a request is served where it was read
	if rd.armed.CompareAndSwap(false, true) {
		rd.watchdog.Reset(handOnAfter)
	}
	rd.g.answer(rd.ctx, j)
	<-rd.serving
	return rd.seq.CompareAndSwap(s, s+1)
}

// watch runs every handOnAfter while requests are served where they are read (the timer is
// armed by the first and kept while they go on, so a stream of quick requests pays for one
// timer each period, not one each): a request found served at two watches in a row has been
// served for at least handOnAfter, and the reading goes on in a fresh goroutine. Only one
// watch runs at a time, so seen is its own.
func (rd *reading) watch() {
	for {
		s := rd.seq.Load()
		if s%2 == 1 && s == rd.seen && rd.seq.CompareAndSwap(s, s+1) {
			rd.wg.Add(1)
			go func() {
				defer rd.wg.Done()
				rd.read()
			}()
			s++
		}
		rd.seen = s
		if s%2 == 1 {
			rd.watchdog.Reset(handOnAfter)
			return
		}
		rd.armed.Store(false)
		// A request served since the load above found the watch armed and left it to this one.
		if rd.seq.Load()%2 == 0 || !rd.armed.CompareAndSwap(false, true) {
			return
		}
	}
}

// finish ends the gate's reading with err: the refusals' writer ends once it has written
// those queued, the handlers still working are cancelled, and Run returns err once every
// request read has been answered.
func (rd *reading) finish(err error) {
	close(rd.refusals)
	rd.end()
	rd.done <- err
}

// job is an accepted request: its head and its line, what holding the line costs and, when
// the line is the reader's, its release.
type job struct {
	head    wire.Head
	line    []byte
	cost    int64
	release func()
	// checkRest: the line past its head is still to be checked for UTF-8 (readHead).
	checkRest bool
}

// copyBelow: a line smaller than 1/copyBelow of the reader's buffer it lies in is copied out
// of it to be held; a larger one is held where it is.
const copyBelow = 8

// holdCost is what holding a request's line while it is served costs the host. A line keeps
// the whole buffer it lies in from reuse (wire.Line.Block), so a line much smaller than that
// (a short request; one read after a long line, in its buffer) is copied out and costs its
// size; any other is held where it is, costing its buffer, which is at most copyBelow times
// the line. Copying every line would cost the common large request (a file written) a copy.
func holdCost(line wire.Line) int64 {
	if b := int64(line.Block()); line.Size*copyBelow >= b {
		return b
	}
	return line.Size
}

// readHead reads a line's head. A line that is not UTF-8 still has a readable head when every
// member of the head comes before the first invalid byte: the head is returned with notUTF8.
// An oversized line is checked only in the head that was kept. A host request's bytes past
// its head are left unchecked (rest): answer checks them before its handler sees the
// line, so the reading never scans a large request twice, and a request refused busy or
// unknown is never scanned past its head. Any other line within the limit is checked whole here.
func readHead(line wire.Line) (h wire.Head, notUTF8, rest bool, err error) {
	if line.Oversize() {
		h, err = wire.ReadHead(line.Head, false)
		return h, false, false, err
	}
	// The head is the line's first wire.MaxHead bytes: complete only when that is all of it;
	// else it may end inside a character. ReadHead checks the head's own bytes.
	complete := len(line.Head) == len(line.Bytes)
	if h, err = wire.ReadHead(line.Head, complete); err == nil {
		switch {
		case complete:
			return h, false, false, nil
		case h.Event == wire.EventHostRequest:
			return h, false, true, nil
		case utf8.Valid(line.Bytes):
			return h, false, false, nil
		}
	} else if utf8.Valid(line.Bytes) {
		return h, false, false, err
	}
	head := line.Head
	if n := validPrefix(head); n < len(head) {
		head, complete = head[:n], false
	}
	h, err = wire.ReadHead(head, complete)
	if err == nil && h.Rest < 0 {
		err = &wire.ProtocolFault{Reason: "not UTF-8 within the head"}
	}
	return h, true, false, err
}

// unchecked is where the bytes of a line readHead left to answer begin: the reader
// checked the head but for a character it may cut at its end (wire.ReadHead drops up to
// utf8.UTFMax bytes there), so the rest starts at the first character before those.
func unchecked(line []byte) int {
	i := wire.MaxHead - utf8.UTFMax
	for i > 0 && !utf8.RuneStart(line[i]) {
		i--
	}
	return i
}

// validPrefix is the length of b's longest prefix that is UTF-8.
func validPrefix(b []byte) int {
	n := 0
	for n < len(b) {
		r, size := utf8.DecodeRune(b[n:])
		if r == utf8.RuneError && size <= 1 {
			break
		}
		n += size
	}
	return n
}

// count adds to what the gate holds: requests in flight and bytes.
func (g *Gate) count(requests int, bytes int64) {
	g.mu.Lock()
	g.inFlight += requests
	g.held += bytes
	g.peak = max(g.peak, g.held)
	g.mu.Unlock()
}

// answer serves one accepted request and writes its one reply.
func (g *Gate) answer(ctx context.Context, j job) {
	var reply *wire.Frame
	if j.checkRest && !utf8.Valid(j.line[unchecked(j.line):]) {
		// The admission the reading made, completed with the fact it left to answer.
		adm := Admit(FrameFacts{Head: j.head, Served: true, NotUTF8: true})
		reply = wire.ErrorReply(j.head.ID, adm.Status, adm.Code, refusalText(adm, FrameFacts{Head: j.head}, int64(len(j.line))))
	} else {
		reply = g.serve(ctx, j.head, j.line)
	}
	if j.release != nil { // the request's line is no longer used
		j.release()
	}
	// The request is answered: it leaves the requests in flight before its reply is written,
	// since a kernel that reads the reply may send its next request at once (its relay
	// keeps at most wire.MaxHostRequests waiting, the gate's own bound). Until written, the
	// reply is held instead of the request.
	size := int64(len(reply.Body)) + int64(len(reply.ID))
	g.count(-1, size-j.cost)
	g.write(reply)
	g.count(0, -size)
}

func (g *Gate) write(f *wire.Frame) {
	if err := g.Reply(f); err != nil && g.Log != nil {
		g.Log.Warn("reply not written", "id", f.ID, "err", err)
	}
}

func refusalText(adm Admission, f FrameFacts, size int64) string {
	switch adm.Code {
	case CodeTooLarge:
		return fmt.Sprintf("the frame is %d bytes, over the limit of %d", size, wire.MaxLine)
	case CodeNotUTF8:
		return "the request is not UTF-8"
	case CodeNoType:
		return "a host request needs a type"
	case CodeNoID:
		return "a host request needs an id"
	case CodeUnknownType:
		return fmt.Sprintf("the host does not serve %q", f.Head.Type)
	case CodeDuplicate:
		return fmt.Sprintf("id %q was used before", f.Head.ID)
	case CodeBusy:
		return "the host is serving as many requests as it may; ask again when one has been answered"
	}
	return adm.Code
}

// replyRoom is what a reply line holds besides its body and id: its other members.
const replyRoom = 256

// serve runs the request's handler and makes its one reply. A reply the kernel could not
// read, one over the line limit, becomes an error reply: the kernel would drop it, and its
// program would wait for ever.
func (g *Gate) serve(ctx context.Context, head wire.Head, line []byte) (reply *wire.Frame) {
	id := head.ID
	// The body is handed on undecoded: decoding it is the handler's part.
	body, ok := wire.Member(line, head, "body")
	if !ok {
		f, err := wire.Decode(line)
		if err != nil {
			return wire.ErrorReply(id, wire.StatusError, "bad_request", err.Error())
		}
		body = f.Body
	}
	defer func() {
		if p := recover(); p != nil {
			if g.Log != nil {
				g.Log.Error("host request handler panicked", "type", head.Type, "panic", p)
			}
			reply = wire.ErrorReply(id, wire.StatusError, "failed", "the host failed to serve this request")
		}
	}()
	res, err := g.Handlers[head.Type](ctx, HostRequest{ID: id, Type: head.Type, Body: body})
	if err != nil {
		code := "failed"
		var c Coded
		if errors.As(err, &c) {
			code = c.Code()
		}
		return wire.ErrorReply(id, wire.StatusError, code, err.Error())
	}
	reply, err = wire.Reply(id, res)
	if err != nil {
		return wire.ErrorReply(id, wire.StatusError, "failed", "the reply could not be encoded")
	}
	// An id is at most wire.MaxHead bytes, each escaped in at most 6.
	if n := len(reply.Body) + 6*len(id) + replyRoom; n > wire.MaxLine {
		return wire.ErrorReply(id, wire.StatusError, CodeTooLarge, fmt.Sprintf("the reply is %d bytes, over the limit of %d", len(reply.Body), wire.MaxLine))
	}
	return reply
}

// idRing remembers the last wire.RememberedIDs ids.
type idRing struct {
	ring [wire.RememberedIDs]string
	next int
	set  map[string]struct{}
}

func (r *idRing) has(id string) bool {
	_, ok := r.set[id]
	return ok
}

func (r *idRing) add(id string) {
	if r.set == nil {
		r.set = make(map[string]struct{}, wire.RememberedIDs)
	}
	if old := r.ring[r.next]; old != "" {
		delete(r.set, old)
	}
	r.ring[r.next] = id
	r.set[id] = struct{}{}
	r.next = (r.next + 1) % len(r.ring)
}
