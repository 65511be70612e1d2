package output

import (
	"bytes"
	"math/rand/v2"
	"testing"
)

// spillFile plays the artifact file: it applies a chunk's pieces to a byte slice.
type spillFile struct {
	s       Spill
	b       []byte
	written int64
}

func (f *spillFile) write(p []byte) {
	for _, pc := range f.s.Pieces(f.written, int64(len(p))) {
		if end := pc.At + pc.Len; end > int64(len(f.b)) {
			f.b = append(f.b, make([]byte, end-int64(len(f.b)))...)
		}
		copy(f.b[pc.At:], p[pc.From:pc.From+pc.Len])
	}
	f.written += int64(len(p))
}

// turned is the file put in order, as the artifact does at its end.
func (f *spillFile) turned() []byte {
	t := f.s.Turn(f.written)
	if t == 0 {
		return bytes.Clone(f.b)
	}
	h := f.s.Head()
	out := bytes.Clone(f.b[:h])
	out = append(out, f.b[h+t:]...)
	return append(out, f.b[h:h+t]...)
}

// wantKept is what the artifact must hold of out under s: all of it within the cap, else its
// first Head and last Tail bytes.
func wantKept(out []byte, s Spill) []byte {
	if !s.Capped() || int64(len(out)) <= s.Cap {
		return out
	}
	return append(bytes.Clone(out[:s.Head()]), out[int64(len(out))-s.Tail():]...)
}

// Output of any length, written in any chunking under any cap (or none): the file holds at
// most the cap at every moment, every byte Holds names is in its Slot, and at the end, turned,
// the file is the output's first Head and last Tail bytes — all of it when it fits; the bytes
// kept and dropped are every byte written.
//
// law: job_output_bounded
// law: job_no_silent_loss
// law: job_optout_keeps_all
// law: job_cap_drops_only_excess
func TestSpillKeepsHeadAndTail(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(15, 4))
	for range 3000 {
		s := Spill{Cap: int64(r.IntN(64))}
		if r.IntN(8) == 0 {
			s.Cap = 0
		}
		out := make([]byte, r.IntN(300))
		for i := range out {
			out[i] = byte('a' + r.IntN(26))
		}
		f := &spillFile{s: s}
		rest := out
		for len(rest) > 0 {
			n := min(len(rest), r.IntN(90)+1)
			if r.IntN(4) == 0 {
				n = min(len(rest), r.IntN(4)+1)
			}
			f.write(rest[:n])
			rest = rest[n:]
			if s.Capped() && int64(len(f.b)) > s.Cap {
				t.Fatalf("cap %d: the file holds %d bytes", s.Cap, len(f.b))
			}
			for off := range f.written {
				if s.Holds(off, f.written) && f.b[s.Slot(off)] != out[off] {
					t.Fatalf("cap %d, %d written: byte %d is not at its slot %d", s.Cap, f.written, off, s.Slot(off))
				}
			}
		}
		got := f.turned()
		if want := wantKept(out, s); !bytes.Equal(got, want) {
			t.Fatalf("cap %d, %d bytes: the file is\n%q\nwant\n%q", s.Cap, len(out), got, want)
		}
		kept, dropped := s.Kept(int64(len(out)))
		if kept != int64(len(got)) || kept+dropped != int64(len(out)) {
			t.Fatalf("cap %d, %d bytes: kept %d, dropped %d, the file %d", s.Cap, len(out), kept, dropped, len(got))
		}
		if (!s.Capped() || int64(len(out)) <= s.Cap) && dropped != 0 {
			t.Fatalf("cap %d: %d bytes that fit lost %d", s.Cap, len(out), dropped)
		}
		held := int64(0)
		for off := range int64(len(out)) {
			if s.Holds(off, int64(len(out))) {
				held++
			}
		}
		if held != kept {
			t.Fatalf("cap %d, %d bytes: Holds names %d, Kept says %d", s.Cap, len(out), held, kept)
		}
	}
}

// A chunk longer than the ring writes only what survives it, and no piece crosses the end of
// the head or of the ring.
func TestSpillPiecesWriteOnce(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(15, 5))
	for range 2000 {
		s := Spill{Cap: int64(r.IntN(40) + 1)}
		off, n := int64(r.IntN(200)), int64(r.IntN(200))
		var total int64
		for _, pc := range s.Pieces(off, n) {
			total += pc.Len
			if pc.Len <= 0 {
				t.Fatalf("cap %d, %d at %d: empty piece %+v", s.Cap, n, off, pc)
			}
			if pc.At < s.Head() && pc.At+pc.Len > s.Head() || pc.At+pc.Len > s.Cap {
				t.Fatalf("cap %d, %d at %d: piece %+v crosses an end", s.Cap, n, off, pc)
			}
		}
		if total > s.Cap {
			t.Fatalf("cap %d, %d at %d: the pieces write %d bytes", s.Cap, n, off, total)
		}
	}
}

func TestSpillValidate(t *testing.T) {
	t.Parallel()
	for _, c := range []int64{0, 1, DefaultArtifactBytes} {
		if err := (Spill{Cap: c}).Validate(); err != nil {
			t.Errorf("cap %d: %v", c, err)
		}
	}
	if err := (Spill{Cap: -1}).Validate(); err == nil {
		t.Error("a negative cap is valid")
	}
}
