package output

import (
	"bytes"
	"io"
	"runtime"
	"strings"
	"sync"
	"testing"
)

// bigOutput makes output over the default bound: random lines, some long, until n bytes.
func bigOutput(t testing.TB, n int) string {
	r := newRand(t)
	var b strings.Builder
	for b.Len() < n {
		b.WriteString(randText(r, 200))
		b.WriteString("\n")
	}
	return b.String()
}

// law: job_output_bounded
func TestJobOutputBounded(t *testing.T) {
	t.Parallel()
	r := newRand(t)
	for range 40 {
		text := bigOutput(t, DefaultBytes+r.IntN(4*DefaultBytes))
		for _, mode := range []Mode{Tail, Head} {
			lim := Default()
			lim.Mode = mode
			w := NewWindow(lim)
			for _, c := range randChunks(r, text) {
				w.Write([]byte(c))
			}
			got := w.Text()
			if len(got) > DefaultBytes || segments(got) > DefaultLines {
				t.Fatalf("%v kept %d bytes, %d lines; cap %d, %d", mode, len(got), segments(got), DefaultBytes, DefaultLines)
			}
			if db, _ := w.Dropped(); db == 0 {
				t.Fatalf("%d bytes over a %d-byte cap, nothing dropped", len(text), DefaultBytes)
			}
		}
	}
}

// law: job_no_silent_loss
func TestJobNoSilentLoss(t *testing.T) {
	t.Parallel()
	r := newRand(t)
	for range 40 {
		text := bigOutput(t, r.IntN(3*DefaultBytes))
		for _, lim := range []Limit{Default(), {Bytes: DefaultBytes, Lines: DefaultLines, Mode: Head}, randLimit(r)} {
			w := NewWindow(lim)
			var written int64
			for _, c := range randChunks(r, text) {
				w.Write([]byte(c))
				written += int64(len(c))
				db, _ := w.Dropped()
				if kept := int64(len(w.Text())); kept+db != written {
					t.Fatalf("%+v: kept %d + dropped %d != written %d", lim, kept, db, written)
				}
			}
		}
	}
}

// law: job_optout_keeps_all
func TestJobOptoutKeepsAll(t *testing.T) {
	t.Parallel()
	r := newRand(t)
	for range 40 {
		text := bigOutput(t, r.IntN(3*DefaultBytes))
		var zero Window // the zero Window is the opt-out too
		for _, w := range []*Window{NewWindow(Limit{}), NewWindow(Limit{Mode: Head}), &zero} {
			for _, c := range randChunks(r, text) {
				w.Write([]byte(c))
			}
			db, dl := w.Dropped()
			if w.Text() != text || db != 0 || dl != 0 || w.Notice() != "" {
				t.Fatalf("opt-out dropped %d bytes, %d lines", db, dl)
			}
		}
	}
}

// law: job_cap_drops_only_excess
func TestJobCapDropsOnlyExcess(t *testing.T) {
	t.Parallel()
	r := newRand(t)
	for range 200 {
		text := randText(r, 2000)
		for _, mode := range []Mode{Tail, Head} {
			lim := Default()
			lim.Mode = mode
			w := NewWindow(lim)
			for _, c := range randChunks(r, text) {
				w.Write([]byte(c))
			}
			db, dl := w.Dropped()
			fits := len(text) <= DefaultBytes && segments(text) <= DefaultLines
			if fits && (db != 0 || dl != 0 || w.Text() != text) {
				t.Fatalf("output that fits: dropped %d bytes %d lines", db, dl)
			}
			// Over the cap, only the excess goes: the window is as large as whole lines allow.
			want, _, _ := refBound(text, lim)
			if w.Text() != want {
				t.Fatalf("window %d bytes, the cap allows %d", len(w.Text()), len(want))
			}
		}
	}
}

