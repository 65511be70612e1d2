package output

import (
	"errors"
	"fmt"
)

// This file is the decision: what a job's artifact (the file that receives every byte of a
// job's output as it comes) keeps under a cap, and where in the file each byte it keeps goes.
// The artifact file does the writing; this decides every offset.

// DefaultArtifactBytes is the default cap of a job's artifact: 1 GiB.
const DefaultArtifactBytes = 1 << 30

// Spill bounds a job's artifact. Up to Cap bytes of output the file holds them all, in order.
// Past Cap it keeps the first Head() bytes where they are and the last Tail() bytes in a ring
// after them (each byte written over the one Tail() bytes before it), so the file never holds
// more than Cap bytes; the bytes between the head and the tail are dropped, and counted. At
// the end the ring is turned (Turn) so the file reads head, then tail, in order. A Cap of 0
// (or less) is the opt-out: the file keeps every byte.
//
// The cap is split half and half: a runaway job's first bytes say what it was doing and its
// last bytes how it ended, and neither is known to matter more.
type Spill struct {
	Cap int64
}

// Capped reports whether the spill has a cap.
func (s Spill) Capped() bool { return s.Cap > 0 }

// Head is how many of the first bytes are kept past the cap: half of it, rounded down.
func (s Spill) Head() int64 {
	if !s.Capped() {
		return 0
	}
	return s.Cap / 2
}

// Tail is how many of the last bytes are kept past the cap: the rest of it.
func (s Spill) Tail() int64 {
	if !s.Capped() {
		return 0
	}
	return s.Cap - s.Head()
}

// Kept returns how many of total bytes written the file keeps and how many it drops: all of
// them within the cap, else Cap and the rest.
func (s Spill) Kept(total int64) (kept, dropped int64) {
	if !s.Capped() || total <= s.Cap {
		return total, 0
	}
	return s.Cap, total - s.Cap
}

// Slot is the file offset of the output's byte at offset off: the head and everything within
// the cap in place, a later byte in the ring.
func (s Spill) Slot(off int64) int64 {
	if !s.Capped() || off < s.Head() {
		return off
	}
	return s.Head() + (off-s.Head())%s.Tail()
}

// Holds reports whether, once total bytes were written, the file still holds the output's
// byte at offset off.
func (s Spill) Holds(off, total int64) bool {
	if off < 0 || off >= total {
		return false
	}
	return !s.Capped() || total <= s.Cap || off < s.Head() || off >= total-s.Tail()
}

// Turn is how the ring is put in order once total bytes were written: the oldest byte of the
// tail is at file offset Head()+Turn, so the file's bytes from there to the end come first,
// then those from Head() to there. 0: the file is in order already.
func (s Spill) Turn(total int64) int64 {
	if !s.Capped() || total <= s.Cap {
		return 0
	}
	return (total - s.Head()) % s.Tail()
}

// Piece is one write a chunk of output makes: its bytes [From, From+Len) go to file offset At.
type Piece struct {
	From, Len, At int64
}

// Pieces are the writes that put n bytes, written at output offset off, where the file keeps
// them. A piece never crosses the end of the head or of the ring; bytes the same chunk writes
// over again (a chunk longer than the ring) are not written at all.
func (s Spill) Pieces(off, n int64) []Piece {
	var out []Piece
	from := int64(0)
	if s.Capped() && off < s.Head() {
		k := min(n, s.Head()-off)
		out = append(out, Piece{From: 0, Len: k, At: off})
		from = k
	} else if !s.Capped() {
		if n > 0 {
			out = append(out, Piece{From: 0, Len: n, At: off})
		}
		return out
	}
	// The rest is in the ring: only its last Tail() bytes survive this chunk.
	if rest := n - from; rest > s.Tail() {
		from = n - s.Tail()
	}
	for from < n {
		at := s.Slot(off + from)
		k := min(n-from, s.Head()+s.Tail()-at)
		out = append(out, Piece{From: from, Len: k, At: at})
		from += k
	}
	return out
}

// ErrArtifactCap is the class of an invalid artifact cap.
var ErrArtifactCap = errors.New("invalid artifact cap")

// Validate refuses a negative cap, for settings read from configuration.
func (s Spill) Validate() error {
	if s.Cap < 0 {
		return fmt.Errorf("%w: %d bytes: a cap is 0 (none) or positive", ErrArtifactCap, s.Cap)
	}
	return nil
}
