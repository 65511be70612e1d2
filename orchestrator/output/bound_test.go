package output

import (
	"fmt"
	"math/rand/v2"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
)

// refBound is the reference the window is checked against: it bounds the whole text at once,
// line by line, in the plainest way, and cuts a single over-long line at the rune boundaries a
// forward UTF-8 decode gives (the same as the package's for valid UTF-8).
func refBound(text string, lim Limit) (kept string, droppedBytes, droppedLines int64) {
	lines := strings.SplitAfter(text, "\n")
	if lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	if lim.Unbounded() {
		return text, 0, 0
	}
	maxB, maxL := lim.Bytes, lim.Lines
	if maxB <= 0 {
		maxB = len(text) + 1
	}
	if maxL <= 0 {
		maxL = len(lines) + 1
	}
	var keptLines []string
	size := 0
	order := func(i int) string { // lines in the order the mode takes them
		if lim.Mode == Head {
			return lines[i]
		}
		return lines[len(lines)-1-i]
	}
	for i := range lines {
		ln := order(i)
		if len(keptLines) == maxL || size+len(ln) > maxB {
			break
		}
		keptLines = append(keptLines, ln)
		size += len(ln)
	}
	nKept := int64(len(keptLines))
	if lim.Mode == Head {
		kept = strings.Join(keptLines, "")
	} else {
		for i := len(keptLines) - 1; i >= 0; i-- {
			kept += keptLines[i]
		}
	}
	if len(keptLines) == 0 && len(lines) > 0 {
		ln := order(0)
		// ln is over maxB (else it would have been kept): cut it at a rune boundary.
		pos := 0
		if lim.Mode == Head {
			for pos < len(ln) {
				_, sz := utf8.DecodeRuneInString(ln[pos:])
				if pos+sz > maxB {
					break
				}
				pos += sz
			}
			kept = ln[:pos]
		} else {
			for pos < len(ln)-maxB {
				_, sz := utf8.DecodeRuneInString(ln[pos:])
				pos += sz
			}
			kept = ln[pos:]
		}
		if kept != "" {
			nKept = 1
		}
	}
	return kept, int64(len(text) - len(kept)), int64(len(lines)) - nKept
}

// segments counts the lines of a window the way Limit counts them.
func segments(s string) int {
	return int(countLines([]byte(s)))
}

// randText makes text with multi-byte UTF-8, long lines, empty lines and sometimes no final
// newline.
func randText(r *rand.Rand, maxPieces int) string {
	pieces := []string{"a", "b", "é", "€", "😀", "\n", "\n\n", " ", "\t"}
	var b strings.Builder
	n := r.IntN(maxPieces + 1)
	for range n {
		switch r.IntN(10) {
		case 0: // a long line
			b.WriteString(strings.Repeat(pieces[r.IntN(5)], r.IntN(120)))
		case 1:
			b.WriteString("\n")
		default:
			b.WriteString(pieces[r.IntN(len(pieces))])
		}
	}
	if r.IntN(2) == 0 && b.Len() > 0 && !strings.HasSuffix(b.String(), "\n") {
		b.WriteString("\n")
	}
	return b.String()
}

// randLimit makes a small bound, so random text goes over it often.
func randLimit(r *rand.Rand) Limit {
	lim := Limit{Mode: Mode(r.IntN(2))}
	if r.IntN(4) != 0 {
		lim.Bytes = 1 + r.IntN(64)
	}
	if r.IntN(3) != 0 {
		lim.Lines = 1 + r.IntN(8)
	}
	return lim
}

// randChunks splits s at random points, empty chunks and one-byte chunks included.
func randChunks(r *rand.Rand, s string) []string {
	var out []string
	for len(s) > 0 {
		var n int
		switch r.IntN(4) {
		case 0:
			n = 0
		case 1:
			n = 1
		case 2:
			n = r.IntN(8)
		default:
			n = r.IntN(len(s) + 1)
		}
		n = min(n, len(s))
		out = append(out, s[:n])
		s = s[n:]
	}
	return out
}

func newRand(t testing.TB) *rand.Rand {
	seed := uint64(rand.Int64())
	t.Logf("seed %d", seed)
	return rand.New(rand.NewPCG(seed, seed^0x5eed))
}

const trials = 3000

