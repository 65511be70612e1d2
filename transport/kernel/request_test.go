//go:build linux

package kernel

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"

	"github.com/paddockhq/paddock/transport/wire"
)

func line(s string) wire.Line {
	b := []byte(s)
	return wire.Line{Bytes: b, Head: b[:min(len(b), wire.MaxHead)], Size: int64(len(b))}
}

func TestDecide(t *testing.T) {
	cases := []struct {
		line    string
		verdict verdict
		id      string
		code    string
	}{
		{`{"event":"request","id":"1","type":"ping"}`, serve, "1", ""},
		{`{"type":"stat","id":"1","event":"request","body":{"path":"/"}}`, serve, "1", ""},
		{`{"body":{},"event":"request","id":"late"}`, refuse, "late", CodeUnknownType},
		{`{"event":"request","id":"2","type":"format-disk"}`, refuse, "2", CodeUnknownType},
		{`{"event":"request","id":"3"}`, refuse, "3", CodeUnknownType},
		{`{"event":"stream","id":"4","data":"AA=="}`, refuse, "4", CodeBadRequest},
		{`{"event":"request","id":"5","type":"ping",`, refuse, "5", CodeBadRequest},
		{`{"id":"6"}`, refuse, "6", CodeBadRequest},
		{`{"event":7,"id":"7"}`, refuse, "7", CodeBadRequest},
		{`{"event":"request","id":"8","type":"ping","body":[1,2}`, refuse, "8", CodeBadRequest},
		{`{"event":"reply","id":"h1","status":"ok"}`, answer, "h1", ""},
		{`{"event":"reply","id":"h1",`, ignore, "", ""},
		{`{"event":"reply"}`, ignore, "", ""},
		{`{"event":"request","type":"ping"}`, ignore, "", ""},
		{`{"event":"request","id":9,"type":"ping"}`, ignore, "", ""},
		{`not json`, ignore, "", ""},
		{`[]`, ignore, "", ""},
		{``, ignore, "", ""},
	}
	for _, c := range cases {
		d := decide(line(c.line))
		if d.verdict != c.verdict {
			t.Errorf("%s: verdict %d, want %d (%+v)", c.line, d.verdict, c.verdict, d)
			continue
		}
		switch d.verdict {
		case refuse:
			if d.id != c.id || d.err.Code != c.code {
				t.Errorf("%s: refused %s with %s, want %s %s", c.line, d.id, d.err.Code, c.id, c.code)
			}
		case serve, answer:
			if d.frame.ID != c.id {
				t.Errorf("%s: id %q", c.line, d.frame.ID)
			}
		}
	}
	// An over-long line is refused when its head names an id.
	over := wire.Line{Head: []byte(`{"event":"request","id":"big","type":"exec","body":"AAAA`), Size: wire.MaxLine + 1}
	if d := decide(over); d.verdict != refuse || d.id != "big" || d.err.Code != CodeBadRequest {
		t.Errorf("oversize: %+v", d)
	}
	over.Head = []byte(`{"event":"request","type":"exec","body":"AAAA`)
	if d := decide(over); d.verdict != ignore {
		t.Errorf("oversize without id: %+v", d)
	}
}

func TestParseStat(t *testing.T) {
	for in, want := range map[string]proc{
		"12 (sleep) S 1 12 12 0 -1": {ppid: 1, pgid: 12},
		"13 (a) b) (c) Z 12 7 7 0":  {ppid: 12, pgid: 7, zombie: true},
		"14 (with space) R 3 14 14": {ppid: 3, pgid: 14},
		"15 (x) X 3 9":              {ppid: 3, pgid: 9, zombie: true},
		"16 (truncated":             {},
		"17 (short) S":              {},
		"18 (nan) S x y":            {},
	} {
		got, ok := parseStat([]byte(in))
		if ok != (want != proc{}) || got != want {
			t.Errorf("%q: %+v %v, want %+v", in, got, ok, want)
		}
	}
}

