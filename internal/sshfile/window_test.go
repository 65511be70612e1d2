package sshfile

import (
	"bytes"
	"math/rand/v2"
	"testing"
	"unicode/utf8"
)

// law: bound_slice_conserves
// law: bound_steps_whole
// For random streams fed in random chunks: kept + dropped = every byte; the kept text is a
// prefix of the stream, at most the cap, cut at a character boundary; the stream is binary
// exactly when it is not UTF-8 or holds a NUL; and the chunking changes nothing.
func TestHeadProperties(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	pieces := [][]byte{[]byte("a"), []byte("\n"), []byte("é"), []byte("€"), []byte("𝄞"), {0}, {0xff}, {0xe2, 0x82}, []byte("xyz")}
	for i := 0; i < 5000; i++ {
		var all []byte
		for n := r.IntN(40); n > 0; n-- {
			p := pieces[r.IntN(len(pieces))]
			if r.IntN(10) < 8 && (p[0] == 0 || p[0] == 0xff || len(p) == 2 && p[0] == 0xe2) {
				p = []byte("b") // mostly text
			}
			all = append(all, p...)
		}
		cap := r.IntN(30) + 1
		whole := newHead(cap)
		whole.Write(all)
		whole.close()
		h := newHead(cap)
		for rest := all; len(rest) > 0; {
			n := r.IntN(len(rest)) + 1
			h.Write(rest[:n])
			rest = rest[n:]
		}
		h.close()
		wantBinary := !utf8.Valid(all) || bytes.IndexByte(all, 0) >= 0
		if h.binary != wantBinary || whole.binary != wantBinary {
			t.Fatalf("%q: binary %v (whole %v); want %v", all, h.binary, whole.binary, wantBinary)
		}
		if wantBinary {
			continue
		}
		text, dropped := h.text()
		wt, wd := whole.text()
		if text != wt || dropped != wd {
			t.Fatalf("%q cap %d: chunked %q %d, whole %q %d", all, cap, text, dropped, wt, wd)
		}
		if int64(len(text))+dropped != int64(len(all)) || !bytes.HasPrefix(all, []byte(text)) || len(text) > cap || !utf8.ValidString(text) {
			t.Fatalf("%q cap %d: kept %q dropped %d", all, cap, text, dropped)
		}
		// Whole characters: the kept text is the longest such prefix within the cap.
		if len(all) > len(text) {
			_, size := utf8.DecodeRune(all[len(text):])
			if len(text)+size <= cap {
				t.Fatalf("%q cap %d: kept %q, but the next character fits", all, cap, text)
			}
		}
	}
}