// law: bound_window_exact
func TestBoundWindowExact(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		text  string
		lim   Limit
		want  string
		bytes int64
		lines int64
	}{
		{"tail lines", "a\nb\nc\n", Limit{Lines: 2}, "b\nc\n", 2, 1},
		{"head lines", "a\nb\nc\n", Limit{Lines: 2, Mode: Head}, "a\nb\n", 2, 1},
		{"tail bytes whole lines", "aa\nbb\ncc\n", Limit{Bytes: 5}, "cc\n", 6, 2},
		{"head bytes whole lines", "aa\nbb\ncc\n", Limit{Bytes: 5, Mode: Head}, "aa\n", 6, 2},
		{"tail no final newline", "aa\nbb", Limit{Lines: 1}, "bb", 3, 1},
		{"head no final newline fits", "aa\nbb", Limit{Bytes: 5, Mode: Head}, "aa\nbb", 0, 0},
		{"empty lines", "\n\n\n", Limit{Lines: 2}, "\n\n", 1, 1},
		{"empty text", "", Limit{Bytes: 3, Lines: 1}, "", 0, 0},
		{"both bounds, lines bind", "a\nb\nc\nd\n", Limit{Bytes: 100, Lines: 3}, "b\nc\nd\n", 2, 1},
		{"both bounds, bytes bind", "a\nb\nc\nd\n", Limit{Bytes: 5, Lines: 3}, "c\nd\n", 4, 2},
		{"head stops at a line that does not fit", "ab\ncdefgh\nx\n", Limit{Bytes: 6, Mode: Head}, "ab\n", 9, 2},
		{"tail stops at a line that does not fit", "x\ncdefgh\nab\n", Limit{Bytes: 6}, "ab\n", 9, 2},
		{"head cuts a long first line", "abcdefgh\nij\n", Limit{Bytes: 3, Mode: Head}, "abc", 9, 1},
		{"tail cuts a long last line", "ab\ncdefgh\n", Limit{Bytes: 5}, "efgh\n", 5, 1},
		{"head cut backs off a character", "héllo\n", Limit{Bytes: 2, Mode: Head}, "h", 6, 0},
		{"head cut keeps a whole character", "héllo\n", Limit{Bytes: 3, Mode: Head}, "hé", 4, 0},
		{"head cut of four-byte characters", "😀😀\n", Limit{Bytes: 7, Mode: Head}, "😀", 5, 0},
		{"tail cut moves to a character start", "abc€\n", Limit{Bytes: 3}, "\n", 6, 0},
		{"tail cut keeps a whole character", "abc€\n", Limit{Bytes: 4}, "€\n", 3, 0},
		{"cut leaving nothing", "é\n", Limit{Bytes: 1, Mode: Head}, "", 3, 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, db, dl := Bound([]byte(c.text), c.lim)
			if string(got) != c.want || db != c.bytes || dl != c.lines {
				t.Errorf("Bound(%q, %+v) = %q, %d bytes, %d lines dropped; want %q, %d, %d",
					c.text, c.lim, got, db, dl, c.want, c.bytes, c.lines)
			}
			ref, rb, rl := refBound(c.text, c.lim)
			if ref != c.want || rb != c.bytes || rl != c.lines {
				t.Errorf("reference disagrees with the table: %q, %d, %d", ref, rb, rl)
			}
			w := NewWindow(c.lim)
			for i := range len(c.text) { // one byte at a time: the hardest chunking
				w.Write([]byte{c.text[i]})
			}
			wb, wl := w.Dropped()
			if w.Text() != c.want || wb != c.bytes || wl != c.lines {
				t.Errorf("Window = %q, %d, %d; want %q, %d, %d", w.Text(), wb, wl, c.want, c.bytes, c.lines)
			}
		})
	}
}

// law: bound_window_exact
func TestBoundWindowExactRandom(t *testing.T) {
	t.Parallel()
	r := newRand(t)
	for range trials {
		text, lim := randText(r, 60), randLimit(r)
		got, db, dl := Bound([]byte(text), lim)
		want, wb, wl := refBound(text, lim)
		if string(got) != want || db != wb || dl != wl {
			t.Fatalf("Bound(%q, %+v) = %q, %d, %d; reference %q, %d, %d", text, lim, got, db, dl, want, wb, wl)
		}
		// A cut window is one line cut at a character boundary; any other window is whole
		// lines at the kept end.
		if !utf8.ValidString(string(got)) {
			t.Fatalf("window %q of %q is not valid UTF-8", got, text)
		}
		if lim.Mode == Head && !strings.HasPrefix(text, string(got)) ||
			lim.Mode == Tail && !strings.HasSuffix(text, string(got)) {
			t.Fatalf("window %q is not at the %v of %q", got, lim.Mode, text)
		}
	}
}

