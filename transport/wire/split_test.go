package wire

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"math/rand/v2"
	"strings"
	"testing"
	"testing/iotest"
)

func lines(t testing.TB, r *Reader) []Line {
	var out []Line
	for {
		l, err := r.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, l)
	}
}

func TestReaderLimits(t *testing.T) {
	t.Parallel()
	const max = 5000
	at := strings.Repeat("a", max)
	over := strings.Repeat("b", max+1)
	huge := strings.Repeat("c", 300_000)
	in := "x\n\n" + at + "\n" + over + "\n" + huge + "\nlast"
	for name, r := range map[string]io.Reader{
		"whole":    strings.NewReader(in),
		"one byte": iotest.OneByteReader(strings.NewReader(in)),
		"half":     iotest.HalfReader(strings.NewReader(in)),
	} {
		got := lines(t, NewReaderSize(r, max))
		if len(got) != 6 {
			t.Fatalf("%s: %d lines, want 6", name, len(got))
		}
		want := []struct {
			bytes string
			head  string
			size  int64
			over  bool
		}{
			{"x", "x", 1, false},
			{"", "", 0, false},
			{at, at[:MaxHead], max, false},
			{"", over[:MaxHead], max + 1, true},
			{"", huge[:MaxHead], 300_000, true},
			{"last", "last", 4, false},
		}
		for i, w := range want {
			l := got[i]
			if l.Oversize() != w.over || string(l.Head) != w.head || l.Size != w.size || (!w.over && string(l.Bytes) != w.bytes) {
				t.Errorf("%s: line %d: oversize %v head %d bytes size %d; want %v %d %d", name, i, l.Oversize(), len(l.Head), l.Size, w.over, len(w.head), w.size)
			}
		}
	}
}

// The lines a Reader returns are the caller's: reading on does not change them.
func TestReaderLinesAreOwned(t *testing.T) {
	t.Parallel()
	r := NewReader(strings.NewReader("one\ntwo\n"))
	a, _ := r.Next()
	b, _ := r.Next()
	if string(a.Bytes) != "one" || string(b.Bytes) != "two" {
		t.Fatalf("got %q %q", a.Bytes, b.Bytes)
	}
}

func TestReadHead(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in       string
		complete bool
		want     Head
		fault    bool
	}{
		{`{"event":"stream","id":"7","step":2,"fd":1,"data":"aGk="}`, true, Head{Event: "stream", ID: "7", Step: 2, FD: 1}, false},
		{`{"event":"host_request","id":"k1","type":"fs.read","body":{"path":"/x"}}`, true, Head{Event: "host_request", ID: "k1", Type: "fs.read"}, false},
		{`{"event":"reply","id":"3","status":"ok","body":{"x":"` + strings.Repeat("y", 100), false, Head{Event: "reply", ID: "3", Status: "ok"}, false},
		{`{"event":"host_request","id":"k1","ty`, false, Head{Event: "host_request", ID: "k1"}, false},
		{`{"event":"log","id":"é`[:len(`{"event":"log","id":"é`)-1], false, Head{Event: "log"}, false},
		{`{"id":"1","event":"reply"}`, true, Head{Event: "reply", ID: "1"}, false},
		{`{"data":"x","event":"reply"}`, true, Head{}, true},
		{`{"event":1}`, true, Head{}, true},
		{`{"event":"stream","fd":"1"}`, true, Head{}, true},
		{`[]`, true, Head{}, true},
		{`hello`, true, Head{}, true},
		{"{\"event\":\"x\xff\"}", true, Head{}, true},
		{``, true, Head{}, true},
	} {
		h, err := ReadHead([]byte(tc.in), tc.complete)
		h.Rest = 0
		var pf *ProtocolFault
		if tc.fault != errors.As(err, &pf) || (!tc.fault && h != tc.want) {
			t.Errorf("ReadHead(%.40q) = %+v, %v; want %+v, fault %v", tc.in, h, err, tc.want, tc.fault)
		}
	}
}