func TestMergeEnv(t *testing.T) {
	got := mergeEnv([]string{"A=1", "B=2", "A=3"}, []string{"C=4", "B=5"}, nil, []string{"D=="})
	want := []string{"A=3", "B=5", "C=4", "D=="}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("merge %q, want %q", got, want)
	}
	if v, ok := lookupEnv(got, "D"); !ok || v != "=" {
		t.Errorf("lookup D: %q %v", v, ok)
	}
	if _, ok := lookupEnv(got, "E"); ok {
		t.Error("lookup E found")
	}
}

func TestExitStatus(t *testing.T) {
	// Linux wait status: exit code in bits 8-15, or the signal in the low 7 bits.
	cases := map[syscall.WaitStatus]wire.ExitStatus{
		0:                                   {Code: 0},
		3 << 8:                              {Code: 3},
		syscall.WaitStatus(syscall.SIGTERM): {Code: 143, Signal: "TERM"},
		syscall.WaitStatus(syscall.SIGPIPE): {Code: 141, Signal: "PIPE"},
		syscall.WaitStatus(syscall.SIGKILL) | 0x80: {Code: 137, Signal: "KILL"}, // core dumped
	}
	for ws, want := range cases {
		if got := exitStatus(ws); got != want {
			t.Errorf("%#x: %+v, want %+v", int(ws), got, want)
		}
	}
	for name, want := range map[string]syscall.Signal{"TERM": syscall.SIGTERM, "sigkill": syscall.SIGKILL, "SIGHUP": syscall.SIGHUP} {
		if got, ok := parseSignal(name); !ok || got != want {
			t.Errorf("parseSignal(%q) = %v %v", name, got, ok)
		}
	}
	for _, name := range []string{"USR1", "", "SIG", "STOP"} {
		if _, ok := parseSignal(name); ok {
			t.Errorf("parseSignal(%q) accepted", name)
		}
	}
}

func TestLookPath(t *testing.T) {
	dir := t.TempDir()
	mk := func(rel string, mode os.FileMode) {
		p := filepath.Join(dir, rel)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte("#!/bin/sh\n"), mode); err != nil {
			t.Fatal(err)
		}
		os.Chmod(p, mode)
	}
	mk("a/tool", 0o644) // found first, not executable
	mk("b/tool", 0o755)
	mk("a/only", 0o644)
	os.MkdirAll(filepath.Join(dir, "a/dir"), 0o755)
	mk("c/dir", 0o755) // a directory of that name is passed over
	mk("rel/x", 0o755)
	path := filepath.Join(dir, "a") + ":" + filepath.Join(dir, "b") + ":" + filepath.Join(dir, "c")
	cases := []struct {
		name, path string
		found      string
		code       int
	}{
		{name: "tool", path: path, found: "b/tool"},
		{name: "only", path: path, code: 126},
		{name: "dir", path: path, found: "c/dir"},
		{name: "none", path: path, code: 127},
		{name: "x", path: "rel", found: "rel/x"}, // a relative PATH entry is from cwd
		{name: "x", path: ":" + filepath.Join(dir, "b"), code: 127},
		{name: "./rel/x", path: "", found: "rel/x"},
		{name: "rel/missing", path: "", code: 127},
		{name: "./a/only", path: "", code: 126},
		{name: "./a/dir", path: "", code: 126},
	}
	for _, c := range cases {
		got, ns := lookPath(c.name, c.path, dir, true)
		switch {
		case c.found != "" && (ns != nil || got != filepath.Join(dir, c.found)):
			t.Errorf("%s on %q: %q %v, want %s", c.name, c.path, got, ns, c.found)
		case c.found == "" && (ns == nil || ns.code != c.code):
			t.Errorf("%s on %q: %q %v, want code %d", c.name, c.path, got, ns, c.code)
		}
	}
	if got, ns := lookPath("sh", "", dir, false); ns != nil || !strings.HasSuffix(got, "/sh") {
		t.Errorf("no PATH: the default path: %q %v", got, ns)
	}
}