// law: bound_margin_exact
func TestBoundMarginExact(t *testing.T) {
	t.Parallel()
	r := newRand(t)
	for range trials {
		text, lim := randText(r, 80), randLimit(r)
		lim.Mode = Tail
		if lim.Bytes == 0 && lim.Lines == 0 {
			lim.Bytes = 1 + r.IntN(16)
		}
		w := NewWindow(lim)
		written := ""
		for _, c := range randChunks(r, text) {
			w.Write([]byte(c))
			written += c
			stored := string(w.buf)
			if !strings.HasSuffix(written, stored) {
				t.Fatalf("store %q is not a suffix of %q", stored, written)
			}
			if lim.Bytes > 0 && len(stored) > 2*lim.Bytes {
				t.Fatalf("store holds %d bytes, over twice the bound %d", len(stored), lim.Bytes)
			}
			if lim.Lines > 0 && w.storedNL > 2*lim.Lines {
				t.Fatalf("store holds %d newlines, over twice the bound %d", w.storedNL, lim.Lines)
			}
			// The store must begin no later than where a later window may begin: within
			// the last Bytes bytes and the last Lines lines.
			if need := reach(written, lim); len(stored) < need {
				t.Fatalf("store trimmed to %d bytes, a later window may need the last %d", len(stored), need)
			}
			start := len(written) - len(stored)
			if mid := start > 0 && written[start-1] != '\n'; mid != w.midLine {
				t.Fatalf("midLine %v, want %v", w.midLine, mid)
			}
			// A write may end inside a character; the reference decodes only valid text.
			want, _, _ := refBound(written, lim)
			if !utf8.ValidString(written) {
				b, _, _ := Bound([]byte(written), lim)
				want = string(b)
			}
			if got := w.Text(); got != want {
				t.Fatalf("after %q: window %q, want %q (lost a byte of it)", written, got, want)
			}
		}
	}
}

// reach is how many bytes at the end of text a later window of lim may still hold: the last
// Bytes bytes, or the last Lines lines if that is fewer.
func reach(text string, lim Limit) int {
	n := len(text)
	if lim.Bytes > 0 {
		n = min(n, lim.Bytes)
	}
	if lim.Lines > 0 {
		lines := strings.SplitAfter(text, "\n")
		if lines[len(lines)-1] == "" {
			lines = lines[:len(lines)-1]
		}
		if len(lines) > lim.Lines {
			n = min(n, len(strings.Join(lines[len(lines)-lim.Lines:], "")))
		}
	}
	return n
}

var noticeRE = regexp.MustCompile(`^\[output truncated: (\d+) bytes? and (\d+) lines? dropped from the (start|end); kept the (last|first) (\d+) lines? and (\d+) bytes? \(limit [^)]*\)\]$`)

// law: bound_notice_exact
func TestBoundNoticeExact(t *testing.T) {
	t.Parallel()
	r := newRand(t)
	for range trials {
		text, lim := randText(r, 60), randLimit(r)
		w := NewWindow(lim)
		for _, c := range randChunks(r, text) {
			w.Write([]byte(c))
		}
		kept, db, dl := refBound(text, lim)
		n := w.Notice()
		if db == 0 {
			if n != "" {
				t.Fatalf("nothing dropped from %q, notice %q", text, n)
			}
			continue
		}
		m := noticeRE.FindStringSubmatch(n)
		if m == nil {
			t.Fatalf("notice %q does not read as a truncation notice", n)
		}
		num := func(s string) int64 { v, _ := strconv.ParseInt(s, 10, 64); return v }
		if num(m[1]) != db || num(m[2]) != dl {
			t.Fatalf("notice %q; dropped %d bytes, %d lines", n, db, dl)
		}
		if num(m[5]) != int64(segments(kept)) || num(m[6]) != int64(len(kept)) {
			t.Fatalf("notice %q; kept %d bytes, %d lines", n, len(kept), segments(kept))
		}
		wantEnd := map[Mode]string{Tail: "start", Head: "end"}[lim.Mode]
		if m[3] != wantEnd {
			t.Fatalf("notice %q for %v", n, lim.Mode)
		}
	}
}

// law: bound_window_within
func TestBoundWindowWithin(t *testing.T) {
	t.Parallel()
	r := newRand(t)
	for range trials {
		text, lim := randText(r, 80), randLimit(r)
		w := NewWindow(lim)
		for _, c := range randChunks(r, text) {
			w.Write([]byte(c))
			got := w.Text()
			if lim.Bytes > 0 && len(got) > lim.Bytes {
				t.Fatalf("window of %d bytes over the bound %d", len(got), lim.Bytes)
			}
			if lim.Lines > 0 && segments(got) > lim.Lines {
				t.Fatalf("window of %d lines over the bound %d", segments(got), lim.Lines)
			}
		}
	}
}

