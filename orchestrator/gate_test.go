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
	"time"

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
		{"not utf-8", FrameFacts{Head: hr("1", "fs.read"), Served: true, NotUTF8: true}, Admission{Action: Refuse, Status: wire.StatusError, Code: CodeNotUTF8, Remember: true}},
		{"not utf-8, used id", FrameFacts{Head: hr("1", "fs.read"), Served: true, NotUTF8: true, Seen: true}, Admission{Action: Refuse, Status: wire.StatusDuplicate, Code: CodeDuplicate}},
		{"not utf-8 stream", FrameFacts{Head: wire.Head{Event: wire.EventStream, ID: "3"}, NotUTF8: true}, Admission{Action: Fault}},
		{"not utf-8 reply", FrameFacts{Head: wire.Head{Event: wire.EventReply, ID: "3"}, NotUTF8: true}, Admission{Action: Fault}},
		{"busy", FrameFacts{Head: hr("1", "fs.read"), Served: true, Busy: true}, Admission{Action: Refuse, Status: wire.StatusError, Code: CodeBusy, Remember: true}},
		{"busy, unserved", FrameFacts{Head: hr("1", "nope"), Busy: true}, Admission{Action: Refuse, Status: wire.StatusError, Code: CodeUnknownType, Remember: true}},
		{"busy, used id", FrameFacts{Head: hr("1", "fs.read"), Served: true, Busy: true, Seen: true}, Admission{Action: Refuse, Status: wire.StatusDuplicate, Code: CodeDuplicate}},
		{"busy stream", FrameFacts{Head: wire.Head{Event: wire.EventStream, ID: "3"}, Busy: true}, Admission{Action: Route}},
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

// gateRun runs a gate over input (cut into reads of random sizes, when rng is set) with
// handlers for "a" and "b" that answer with the request's id and type, and returns the
// replies (in the order written), the ids handled and Run's error. A handler for "b" first
// calls wait, when set.
func gateRun(t testing.TB, input []byte, max int, rng *rand.Rand, wait func()) (replies []wire.Frame, handled []string, routed int, err error) {
	return gateRunCounting(t, input, max, rng, wait, nil)
}

// replyKey is what a reply must match: its request's id and the status decided for it.
type replyKey struct{ id, status string }

// sameMultiset reports whether a and b hold the same elements, each as often, in any order.
func sameMultiset[T comparable](a, b []T) bool {
	if len(a) != len(b) {
		return false
	}
	n := make(map[T]int)
	for _, x := range a {
		n[x]++
	}
	for _, x := range b {
		if n[x]--; n[x] < 0 {
			return false
		}
	}
	return true
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
	typ    string // accepted: its type
}

// Random streams of frames: every host request gets exactly one reply with its id and the
// status decided for it, in any order; only accepted requests run, each once. Decisions are
// made in arrival order (which of two requests with one id is the duplicate). Handlers of
// "b" wait until every other reply was written: a request that waits holds back none.
//
// law: proto_one_reply_each, proto_runs_only_accepted, proto_runs_every_accepted, proto_rejects_oversize, request_not_held_back
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
		n := 1 + rng.IntN(60) // under DefaultMaxInFlight: no request is refused busy
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
						s.accept, s.status, s.typ = true, wire.StatusOK, typ
					}
				}
				specs = append(specs, s)
			}
			input = append(append(input, line...), '\n')
		}
		var wantReplies []replyKey
		var wantHandled []string
		others := 0 // replies not to an accepted "b"
		for _, s := range specs {
			if s.reply {
				wantReplies = append(wantReplies, replyKey{s.id, s.status})
				if s.typ != "b" {
					others++
				}
			}
			if s.accept {
				wantHandled = append(wantHandled, s.id)
			}
		}
		// "b" waits for the others' replies; held back behind it, they never come, and the
		// guard lets it go with a failure.
		var mu sync.Mutex
		cond := sync.NewCond(&mu)
		written, heldBack := 0, false
		wait := func() {
			timer := time.AfterFunc(guard, func() {
				mu.Lock()
				heldBack = true
				cond.Broadcast()
				mu.Unlock()
			})
			defer timer.Stop()
			mu.Lock()
			for written < others && !heldBack {
				cond.Wait()
			}
			mu.Unlock()
		}
		count := func(f wire.Frame) {
			var body map[string]string
			if f.Status == wire.StatusOK && json.Unmarshal(f.Body, &body) == nil && body["type"] == "b" {
				return
			}
			mu.Lock()
			written++
			cond.Broadcast()
			mu.Unlock()
		}
		replies, handled, _, err := gateRunCounting(t, input, max, rng, wait, count)
		if err != nil {
			t.Fatalf("seed %d: Run: %v", seed, err)
		}
		if heldBack {
			t.Fatalf("seed %d: a waiting \"b\" held back the other replies", seed)
		}
		var got []replyKey
		for _, r := range replies {
			got = append(got, replyKey{r.ID, r.Status})
			if r.Status == wire.StatusOK {
				var body map[string]string
				if err := json.Unmarshal(r.Body, &body); err != nil || body["id"] != r.ID {
					t.Fatalf("seed %d: ok reply %q body %s is not its handler's", seed, r.ID, r.Body)
				}
			}
		}
		if !sameMultiset(got, wantReplies) {
			t.Fatalf("seed %d: replies %v, want %v in any order", seed, got, wantReplies)
		}
		if !sameMultiset(handled, wantHandled) {
			t.Fatalf("seed %d: handled %v, want %v in any order", seed, handled, wantHandled)
		}
	}
}

