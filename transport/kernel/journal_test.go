//go:build linux

package kernel

import (
	"encoding/json"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/paddockhq/paddock/transport/wire"
)

// pair is a connected pair of unix sockets.
func pair(t *testing.T) (net.Conn, net.Conn) {
	t.Helper()
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	conn := func(fd int) net.Conn {
		f := os.NewFile(uintptr(fd), "pair")
		defer f.Close()
		c, err := net.FileConn(f)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	return conn(fds[0]), conn(fds[1])
}

// reattach attaches a new host to j and reads its resume frame and the frames replayed.
func reattach(t *testing.T, j *journal) (wire.Resume, []wire.Frame) {
	t.Helper()
	host, kernel := pair(t)
	j.attach(kernel)
	host.SetReadDeadline(time.Now().Add(5 * time.Second))
	r := wire.NewReader(host)
	line, err := r.Next()
	if err != nil {
		t.Fatal(err)
	}
	f, err := wire.Decode(line.Bytes)
	if err != nil || f.Event != wire.EventResume {
		t.Fatalf("first frame %+v %v", f, err)
	}
	var res wire.Resume
	if err := json.Unmarshal(f.Body, &res); err != nil {
		t.Fatal(err)
	}
	var frames []wire.Frame
	for range res.Replay {
		line, err := r.Next()
		if err != nil {
			t.Fatal(err)
		}
		f, err := wire.Decode(line.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		frames = append(frames, f)
	}
	return res, frames
}

func events(frames []wire.Frame) string {
	var out []string
	for _, f := range frames {
		out = append(out, f.Event+":"+f.ID)
	}
	return strings.Join(out, " ")
}

// What a new host is sent again: every frame not acknowledged, and every frame of an exec
// not released, its reply included; never a host request no one will answer, never what
// was acknowledged and belongs to no held exec.
func TestJournalReplay(t *testing.T) {
	j := newJournal()
	reply := func(id string) { j.write(&wire.Frame{Event: wire.EventReply, ID: id, Status: wire.StatusOK}) }
	stream := func(id, data string) {
		j.write(&wire.Frame{Event: wire.EventStream, ID: id, FD: 1, Data: []byte(data)})
	}
	reply("p1")
	j.hold("x1")
	stream("x1", "a")
	stream("x1", "b")
	j.write(&wire.Frame{Event: wire.EventHostRequest, ID: "h1", Type: "t"})
	stream("x1", "c")
	j.ack(wire.Ack{Seq: 5})
	res, frames := reattach(t, j)
	if res.Last != 5 || events(frames) != "stream:x1 stream:x1 stream:x1" ||
		len(res.Execs) != 1 || res.Execs[0] != (wire.HeldExec{ID: "x1", Running: true}) {
		t.Errorf("after an ack: %+v, %s", res, events(frames))
	}
	j.ended("x1")
	reply("x1")
	j.write(&wire.Frame{Event: wire.EventHostRequest, ID: "h2", Type: "t"})
	reply("p2")
	res, frames = reattach(t, j)
	if res.Last != 8 || events(frames) != "stream:x1 stream:x1 stream:x1 reply:x1 reply:p2" ||
		len(res.Execs) != 1 || res.Execs[0].Running {
		t.Errorf("after the exec's end: %+v, %s", res, events(frames))
	}
	j.ack(wire.Ack{Seq: 100, Done: []string{"x1"}}) // past what was written: up to the last
	res, frames = reattach(t, j)
	if res.Last != 8 || len(frames) != 0 || len(res.Execs) != 0 {
		t.Errorf("after the release: %+v, %s", res, events(frames))
	}
}

// Past its bound, the journal drops a held exec's oldest acknowledged output and counts
// it: what is sent again and what was skipped are the whole output.
func TestJournalHeldBound(t *testing.T) {
	j := newJournal()
	j.maxHeld = 300
	j.hold("x1")
	var all strings.Builder
	for i := range 20 {
		d := strings.Repeat(string(rune('a'+i)), 10)
		all.WriteString(d)
		j.write(&wire.Frame{Event: wire.EventStream, ID: "x1", FD: 1, Data: []byte(d)})
	}
	j.ack(wire.Ack{Seq: 20})
	res, frames := reattach(t, j)
	var got strings.Builder
	for _, f := range frames {
		got.Write(f.Data)
	}
	if len(res.Execs) != 1 || res.Execs[0].Skipped == 0 || j.heldBytes > j.maxHeld {
		t.Fatalf("over the bound: %+v, %d bytes kept", res, j.heldBytes)
	}
	if skipped := res.Execs[0].Skipped; all.String()[skipped:] != got.String() {
		t.Errorf("skipped %d, then %q; the whole output %q", skipped, got.String(), all.String())
	}
}

// When the frames not acknowledged reach the bound, a writer waits for an ack: nothing is
// dropped while no host reads.
func TestJournalWaitsForAcks(t *testing.T) {
	frame := &wire.Frame{Event: wire.EventStream, ID: "x", FD: 1, Data: []byte(strings.Repeat("z", 40))}
	line, _ := wire.Append(nil, frame)
	j := newJournal()
	j.maxUnacked = 3*len(line) - 1 // three frames go out, the fourth waits
	wrote := make(chan int)
	go func() {
		for i := range 10 {
			j.write(frame)
			wrote <- i
		}
		close(wrote)
	}()
	for n := range 3 {
		select {
		case <-wrote:
		case <-time.After(10 * time.Second):
			t.Fatalf("write %d did not return", n)
		}
	}
	select {
	case <-wrote:
		t.Fatal("a fourth write returned with no ack")
	case <-time.After(200 * time.Millisecond):
	}
	n := 3
	j.ack(wire.Ack{Seq: uint64(n)})
	for range wrote {
		n++
		j.ack(wire.Ack{Seq: uint64(n)})
	}
	if n != 10 || j.seq != 10 {
		t.Errorf("%d writes, %d frames", n, j.seq)
	}
}
