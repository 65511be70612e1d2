package orchestrator

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"

	"github.com/paddockhq/paddock/transport/wire"
)

func TestAdmit(t *testing.T) {
	hr := func(id, typ string) wire.Head { return wire.Head{Event: wire.EventHostRequest, ID: id, Type: typ} }
	for _, tc := range []struct {
		name  string
		facts FrameFacts
		want  Admission
	}{
		{"accepted", FrameFacts{Head: hr("1", "fs.read"), Served: true}, Admission{Action: Accept, Remember: true}},
		{"oversize", FrameFacts{Head: hr("1", "fs.read"), Served: true, Oversize: true}, Admission{Action: Refuse, Status: wire.StatusError, Code: CodeTooLarge, Remember: true}},
		{"unserved", FrameFacts{Head: hr("1", "nope")}, Admission{Action: Refuse, Status: wire.StatusError, Code: CodeUnknownType, Remember: true}},
		{"no type", FrameFacts{Head: hr("1", "")}, Admission{Action: Refuse, Status: wire.StatusError, Code: CodeNoType, Remember: true}},
		{"no id", FrameFacts{Head: hr("", "fs.read"), Served: true}, Admission{Action: Refuse, Status: wire.StatusError, Code: CodeNoID}},
		{"used id", FrameFacts{Head: hr("1", "fs.read"), Served: true, Seen: true}, Admission{Action: Refuse, Status: wire.StatusDuplicate, Code: CodeDuplicate}},
		{"used id, oversize", FrameFacts{Head: hr("1", "fs.read"), Seen: true, Oversize: true}, Admission{Action: Refuse, Status: wire.StatusDuplicate, Code: CodeDuplicate}},
		{"stream", FrameFacts{Head: wire.Head{Event: wire.EventStream, ID: "3"}}, Admission{Action: Route}},
		{"oversize stream", FrameFacts{Head: wire.Head{Event: wire.EventStream, ID: "3"}, Oversize: true}, Admission{Action: Drop, Code: CodeTooLarge}},
		{"reply", FrameFacts{Head: wire.Head{Event: wire.EventReply, ID: "3"}}, Admission{Action: Route}},
		{"oversize reply", FrameFacts{Head: wire.Head{Event: wire.EventReply, ID: "3"}, Oversize: true}, Admission{Action: Route}},
		{"other event", FrameFacts{Head: wire.Head{Event: "log"}}, Admission{Action: Drop}},
		{"unreadable head", FrameFacts{HeadErr: &wire.ProtocolFault{Reason: "x"}}, Admission{Action: Fault}},
	} {
		if got := Admit(tc.facts); got != tc.want {
			t.Errorf("%s: Admit = %+v, want %+v", tc.name, got, tc.want)
		}
	}
}

// gateRun runs a gate over input (cut into reads of random sizes) with handlers for "a" and
// "b" that answer with the request's id, and returns the replies, the ids handled and Run's
// error.
func gateRun(t testing.TB, input []byte, max int, rng *rand.Rand) (replies []wire.Frame, handled []string, routed int, err error) {
	var mu sync.Mutex
	h := func(_ context.Context, req HostRequest) (any, error) {
		mu.Lock()
		handled = append(handled, req.ID)
		mu.Unlock()
		return map[string]string{"id": req.ID}, nil
	}
	g := &Gate{
		Handlers: map[string]Handler{"a": h, "b": h},
		Reply: func(f *wire.Frame) error {
			mu.Lock()
			replies = append(replies, *f)
			mu.Unlock()
			return nil
		},
		Route: func(wire.Head, wire.Line) { routed++ },
	}
	var r io.Reader = bytes.NewReader(input)
	if rng != nil {
		r = &choppyReader{r: r, rng: rng}
	}
	err = g.Run(context.Background(), wire.NewReaderSize(r, max))
	return replies, handled, routed, err
}

// choppyReader returns reads of random sizes.
type choppyReader struct {
	r   io.Reader
	rng *rand.Rand
}

func (c *choppyReader) Read(p []byte) (int, error) {
	n := 1 + c.rng.IntN(min(len(p), 9000))
	return c.r.Read(p[:n])
}

// frameSpec is one random frame and what a correct gate does with it.
type frameSpec struct {
	line   []byte
	reply  bool   // a host request: exactly one reply
	accept bool   // reaches a handler
	status string // the reply's status
	id     string
}

