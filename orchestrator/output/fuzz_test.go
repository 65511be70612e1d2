package output

import (
	"bytes"
	"testing"
)

// FuzzWindow streams arbitrary bytes (invalid UTF-8 included) through a window in chunks the
// fuzzer picks and checks it against bounding the whole text at once.
func FuzzWindow(f *testing.F) {
	f.Add([]byte("one\ntwo\nthree\n"), uint8(5), uint8(2), false, []byte{1, 3})
	f.Add([]byte("héllo wörld😀\n"), uint8(3), uint8(0), true, []byte{0, 2, 1})
	f.Add([]byte("\xf0\x9f\x98\x80\x80\x80\x80\n\n"), uint8(2), uint8(1), false, []byte{7})
	f.Fuzz(func(t *testing.T, text []byte, nb, nl uint8, head bool, cuts []byte) {
		lim := Limit{Bytes: int(nb % 80), Lines: int(nl % 12)}
		if head {
			lim.Mode = Head
		}
		w := NewWindow(lim)
		rest := text
		for _, c := range cuts {
			n := min(int(c), len(rest))
			w.Write(rest[:n])
			rest = rest[n:]
		}
		w.Write(rest)

		want, db, dl := Bound(text, lim)
		s := w.Snapshot()
		if s.Text != string(want) || s.DroppedBytes != db || s.DroppedLines != dl {
			t.Fatalf("streamed %q, %d, %d; whole %q, %d, %d", s.Text, s.DroppedBytes, s.DroppedLines, want, db, dl)
		}
		if s.TotalBytes != int64(len(text)) || int64(len(want))+db != s.TotalBytes {
			t.Fatalf("counts: total %d, kept %d, dropped %d, written %d", s.TotalBytes, len(want), db, len(text))
		}
		if lim.Bytes > 0 && len(want) > lim.Bytes || lim.Lines > 0 && countLines(want) > int64(lim.Lines) {
			t.Fatalf("window %q over %+v", want, lim)
		}
		if head && !bytes.HasPrefix(text, want) || !head && !bytes.HasSuffix(text, want) {
			t.Fatalf("window %q not at the %v of %q", want, lim.Mode, text)
		}
		if (db == 0) != (s.Notice == "") {
			t.Fatalf("dropped %d, notice %q", db, s.Notice)
		}
	})
}
