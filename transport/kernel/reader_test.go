//go:build linux

package kernel_test

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/paddockhq/paddock/transport/wire"
)

// A malformed line gets an error reply when its id can be read, a diagnostic otherwise, and
// the kernel keeps serving.
func TestMalformedLines(t *testing.T) {
	k := startKernel(t, "")
	cases := []struct {
		line string
		id   string // "": no reply
		code string
	}{
		{line: `garbage`},
		{line: `{"event":"request","type":"ping"}`},
		{line: `{"event":"reply","id":"nobody","status":"ok"}`},
		{line: `{"event":"request","id":"m1","type":"nope"}`, id: "m1", code: "unknown_type"},
		{line: `{"event":"request","id":"m2"}`, id: "m2", code: "unknown_type"},
		{line: `{"event":"request","id":"m3","type":"ping",`, id: "m3", code: "bad_request"},
		{line: `{"event":"stream","id":"m4","data":"AA=="}`, id: "m4", code: "bad_request"},
		{line: `{"event":"request","id":"m5","type":"stat","body":"/"}`, id: "m5", code: "bad_request"},
		{line: `{"event":"request","id":"m6","type":"signal","body":{"target":1}}`, id: "m6", code: "bad_request"},
		{line: "{\"event\":\"request\",\"id\":\"m7\",\"type\":\"ping\"\xff}", id: "m7", code: "bad_request"},
	}
	for _, c := range cases {
		k.sendLine([]byte(c.line))
		if c.id == "" {
			continue
		}
		f := k.reply(c.id)
		if f.Status != wire.StatusError || f.Error == nil || f.Error.Code != c.code {
			t.Errorf("%s: reply %+v %v, want %s", c.line, f, f.Error, c.code)
		}
	}
	// A line over the limit: its head's id gets the refusal, the rest is skipped.
	big := append([]byte(`{"event":"request","id":"huge","type":"exec","body":"`), bytes.Repeat([]byte("A"), wire.MaxLine)...)
	k.sendLine(append(big, '"', '}'))
	if f := k.reply("huge"); f.Error == nil || f.Error.Code != "bad_request" {
		t.Errorf("oversize: %+v %v", f, f.Error)
	}
	// Still serving, and nothing answered the lines without an id.
	k.hello()
	k.mu.Lock()
	defer k.mu.Unlock()
	for id, q := range k.queues {
		if len(q) > 0 && !strings.HasPrefix(id, "r") {
			t.Errorf("unexpected frames for %q: %+v", id, q)
		}
	}
	if s := k.stderr.String(); !strings.Contains(s, "ignored") {
		t.Errorf("no diagnostic on stderr: %q", s)
	}
}

// A duplicate exec id while the first runs is refused; the first goes on.
func TestDuplicateExecID(t *testing.T) {
	k := startKernel(t, "")
	x := pipeline(argv("sleep", "60"))
	x.Env = []string{"PATH=/usr/bin:/bin"}
	k.send(&wire.Frame{Event: wire.EventRequest, ID: "same", Type: wire.TypeExec, Body: mustJSON(t, x)})
	k.send(&wire.Frame{Event: wire.EventRequest, ID: "same", Type: wire.TypeExec, Body: mustJSON(t, x)})
	f, ok := k.next("same", 10*time.Second)
	if !ok || f.Error == nil || f.Error.Code != "bad_request" {
		t.Fatalf("second exec: %+v", f)
	}
	k.call(wire.TypeSignal, wire.Signal{Target: "same", Signal: "KILL"}, nil)
	if r := k.wait("same"); len(r.statuses) != 1 || r.statuses[0].Signal != "KILL" {
		t.Errorf("first exec: %+v %v", r.statuses, r.err)
	}
}