// law: proto_one_reply_each, proto_runs_only_accepted, proto_runs_every_accepted, proto_rejects_oversize
func TestGateRandomStreams(t *testing.T) {
	const max = 6000 // a small line limit keeps the streams small; MaxHead (4 KiB) still applies
	for seed := uint64(0); seed < 300; seed++ {
		rng := rand.New(rand.NewPCG(seed, 7))
		var specs []frameSpec
		var input []byte
		remembered := []string{} // the model: the ids the gate should remember, oldest first
		seen := func(id string) bool {
			for _, r := range remembered {
				if r == id {
					return true
				}
			}
			return false
		}
		remember := func(id string) {
			remembered = append(remembered, id)
			if len(remembered) > wire.RememberedIDs {
				remembered = remembered[1:]
			}
		}
		n := 1 + rng.IntN(60)
		for i := 0; i < n; i++ {
			id := fmt.Sprint(rng.IntN(40))
			if rng.IntN(15) == 0 {
				id = ""
			}
			typ := []string{"a", "b", "z", ""}[rng.IntN(4)]
			pad := []int{0, 10, 1000, max - 200, max - 60, max + 1, 3 * max}[rng.IntN(7)]
			var line []byte
			switch rng.IntN(6) {
			case 0:
				line = fmt.Appendf(nil, `{"event":"stream","id":"%s","fd":1,"data":"%s"}`, id, strings.Repeat("x", pad))
				specs = append(specs, frameSpec{line: line})
			case 1:
				line = fmt.Appendf(nil, `{"event":"log","pad":"%s"}`, strings.Repeat("x", pad))
				specs = append(specs, frameSpec{line: line})
			default:
				if typ == "" {
					line = fmt.Appendf(nil, `{"event":"host_request","id":"%s","body":{"pad":"%s"}}`, id, strings.Repeat("x", pad))
				} else {
					line = fmt.Appendf(nil, `{"event":"host_request","id":"%s","type":"%s","body":{"pad":"%s"}}`, id, typ, strings.Repeat("x", pad))
				}
				s := frameSpec{line: line, reply: true, id: id, status: wire.StatusError}
				switch {
				case id == "":
				case seen(id):
					s.status = wire.StatusDuplicate
				default:
					remember(id)
					if len(line) <= max && (typ == "a" || typ == "b") {
						s.accept, s.status = true, wire.StatusOK
					}
				}
				specs = append(specs, s)
			}
			input = append(append(input, line...), '\n')
		}
		replies, handled, _, err := gateRun(t, input, max, rng)
		if err != nil {
			t.Fatalf("seed %d: Run: %v", seed, err)
		}
		var wantReplies []frameSpec
		var wantHandled []string
		for _, s := range specs {
			if s.reply {
				wantReplies = append(wantReplies, s)
			}
			if s.accept {
				wantHandled = append(wantHandled, s.id)
			}
		}
		if len(replies) != len(wantReplies) {
			t.Fatalf("seed %d: %d replies for %d host requests", seed, len(replies), len(wantReplies))
		}
		for i, r := range replies {
			w := wantReplies[i]
			if r.ID != w.id || r.Status != w.status {
				t.Fatalf("seed %d: reply %d = id %q status %q, want id %q status %q", seed, i, r.ID, r.Status, w.id, w.status)
			}
			if w.accept {
				var body map[string]string
				if err := json.Unmarshal(r.Body, &body); err != nil || body["id"] != w.id {
					t.Fatalf("seed %d: reply %d body %s is not the handler's", seed, i, r.Body)
				}
			}
		}
		if fmt.Sprint(handled) != fmt.Sprint(wantHandled) {
			t.Fatalf("seed %d: handled %v, want %v", seed, handled, wantHandled)
		}
	}
}

func TestGateFaults(t *testing.T) {
	good := `{"event":"host_request","id":"1","type":"a"}` + "\n"
	for _, tc := range []struct {
		name, input string
	}{
		{"not utf-8", "{\"event\":\"log\",\"x\":\"\xff\"}\n"},
		{"not json", "hello\n"},
		{"no event", `{"id":"1"}` + "\n"},
		{"not an object", `[1,2]` + "\n"},
		{"oversize without a head", strings.Repeat("z", 7000) + "\n"},
	} {
		replies, handled, _, err := gateRun(t, []byte(good+tc.input+good), 6000, nil)
		var pf *wire.ProtocolFault
		if !errors.As(err, &pf) {
			t.Errorf("%s: err = %v, want a ProtocolFault", tc.name, err)
		}
		// The frame before the fault is answered; nothing after it is read.
		if len(replies) != 1 || len(handled) != 1 {
			t.Errorf("%s: %d replies, %d handled; want 1, 1", tc.name, len(replies), len(handled))
		}
	}
}

// An oversized host request gets its error and the session keeps working.
func TestGateOversizeKeepsWorking(t *testing.T) {
	big := `{"event":"host_request","id":"1","type":"a","body":"` + strings.Repeat("x", 10000) + `"}` + "\n"
	next := `{"event":"host_request","id":"2","type":"a"}` + "\n"
	replies, handled, _, err := gateRun(t, []byte(big+next), 6000, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(replies) != 2 || replies[0].Error == nil || replies[0].Error.Code != CodeTooLarge || replies[1].Status != wire.StatusOK {
		t.Fatalf("replies = %+v", replies)
	}
	if fmt.Sprint(handled) != "[2]" {
		t.Fatalf("handled = %v", handled)
	}
}

func FuzzGate(f *testing.F) {
	f.Add([]byte(`{"event":"host_request","id":"1","type":"a"}` + "\n" + `{"event":"host_request","id":"1","type":"a"}`))
	f.Add([]byte(`{"event":"stream","id":"1","fd":1,"data":"aGk="}` + "\n"))
	f.Add([]byte("{\"event\":\"host_request\",\"id\":\"\xff\"}\n"))
	f.Add([]byte(`{"event":"host_request","type":"b","id":"2","body":[}` + "\n"))
	f.Fuzz(func(t *testing.T, input []byte) {
		replies, handled, _, err := gateRun(t, input, 300, nil)
		// Every handled request has exactly one ok reply with its id, in order.
		j := 0
		for _, r := range replies {
			if r.Status == wire.StatusOK {
				if j >= len(handled) || handled[j] != r.ID {
					t.Fatalf("ok reply %q does not match handled %v", r.ID, handled)
				}
				j++
			}
		}
		if j != len(handled) {
			t.Fatalf("%d handled, %d ok replies", len(handled), j)
		}
		var pf *wire.ProtocolFault
		if err != nil && !errors.As(err, &pf) {
			t.Fatalf("Run: %v", err)
		}
	})
}