func TestFrameRoundTrip(t *testing.T) {
	t.Parallel()
	f := &Frame{Event: EventStream, ID: "9", Step: 1, FD: 2, Data: []byte{0, 1, 0xff, '\n'}}
	b, err := Append(nil, f)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(b, []byte(`{"event":"stream","id":"9"`)) || bytes.Count(b, []byte("\n")) != 1 {
		t.Fatalf("frame line %q: event and id must come first, one newline at the end", b)
	}
	g, err := Decode(bytes.TrimSuffix(b, []byte("\n")))
	if err != nil || g.ID != "9" || g.Step != 1 || g.FD != 2 || !bytes.Equal(g.Data, f.Data) {
		t.Fatalf("Decode = %+v, %v", g, err)
	}
}

// Lines read in any chunking are the same lines.
func TestReaderChunking(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 200; i++ {
		var in []byte
		for j := rng.IntN(20); j >= 0; j-- {
			in = append(in, bytes.Repeat([]byte{'a' + byte(rng.IntN(26))}, rng.IntN(9000))...)
			in = append(in, '\n')
		}
		whole := lines(t, NewReaderSize(bytes.NewReader(in), 7000))
		chopped := lines(t, NewReaderSize(iotest.HalfReader(bytes.NewReader(in)), 7000))
		if len(whole) != len(chopped) {
			t.Fatalf("%d lines vs %d", len(whole), len(chopped))
		}
		for k := range whole {
			if !bytes.Equal(whole[k].Bytes, chopped[k].Bytes) || !bytes.Equal(whole[k].Head, chopped[k].Head) || whole[k].Size != chopped[k].Size {
				t.Fatalf("line %d differs", k)
			}
		}
	}
}

func FuzzReader(f *testing.F) {
	f.Add([]byte("a\nbb\n\nccc"), uint16(2))
	f.Add([]byte(strings.Repeat("x", 10000)+"\ny\n"), uint16(100))
	f.Fuzz(func(t *testing.T, in []byte, max uint16) {
		m := int(max)%8192 + 1
		r := NewReaderSize(bytes.NewReader(in), m)
		var total int64
		n := 0
		for {
			l, err := r.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			n++
			total += l.Size
			if l.Oversize() != (l.Size > int64(m)) {
				t.Fatalf("oversize %v for size %d, limit %d", l.Oversize(), l.Size, m)
			}
			if len(l.Head) > MaxHead || (!l.Oversize() && int64(len(l.Bytes)) != l.Size) {
				t.Fatalf("head %d, bytes %d, size %d", len(l.Head), len(l.Bytes), l.Size)
			}
			if bytes.IndexByte(l.Head, '\n') >= 0 {
				t.Fatal("a newline inside a line")
			}
		}
		// Every byte but the newlines is in some line.
		if want := int64(len(in) - bytes.Count(in, []byte("\n"))); total != want {
			t.Fatalf("sizes add to %d, want %d", total, want)
		}
		_, _ = ReadHead(in[:min(len(in), MaxHead)], false)
	})
}

func TestStreamDataFastAndSlow(t *testing.T) {
	t.Parallel()
	data := []byte("hello\x00\xff world")
	canonical, _ := Append(nil, &Frame{Event: EventStream, ID: "4", Step: 1, FD: 2, Data: data})
	canonical = bytes.TrimSuffix(canonical, []byte("\n"))
	for _, line := range [][]byte{
		canonical,
		[]byte(`{"event":"stream","id":"4","data":"aGVsbG8AwP8gd29ybGQ=","fd":2}`),      // another order
		[]byte(`{"event":"stream","id":"4","fd":2,"data":"aGVsbG8A\u0077P8gd29ybGQ="}`), // an escape
		[]byte(`{"event":"stream","id":"4", "data" : "aGVsbG8AwP8gd29ybGQ=" }`),
	} {
		h, err := ReadHead(line, true)
		if err != nil {
			t.Fatal(err)
		}
		got, err := StreamData(line, h)
		want := data
		if !bytes.Equal(line, canonical) {
			var f Frame
			if err := json.Unmarshal(line, &f); err != nil {
				t.Fatal(err)
			}
			want = f.Data
		}
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s: StreamData = %q, %v; want %q", line, got, err, want)
		}
	}
	// A frame that is not JSON after its head is an error, not data.
	bad := []byte(`{"event":"stream","id":"4","data":"aGk=",}`)
	h, _ := ReadHead(bad, true)
	if _, err := StreamData(bad, h); err == nil {
		t.Error("a broken frame gave data")
	}
}

