package transport

import (
	"encoding/json"
	"testing"

	"github.com/paddockhq/paddock/transport/wire"
)

// A kernel's resume frame is read as the sandbox wrote it: anything but a well-formed one is
// a protocol fault, and one that is accepted keeps its promises (no more replayed frames
// than were numbered, exec ids present and distinct, skipped counts not negative).
func FuzzParseResume(f *testing.F) {
	f.Add([]byte(`{"event":"resume","body":{"last":10,"replay":3,"execs":[{"id":"r1-4","running":true,"skipped":12}]}}`))
	f.Add([]byte(`{"event":"resume","body":{"last":0,"replay":0}}`))
	f.Add([]byte(`{"event":"resume","body":{"last":1,"replay":2}}`))
	f.Add([]byte(`{"event":"resume","body":{"last":5,"replay":1,"execs":[{"id":"a"},{"id":"a"}]}}`))
	f.Add([]byte(`{"event":"reply","id":"1","status":"ok"}`))
	f.Add([]byte(`{"event":"resume","body":[]}`))
	f.Fuzz(func(t *testing.T, line []byte) {
		res, err := ParseResume(line)
		if err != nil {
			if _, ok := err.(*wire.ProtocolFault); !ok {
				t.Fatalf("%q: %T %v, not a protocol fault", line, err, err)
			}
			return
		}
		if res.Replay < 0 || uint64(res.Replay) > res.Last {
			t.Fatalf("%q: accepted %+v", line, res)
		}
		seen := map[string]bool{}
		for _, x := range res.Execs {
			if x.ID == "" || seen[x.ID] || x.Skipped < 0 {
				t.Fatalf("%q: accepted %+v", line, res)
			}
			seen[x.ID] = true
		}
		var f wire.Frame
		if json.Unmarshal(line, &f) != nil || f.Event != wire.EventResume {
			t.Fatalf("%q: accepted, but it is no resume frame", line)
		}
	})
}
