package sshfile

import (
	"errors"
	"unicode/utf8"
)

// errBinary ends a copy into a head at the first byte that is not text.
var errBinary = errors.New("not text")

// head keeps the first bytes of a stream, up to a cap cut at a character boundary, counts
// every byte, and watches whether the whole is text: UTF-8 with no NUL byte. Bytes kept plus
// bytes dropped are every byte written.
type head struct {
	cap     int
	kept    []byte
	total   int64
	binary  bool
	pending []byte // the start of a character split across writes
	full    bool   // the window stopped taking bytes
	onFull  func() // called once, when the window fills
}

func newHead(cap int) *head { return &head{cap: cap} }

// Write takes the next bytes of the stream; once they are not text, it returns errBinary.
func (h *head) Write(p []byte) (int, error) {
	h.total += int64(len(p))
	h.check(p)
	if h.binary {
		return len(p), errBinary
	}
	if !h.full {
		room := h.cap - len(h.kept)
		if len(p) <= room {
			h.kept = append(h.kept, p...)
		} else {
			h.kept = append(h.kept, p[:room]...)
			h.full = true
		}
		if len(h.kept) == h.cap {
			h.full = true
		}
		if h.full && h.onFull != nil {
			h.onFull()
		}
	}
	return len(p), nil
}

// check updates binary with p, carrying a character split across writes.
func (h *head) check(p []byte) {
	if h.binary {
		return
	}
	for _, c := range p {
		if c == 0 {
			h.binary = true
			return
		}
	}
	b := append(h.pending, p...)
	h.pending = nil
	// A character may begin in the last 3 bytes and end in the next write.
	cut := len(b)
	for j := len(b) - 1; j >= 0 && j >= len(b)-3; j-- {
		if utf8.RuneStart(b[j]) {
			if !utf8.FullRune(b[j:]) {
				cut = j
			}
			break
		}
	}
	if !utf8.Valid(b[:cut]) {
		h.binary = true
		return
	}
	h.pending = append([]byte(nil), b[cut:]...)
}

// close ends the stream: a character left unfinished makes it binary.
func (h *head) close() {
	if len(h.pending) > 0 {
		h.binary = true
		h.pending = nil
	}
}

// text returns the kept bytes cut back to a character boundary, and how many bytes of the
// stream it does not hold.
func (h *head) text() (string, int64) {
	k := h.kept
	if h.full && h.total > int64(len(k)) {
		// The cap may have cut a character: drop its start.
		for i := 0; i < utf8.UTFMax && i < len(k); i++ {
			j := len(k) - 1 - i
			if utf8.RuneStart(k[j]) {
				if !utf8.FullRune(k[j:]) {
					k = k[:j]
				}
				break
			}
		}
	}
	return string(k), h.total - int64(len(k))
}