func TestMember(t *testing.T) {
	t.Parallel()
	line := []byte(`{"event":"host_request","id":"1","type":"fs.read","body":{"path":"/a"}}`)
	h, _ := ReadHead(line, true)
	raw, ok := Member(line, h, "body")
	if !ok || string(raw) != `{"path":"/a"}` {
		t.Fatalf("Member = %s, %v", raw, ok)
	}
	other := []byte(`{"event":"host_request","id":"1","type":"fs.read","x":1,"body":{}}`)
	h, _ = ReadHead(other, true)
	if _, ok := Member(other, h, "body"); ok {
		t.Fatal("Member read past another member")
	}
}

// A line not yet released keeps its bytes, however many lines are read and released after
// it: blocks are recycled only once every line cut from them was released.
func TestReleasedBlocksNeverOverwriteHeldLines(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(5, 6))
	for round := 0; round < 50; round++ {
		var in []byte
		var want []string
		for j := 0; j < 400; j++ {
			l := bytes.Repeat([]byte{'a' + byte(rng.IntN(26))}, rng.IntN(3000))
			want = append(want, string(l))
			in = append(append(in, l...), '\n')
		}
		r := NewReaderSize(iotest.HalfReader(bytes.NewReader(in)), 5000)
		var held []Line
		var heldWant []string
		for k := 0; ; k++ {
			l, err := r.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			if rng.IntN(5) == 0 {
				held, heldWant = append(held, l), append(heldWant, want[k])
			} else {
				l.Release()
			}
		}
		for i, l := range held {
			if string(l.Bytes) != heldWant[i] {
				t.Fatalf("round %d: a held line was overwritten", round)
			}
			l.Release()
		}
	}
}

// A line's Block is the buffer it keeps from reuse: at least the line itself (a short line
// first in a reader: a pooled chunk; a short line after a long one may lie in the long one's
// buffer); none over the limit.
func TestLineBlock(t *testing.T) {
	t.Parallel()
	const limit = 3 << 20
	var in []byte
	sizes := []int{10, 100 << 10, 300 << 10, 1 << 20, limit - 1, 20, limit + 5, 20}
	for _, n := range sizes {
		in = append(append(in, bytes.Repeat([]byte{'x'}, n)...), '\n')
	}
	r := NewReaderSize(iotest.HalfReader(bytes.NewReader(in)), limit)
	for i, l := range lines(t, r) {
		n := sizes[i]
		switch {
		case n > limit:
			if l.Block() != 0 {
				t.Errorf("line %d of %d over the limit: block %d", i, n, l.Block())
			}
		case i == 0 && l.Block() != chunk, l.Block() < n:
			t.Errorf("line %d of %d: block %d", i, n, l.Block())
		}
	}
}

// A judge's Beside stays within its bounds whatever the shell sends: an entry over them
// becomes empty (a command whose words are not known, which the host takes for one that
// may do anything), and past MaxBeside one empty entry stands for the rest.
func TestBoundBeside(t *testing.T) {
	t.Parallel()
	long := make([]string, MaxBesideWords+1)
	big := []string{"mv", strings.Repeat("x", MaxBesideBytes)}
	many := make([][]string, MaxBeside+5)
	for i := range many {
		many[i] = []string{"cat", "k"}
	}
	for _, tc := range []struct {
		in   [][]string
		want int // entries
		nils int // empty entries
	}{
		{nil, 0, 0},
		{[][]string{{"mv", "a", "b"}}, 1, 0},
		{[][]string{{"mv", "a", "b"}, long, big}, 3, 2},
		{many, MaxBeside, 1},
		{many[:MaxBeside], MaxBeside, 0},
	} {
		got := BoundBeside(tc.in)
		nils := 0
		for _, argv := range got {
			if argv == nil {
				nils++
			}
		}
		if len(got) != tc.want || nils != tc.nils {
			t.Errorf("%d entries in: %d out, %d empty; want %d, %d", len(tc.in), len(got), nils, tc.want, tc.nils)
		}
	}
}