// law: job_output_bounded
// 100 MB through a window costs the memory of the cap only and counts every byte.
func TestWindowHundredMegabytes(t *testing.T) {
	// Not parallel: it measures what writing allocates, which other tests would add to.
	if testing.Short() {
		t.Skip("writes 100 MB")
	}
	chunk := bytes.Repeat([]byte("0123456789abcdef€ paddock output line\n"), 1000)[:32<<10]
	const total = 100 << 20
	perChunk := int64(bytes.Count(chunk, newline))
	for _, mode := range []Mode{Tail, Head} {
		lim := Default()
		lim.Mode = mode
		w := NewWindow(lim)
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		n := 0
		for n < total {
			w.Write(chunk)
			n += len(chunk)
		}
		runtime.ReadMemStats(&after)
		if grew := after.TotalAlloc - before.TotalAlloc; grew > 5*DefaultBytes {
			t.Errorf("%v: writing 100 MB allocated %d bytes; cap %d", mode, grew, DefaultBytes)
		}
		if cap(w.buf) > 2*DefaultBytes {
			t.Errorf("%v: store capacity %d", mode, cap(w.buf))
		}
		tb, tl := w.Total()
		if tb != total || tl != perChunk*int64(total/len(chunk))+boolInt(chunk[len(chunk)-1] != '\n') {
			t.Errorf("%v: counted %d bytes, %d lines", mode, tb, tl)
		}
		db, _ := w.Dropped()
		if int64(len(w.Text()))+db != total {
			t.Errorf("%v: kept %d + dropped %d != %d", mode, len(w.Text()), db, total)
		}
	}
}

func boolInt(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

// A window is written from one goroutine and read from another meanwhile (run with -race).
func TestWindowConcurrentRead(t *testing.T) {
	t.Parallel()
	w := NewWindow(Limit{Bytes: 1000, Lines: 10})
	text := bigOutput(t, 200_000)
	var wg sync.WaitGroup
	done := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer close(done)
		for i := 0; i < len(text); i += 97 {
			w.Write([]byte(text[i:min(i+97, len(text))]))
		}
	}()
	var last int64
	for reading := true; reading; {
		select {
		case <-done:
			reading = false
		default:
		}
		_, _, _ = w.Text(), w.Notice(), w.Limit()
		w.Dropped()
		w.Total()
		s := w.Snapshot()
		if s.TotalBytes < last || len(s.Text) > 1000 || int64(len(s.Text))+s.DroppedBytes != s.TotalBytes ||
			int64(segments(s.Text))+s.DroppedLines != s.TotalLines {
			t.Fatalf("read mid-write: %+v (total was %d)", s, last)
		}
		last = s.TotalBytes
	}
	wg.Wait()
	want, _, _ := refBound(text, w.Limit())
	if w.Text() != want {
		t.Fatal("window after concurrent reads differs from the reference")
	}
}

func TestLimitValidate(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		lim Limit
		ok  bool
	}{
		{Default(), true},
		{Limit{}, true},
		{Limit{Bytes: -1}, false},
		{Limit{Lines: -1}, false},
		{Limit{Mode: 7}, false},
	} {
		if err := c.lim.Validate(); (err == nil) != c.ok {
			t.Errorf("%+v: Validate() = %v", c.lim, err)
		}
	}
	var m Mode
	for _, s := range []string{"head", "tail"} {
		if err := m.UnmarshalText([]byte(s)); err != nil || m.String() != s {
			t.Errorf("UnmarshalText(%q) = %v, %v", s, m, err)
		}
	}
	if err := m.UnmarshalText([]byte("middle")); err == nil {
		t.Error("UnmarshalText(middle) accepted")
	}
}

// onlyReader hides bytes.Reader's WriterTo so io.Copy moves 32 KiB at a time, as from a pipe.
type onlyReader struct{ r io.Reader }

func (o onlyReader) Read(p []byte) (int, error) { return o.r.Read(p) }

// BenchmarkTail100MB writes 100 MB through a default tail window, against io.Copy to
// io.Discard: the cost of keeping a bounded window over throwing output away.
func BenchmarkTail100MB(b *testing.B) {
	src := bytes.Repeat([]byte("0123456789abcdef€ paddock benchmark output line\n"), (100<<20)/50+1)[:100<<20]
	for _, peer := range []struct {
		name string
		dst  func() io.Writer
	}{
		{"window", func() io.Writer { return NewWindow(Default()) }},
		{"discard", func() io.Writer { return io.Discard }},
	} {
		b.Run(peer.name, func(b *testing.B) {
			b.SetBytes(int64(len(src)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := io.Copy(peer.dst(), onlyReader{bytes.NewReader(src)}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func TestWhole(t *testing.T) {
	t.Parallel()
	for text, lines := range map[string]int64{"": 0, "a": 1, "a\n": 1, "a\nb": 2, "\n\n": 2} {
		s := Whole(text)
		w := NewWindow(Limit{})
		w.Write([]byte(text))
		if s != w.Snapshot() || s.TotalLines != lines {
			t.Errorf("Whole(%q) = %+v; window %+v", text, s, w.Snapshot())
		}
	}
}
