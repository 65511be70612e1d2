package output

import (
	"bytes"
	"unicode/utf8"
)

// This file is the decision: which part of a text a Limit keeps. Window only feeds it.

// span is the window of a text: bytes [start, end) holding lines lines (a cut line counts as
// one; a line of which no byte is kept does not).
type span struct {
	start, end int
	lines      int64
}

// Bound returns the window lim keeps of the whole text, and what it drops: the bytes outside
// the window and the lines of which no byte is kept.
func Bound(text []byte, lim Limit) (window []byte, droppedBytes, droppedLines int64) {
	var s span
	switch {
	case lim.Unbounded():
		s = span{0, len(text), countLines(text)}
	case lim.Mode == Head:
		s = headSpan(text, lim, true)
	default:
		s = tailSpan(text, lim, true)
	}
	return text[s.start:s.end], int64(len(text) - (s.end - s.start)), countLines(text) - s.lines
}

// countLines counts the lines of a whole text: its newlines, and a final line without one.
func countLines(text []byte) int64 {
	n := int64(bytes.Count(text, newline))
	if len(text) > 0 && text[len(text)-1] != '\n' {
		n++
	}
	return n
}

var newline = []byte{'\n'}

// headSpan is the head window of text. whole says text is the entire output; when it is not,
// text is a prefix of it whose last line, unless it ends in '\n', goes on past the prefix, and
// the prefix holds at least one byte more than the byte bound or every line the line bound
// keeps (so the window is decided).
func headSpan(text []byte, lim Limit, whole bool) span {
	end, lines := 0, int64(0)
	for end < len(text) {
		if lim.Lines > 0 && lines == int64(lim.Lines) {
			break
		}
		next := len(text)
		if i := bytes.IndexByte(text[end:], '\n'); i >= 0 {
			next = end + i + 1
		} else if !whole {
			break // the line goes on past the prefix: over the byte bound, see below
		}
		if lim.Bytes > 0 && next > lim.Bytes {
			break
		}
		end, lines = next, lines+1
	}
	if lines > 0 || lim.Bytes <= 0 || len(text) <= lim.Bytes {
		return span{0, end, lines}
	}
	// The first line alone is over the byte bound: its first bytes, cut where a character
	// starts. utf8.UTFMax-1 steps back reach the start of any valid character; in invalid
	// bytes the cut stops there, so it never costs more than that.
	n := lim.Bytes
	for k := 0; k < utf8.UTFMax-1 && n > 0 && !utf8.RuneStart(text[n]); k++ {
		n--
	}
	if n == 0 {
		return span{0, 0, 0}
	}
	return span{0, n, 1}
}

// tailSpan is the tail window of text. startsLine says text[0] begins a line; when it does
// not, text is a suffix of the output holding at least the last lim.Bytes bytes (or the last
// lim.Lines lines, then it begins a line), so its first, partial line can never be kept whole.
func tailSpan(text []byte, lim Limit, startsLine bool) span {
	start, lines := len(text), int64(0)
	for start > 0 {
		if lim.Lines > 0 && lines == int64(lim.Lines) {
			break
		}
		// The line ending at start begins after the newline before its own last byte.
		prev := bytes.LastIndexByte(text[:start-1], '\n') + 1
		if prev == 0 && !startsLine {
			break
		}
		if lim.Bytes > 0 && len(text)-prev > lim.Bytes {
			break
		}
		start, lines = prev, lines+1
	}
	if lines > 0 || lim.Bytes <= 0 || len(text) == 0 {
		return span{start, len(text), lines}
	}
	// The last line alone is over the byte bound: its last bytes, from where a character
	// starts (at most utf8.UTFMax-1 steps on, as in headSpan).
	p := max(len(text)-lim.Bytes, 0)
	for k := 0; k < utf8.UTFMax-1 && p < len(text) && !utf8.RuneStart(text[p]); k++ {
		p++
	}
	if p == len(text) {
		return span{p, p, 0}
	}
	return span{p, len(text), 1}
}