// gateRunCounting is gateRun with count told of each reply as it is written.
func gateRunCounting(t testing.TB, input []byte, max int, rng *rand.Rand, wait func(), count func(wire.Frame)) ([]wire.Frame, []string, int, error) {
	var mu sync.Mutex
	var replies []wire.Frame
	var handled []string
	h := func(_ context.Context, req HostRequest) (any, error) {
		if req.Type == "b" && wait != nil {
			wait()
		}
		mu.Lock()
		handled = append(handled, req.ID)
		mu.Unlock()
		return map[string]string{"id": req.ID, "type": req.Type}, nil
	}
	routed := 0
	g := &Gate{
		Handlers: map[string]Handler{"a": h, "b": h},
		Reply: func(f *wire.Frame) error {
			mu.Lock()
			replies = append(replies, *f)
			mu.Unlock()
			if count != nil {
				count(*f)
			}
			return nil
		},
		Route: func(wire.Head, wire.Line) { routed++ },
	}
	var r io.Reader = bytes.NewReader(input)
	if rng != nil {
		r = &choppyReader{r: r, rng: rng}
	}
	err := g.Run(context.Background(), wire.NewReaderSize(r, max))
	return replies, handled, routed, err
}

func TestGateFaults(t *testing.T) {
	good := `{"event":"host_request","id":"1","type":"a"}` + "\n"
	for _, tc := range []struct {
		name, input string
	}{
		{"not utf-8", "{\"event\":\"log\",\"x\":\"\xff\"}\n"},
		{"stream not utf-8", "{\"event\":\"stream\",\"id\":\"3\",\"fd\":1,\"data\":\"\xff\"}\n"},
		{"host request with an id not utf-8", "{\"event\":\"host_request\",\"id\":\"2\xff\",\"type\":\"a\"}\n"},
		{"host request not utf-8 right after its head", "{\"event\":\"host_request\",\"id\":\"2\",\"type\":\"a\"\xff}\n"},
		{"not json", "hello\n"},
		{"no event", `{"id":"1"}` + "\n"},
		{"not an object", `[1,2]` + "\n"},
		{"oversize without a head", strings.Repeat("z", 7000) + "\n"},
	} {
		replies, handled, _, err := gateRun(t, []byte(good+tc.input+good), 6000, nil, nil)
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
	replies, handled, _, err := gateRun(t, []byte(big+next), 6000, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range replies {
		code := r.Status
		if r.Error != nil {
			code = r.Error.Code
		}
		got = append(got, r.ID+":"+code)
	}
	if !sameMultiset(got, []string{"1:" + CodeTooLarge, "2:ok"}) {
		t.Fatalf("replies = %v", got)
	}
	if fmt.Sprint(handled) != "[2]" {
		t.Fatalf("handled = %v", handled)
	}
}

const cutHead = `{"event":"host_request","id":"1","type":"a","body":"`

// A host request that is not UTF-8 past its head is a sandbox program's bad request: it gets
// its one refusal and the session keeps working. So does a request whose valid multi-byte
// character straddles the end of the head the gate reads.
//
// law: proto_one_reply_each
func TestGateNotUTF8Refused(t *testing.T) {
	cases := []struct{ name, line, code string }{
		{"body", "{\"event\":\"host_request\",\"id\":\"1\",\"type\":\"a\",\"body\":{\"say\":\"\xff\"}}", CodeNotUTF8},
		{"type after a bad member", "{\"event\":\"host_request\",\"id\":\"1\",\"x\":\"\xc3\",\"type\":\"a\"}", CodeNotUTF8},
		{"past the head", `{"event":"host_request","id":"1","type":"a","body":"` + strings.Repeat("x", wire.MaxHead) + "\xff\"}", CodeNotUTF8},
		// é's first byte is the head's last.
		{"cut character", cutHead + strings.Repeat("x", wire.MaxHead-1-len(cutHead)) + `é"}`, ""},
	}
	// Around the end of the head, where the reader's check ends and the worker's begins: a
	// character of every width at every offset is taken, a bad byte refused.
	for at := wire.MaxHead - 9; at <= wire.MaxHead+3; at++ {
		pad := strings.Repeat("x", at-len(cutHead))
		for _, c := range []string{"é", "€", "😀"} {
			cases = append(cases, struct{ name, line, code string }{fmt.Sprintf("%q at %d", c, at), cutHead + pad + c + `"}`, ""})
		}
		for _, bad := range []string{"\xff", "\xe2\x82", "\x80"} {
			cases = append(cases, struct{ name, line, code string }{fmt.Sprintf("%q at %d", bad, at), cutHead + pad + bad + `"}`, CodeNotUTF8})
		}
	}
	for _, tc := range cases {
		next := `{"event":"host_request","id":"2","type":"a"}`
		replies, handled, _, err := gateRun(t, []byte(tc.line+"\n"+next+"\n"), 6000, nil, nil)
		if err != nil {
			t.Fatalf("%s: Run: %v", tc.name, err)
		}
		var codes []string
		for _, r := range replies {
			code := r.Status
			if r.Error != nil {
				code = r.Error.Code
			}
			codes = append(codes, r.ID+":"+code)
		}
		want := []string{"1:" + tc.code, "2:ok"}
		if tc.code == "" {
			want[0] = "1:ok"
		}
		if !sameMultiset(codes, want) {
			t.Errorf("%s: replies %v, want %v", tc.name, codes, want)
		}
		wantHandled := []string{"2"}
		if tc.code == "" {
			wantHandled = []string{"1", "2"}
		}
		if !sameMultiset(handled, wantHandled) {
			t.Errorf("%s: handled %v, want %v", tc.name, handled, wantHandled)
		}
	}
}

func FuzzGate(f *testing.F) {
	f.Add([]byte(`{"event":"host_request","id":"1","type":"a"}` + "\n" + `{"event":"host_request","id":"1","type":"a"}`))
	f.Add([]byte(`{"event":"stream","id":"1","fd":1,"data":"aGk="}` + "\n"))
	f.Add([]byte("{\"event\":\"host_request\",\"id\":\"\xff\"}\n"))
	f.Add([]byte(`{"event":"host_request","type":"b","id":"2","body":[}` + "\n"))
	f.Add([]byte("{\"event\":\"host_request\",\"id\":\"3\",\"type\":\"a\",\"body\":{\"say\":\"\xff\xfe\"}}\n{\"event\":\"host_request\",\"id\":\"4\",\"type\":\"b\"}\n"))
	f.Add([]byte("{\"event\":\"host_request\",\"id\":\"5\",\"type\":\"a\"\xff,\"body\":1}\n"))
	f.Fuzz(func(t *testing.T, input []byte) {
		replies, handled, _, err := gateRun(t, input, 300, nil, nil)
		// Every handled request has exactly one ok reply with its id, in any order, and its
		// body is its handler's.
		var okIDs []string
		for _, r := range replies {
			if r.Status == wire.StatusOK {
				okIDs = append(okIDs, r.ID)
				var body map[string]string
				if json.Unmarshal(r.Body, &body) != nil || body["id"] != r.ID {
					t.Fatalf("ok reply %q with body %s", r.ID, r.Body)
				}
			}
		}
		if !sameMultiset(okIDs, handled) {
			t.Fatalf("ok replies %v, handled %v", okIDs, handled)
		}
		var pf *wire.ProtocolFault
		if err != nil && !errors.As(err, &pf) {
			t.Fatalf("Run: %v", err)
		}
	})
}