// law: bound_window_keeps_what_fits
func TestBoundWindowKeepsWhatFits(t *testing.T) {
	t.Parallel()
	r := newRand(t)
	for range trials {
		text := randText(r, 60)
		lim := Limit{Mode: Mode(r.IntN(2))}
		if r.IntN(3) != 0 {
			lim.Bytes = len(text) + r.IntN(3)
		}
		if r.IntN(3) != 0 {
			lim.Lines = segments(text) + r.IntN(3)
		}
		if lim.Bytes == 0 && lim.Lines == 0 {
			lim.Bytes = len(text) + 1
		}
		w := NewWindow(lim)
		for _, c := range randChunks(r, text) {
			w.Write([]byte(c))
		}
		db, dl := w.Dropped()
		if w.Text() != text || db != 0 || dl != 0 || w.Notice() != "" {
			t.Fatalf("%q within %+v: window %q, dropped %d bytes %d lines, notice %q",
				text, lim, w.Text(), db, dl, w.Notice())
		}
	}
}

// law: bound_slice_conserves
func TestBoundSliceConserves(t *testing.T) {
	t.Parallel()
	r := newRand(t)
	for range trials {
		text, lim := randText(r, 80), randLimit(r)
		w := NewWindow(lim)
		written := 0
		for _, c := range randChunks(r, text) {
			w.Write([]byte(c))
			written += len(c)
			kept := w.Text()
			db, dl := w.Dropped()
			tb, tl := w.Total()
			if int64(len(kept))+db != int64(written) || tb != int64(written) {
				t.Fatalf("kept %d + dropped %d bytes, total %d; written %d", len(kept), db, tb, written)
			}
			if int64(segments(kept))+dl != tl || tl != int64(segments(text[:written])) {
				t.Fatalf("kept %d + dropped %d lines, total %d; written %d", segments(kept), dl, tl, segments(text[:written]))
			}
		}
	}
}

// law: bound_steps_whole
func TestBoundStepsWhole(t *testing.T) {
	t.Parallel()
	r := newRand(t)
	for range trials {
		text, lim := randText(r, 80), randLimit(r)
		w := NewWindow(lim)
		for _, c := range randChunks(r, text) {
			w.Write([]byte(c))
		}
		want, wb, wl := refBound(text, lim)
		db, dl := w.Dropped()
		if got := w.Text(); got != want || db != wb || dl != wl {
			t.Fatalf("%q through %+v: window %q, %d, %d; whole at once %q, %d, %d",
				text, lim, got, db, dl, want, wb, wl)
		}
	}
}

// law: bound_head_full_keeps
func TestBoundHeadFullKeeps(t *testing.T) {
	t.Parallel()
	r := newRand(t)
	sawFull := 0
	for range trials {
		text, lim := randText(r, 80), randLimit(r)
		lim.Mode = Head
		if lim.Unbounded() {
			lim.Lines = 1 + r.IntN(4)
		}
		final, _, _ := refBound(text, lim)
		w := NewWindow(lim)
		written := 0
		for _, c := range randChunks(r, text) {
			w.Write([]byte(c))
			written += len(c)
			if !w.full {
				continue
			}
			sawFull++
			stored := string(w.buf)
			if !strings.HasPrefix(text, stored) {
				t.Fatalf("head store %q is not a prefix of %q", stored, text)
			}
			if lim.Bytes > 0 && len(stored) > lim.Bytes+1 {
				t.Fatalf("head stored %d bytes, bound %d", len(stored), lim.Bytes)
			}
			// The whole output's window lies in what was stored: the bytes the head
			// drops, text[len(stored):], hold none of it.
			if len(final) > len(stored) {
				t.Fatalf("final window %q reaches past the store %q", final, stored)
			}
			if got := w.Text(); got != final {
				t.Fatalf("full head after %d bytes shows %q, the whole output's window is %q", written, got, final)
			}
		}
	}
	if sawFull == 0 {
		t.Fatal("no head ever filled: the test tested nothing")
	}
}

func ExampleWindow() {
	w := NewWindow(Limit{Lines: 2})
	fmt.Fprint(w, "one\ntwo\nthree\n")
	fmt.Printf("%q\n%s\n", w.Text(), w.Notice())
	// Output:
	// "two\nthree\n"
	// [output truncated: 4 bytes and 1 line dropped from the start; kept the last 2 lines and 10 bytes (limit 2 lines)]
}