// fuzzServer is a kernel server that reads lines but runs no process: its exec stub
// replies with no statuses. Everything else is the real reader and dispatcher.
func fuzzServer(out io.Writer) *server {
	var s *server
	s = newServer(Options{Version: "test", Log: slog.New(slog.NewTextHandler(io.Discard, nil))},
		newOutput(out, func(error) { s.shutdown() }))
	s.execute = func(*execution) (*wire.ExecResult, error) { return &wire.ExecResult{}, nil }
	return s
}

// expectReply is the oracle: a line that is a JSON object whose top-level "id" is a
// non-empty string and whose "event" is not "reply" gets exactly one reply with that id.
func expectReply(b []byte) (string, bool) {
	var m map[string]any
	if json.Unmarshal(b, &m) != nil {
		return "", false
	}
	id, _ := m["id"].(string)
	event, _ := m["event"].(string)
	return id, id != "" && event != wire.EventReply
}

// Random input never panics the reader; every line with a readable id that is not a reply
// gets exactly one reply; every line written is a frame.
func FuzzRequestLine(f *testing.F) {
	for _, s := range []string{
		`{"event":"request","id":"1","type":"ping"}`,
		`{"event":"request","id":"2","type":"exec","body":{"commands":[{"argv":["true"]}]}}`,
		`{"event":"request","id":"3","type":"exec","body":{"commands":[]}}`,
		`{"event":"request","id":"4","type":"signal","body":{"target":"2","signal":"TERM"}}`,
		`{"event":"request","id":"5","type":"stat","body":{"path":"/"}}`,
		`{"event":"request","id":"6","type":"readdir","body":{"path":"/nonexistent"}}`,
		`{"event":"request","id":"7","type":"realpath","body":{"path":"."}}`,
		`{"event":"request","id":"8","type":"shutdown"}` + "\n" + `{"event":"request","id":"9","type":"ping"}`,
		`{"event":"reply","id":"h1","status":"ok"}`,
		`{"event":"request","id":"a","type":"nope"}` + "\n" + `{"id":"b",`,
		`{"event":"request","id":"x","type":"ping","body":"` + strings.Repeat("A", 100) + `"}`,
		"\xff\xfe{\"id\":\"u\"}",
		`{"event":"ack","body":{"seq":3,"done":["2"]}}` + "\n" + `{"event":"ack","id":"k","body":{"seq":1}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var out bytes.Buffer
		s := fuzzServer(&out)
		// A small line limit, so over-long lines are exercised too.
		s.serveLines(wire.NewReaderSize(bytes.NewReader(data), 64))
		s.handlers.Wait()

		want := make(map[string]int)
		loose := 0 // lines that may get a reply the oracle cannot name
		lines := wire.NewReaderSize(bytes.NewReader(data), 64)
		for {
			l, err := lines.Next()
			if err != nil {
				break
			}
			if l.Oversize() {
				loose++
				continue
			}
			if id, ok := expectReply(l.Bytes); ok {
				want[id]++
			} else if !json.Valid(l.Bytes) {
				loose++
			}
		}
		got := make(map[string]int)
		replies := wire.NewReader(&out)
		for {
			l, err := replies.Next()
			if err != nil {
				break
			}
			fr, err := wire.Decode(l.Bytes)
			if err != nil {
				t.Fatalf("kernel wrote a line that is not a frame: %q", l.Bytes)
			}
			if fr.Event != wire.EventReply {
				t.Fatalf("kernel wrote a %s frame", fr.Event)
			}
			got[fr.ID]++
		}
		extra := 0
		for id, n := range got {
			if n < want[id] {
				t.Errorf("id %q: %d replies, want %d", id, n, want[id])
			}
			extra += n - want[id]
		}
		for id, n := range want {
			if got[id] < n {
				t.Errorf("id %q: %d replies, want %d", id, got[id], n)
			}
		}
		if extra > loose {
			t.Errorf("%d replies beyond the expected, for %d unreadable lines", extra, loose)
		}
	})
}
