//go:build linux

package kernel

import (
	"encoding/json"
	"net"
	"slices"
	"strings"
	"sync"

	"github.com/paddockhq/paddock/transport/wire"
)

// Bounds of a journal.
const (
	// maxUnacked is how many bytes of frames the host has not acknowledged are kept before
	// writers wait: the output of the sandbox's programs then backs up into their pipes.
	maxUnacked = 64 << 20
	// maxHeld is how many bytes of acknowledged output of held execs are kept for a host
	// that connects anew; past it the oldest go, counted as skipped.
	maxHeld = 64 << 20
)

// journal is a listening kernel's output. Every frame is numbered and kept until the host
// acknowledges it; the frames of an exec the host holds (from its start until the host
// releases it) are kept past that, so that a host that connects anew — a new process after
// the old one died — is sent them again: the whole output of a running job, its reply when
// it ended meanwhile. Nothing is dropped while no host is connected; writers wait instead.
type journal struct {
	mu        sync.Mutex
	room      *sync.Cond // signalled when an ack or the end frees room
	seq       uint64     // the number of the last frame written
	acked     uint64
	frames    []record // kept, in order
	unacked   int      // bytes of the kept frames numbered after acked
	heldBytes int      // bytes of the kept frames numbered up to acked (held execs' output)
	held      map[string]*heldExec
	conn      net.Conn // the host's connection; nil when none
	closed    bool

	maxUnacked, maxHeld int // the bounds: the constants, but in tests

	current sync.Mutex // guards live, which attach closes without waiting for mu
	live    net.Conn
}

// record is one frame kept.
type record struct {
	seq   uint64
	id    string
	event string
	step  int // a judge's number
	data  int // a stream frame's output bytes
	line  []byte
}

// heldExec is an exec the host has not released.
type heldExec struct {
	running bool
	skipped int64
}

func newJournal() *journal {
	j := &journal{held: map[string]*heldExec{}, maxUnacked: maxUnacked, maxHeld: maxHeld}
	j.room = sync.NewCond(&j.mu)
	return j
}

// write numbers a frame, keeps it, and sends it to the host when one is connected. A failed
// send only ends the connection: the frame waits for the next.
func (j *journal) write(f *wire.Frame) error {
	line, err := wire.Append(nil, f)
	if err != nil {
		return err
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	for j.unacked >= j.maxUnacked && !j.closed {
		j.room.Wait()
	}
	j.seq++
	j.frames = append(j.frames, record{seq: j.seq, id: f.ID, event: f.Event, step: f.Step, data: len(f.Data), line: line})
	j.unacked += len(line)
	if j.conn != nil {
		if _, err := j.conn.Write(line); err != nil {
			j.conn.Close()
			j.conn = nil
		}
	}
	return nil
}

// hold keeps an exec's frames until the host releases it.
func (j *journal) hold(id string) {
	j.mu.Lock()
	j.held[id] = &heldExec{running: true}
	j.mu.Unlock()
}

// ended marks a held exec as ended; its reply follows.
func (j *journal) ended(id string) {
	j.mu.Lock()
	if h := j.held[id]; h != nil {
		h.running = false
	}
	j.mu.Unlock()
}

// judged drops an exec's judge that has had its verdict: a host that connects anew is sent
// only the judges still waiting, never one to decide again.
func (j *journal) judged(id string, step int) {
	j.mu.Lock()
	defer j.mu.Unlock()
	for i, e := range j.frames {
		if e.event == wire.EventJudge && e.id == id && e.step == step {
			if e.seq > j.acked {
				j.unacked -= len(e.line)
			} else {
				j.heldBytes -= len(e.line)
			}
			j.frames = slices.Delete(j.frames, i, i+1)
			j.room.Broadcast()
			return
		}
	}
}

// ack takes a host's acknowledgement.
func (j *journal) ack(a wire.Ack) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if a.Seq > j.seq {
		a.Seq = j.seq // what was not written cannot have been handled
	}
	if a.Seq > j.acked {
		j.acked = a.Seq
	}
	for _, id := range a.Done {
		delete(j.held, id)
	}
	j.trim()
	j.room.Broadcast()
}

// trim drops the frames no host will need again; the caller holds mu.
func (j *journal) trim() {
	kept := j.frames[:0]
	j.unacked, j.heldBytes = 0, 0
	for _, e := range j.frames {
		switch {
		case e.seq > j.acked:
			j.unacked += len(e.line)
		case e.id != "" && j.held[e.id] != nil && e.event != wire.EventHostRequest:
			j.heldBytes += len(e.line)
		default:
			continue
		}
		kept = append(kept, e)
	}
	clear(j.frames[len(kept):])
	j.frames = kept
	if j.heldBytes <= j.maxHeld {
		return
	}
	// Over the bound: the oldest acknowledged output goes first, counted per exec.
	kept = j.frames[:0]
	for _, e := range j.frames {
		if j.heldBytes > j.maxHeld && e.seq <= j.acked && e.event == wire.EventStream {
			j.heldBytes -= len(e.line)
			j.held[e.id].skipped += int64(e.data)
			continue
		}
		kept = append(kept, e)
	}
	clear(j.frames[len(kept):])
	j.frames = kept
}

// attach makes c the host's connection: the connection before it is closed, and c is sent
// the resume frame, then every frame kept. The host requests that were not answered are
// dropped, not sent again: the relay has failed them (the program asks again).
func (j *journal) attach(c net.Conn) {
	j.current.Lock()
	old := j.live
	j.live = c
	j.current.Unlock()
	if old != nil {
		old.Close() // a write blocked on it returns, so mu comes free
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.conn != nil {
		j.conn.Close()
		j.conn = nil
	}
	frames := j.frames[:0]
	for _, e := range j.frames {
		if e.event == wire.EventHostRequest {
			if e.seq > j.acked {
				j.unacked -= len(e.line)
			}
			continue
		}
		frames = append(frames, e)
	}
	clear(j.frames[len(frames):])
	j.frames = frames
	res := wire.Resume{Last: j.seq, Replay: len(j.frames)}
	for id, h := range j.held {
		res.Execs = append(res.Execs, wire.HeldExec{ID: id, Running: h.running, Skipped: h.skipped})
	}
	slices.SortFunc(res.Execs, func(a, b wire.HeldExec) int { return strings.Compare(a.ID, b.ID) })
	body, _ := json.Marshal(res)
	head, _ := wire.Append(nil, &wire.Frame{Event: wire.EventResume, Body: body})
	bufs := net.Buffers{head}
	for _, e := range j.frames {
		bufs = append(bufs, e.line)
	}
	if _, err := bufs.WriteTo(c); err != nil {
		c.Close()
		return
	}
	j.conn = c
	j.room.Broadcast()
}

// detach forgets c when it is still the host's connection.
func (j *journal) detach(c net.Conn) {
	j.mu.Lock()
	if j.conn == c {
		j.conn = nil
	}
	j.mu.Unlock()
	c.Close()
}

// close ends the journal: writers no longer wait, and the connection ends once what was
// written has been sent.
func (j *journal) close() {
	j.mu.Lock()
	j.closed = true
	if j.conn != nil {
		if u, ok := j.conn.(*net.UnixConn); ok {
			u.CloseWrite()
		}
	}
	j.room.Broadcast()
	j.mu.Unlock()
}
