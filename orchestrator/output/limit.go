// Package output bounds what a step or job prints. One truncation setting, a Limit, keeps a
// window of whole lines from the start (Head) or the end (Tail) of the output, and a Window
// streams output into that window while counting exactly what falls outside it, so that the
// bytes kept plus the bytes dropped are always every byte written.
package output

import (
	"errors"
	"fmt"
)

// Mode says which end of the output a Limit keeps.
type Mode int

const (
	// Tail keeps whole lines from the end. It is the zero Mode.
	Tail Mode = iota
	// Head keeps whole lines from the start.
	Head
)

// String returns "tail" or "head".
func (m Mode) String() string {
	switch m {
	case Tail:
		return "tail"
	case Head:
		return "head"
	}
	return fmt.Sprintf("Mode(%d)", int(m))
}

// MarshalText encodes the mode as "tail" or "head".
func (m Mode) MarshalText() ([]byte, error) {
	if m != Tail && m != Head {
		return nil, fmt.Errorf("output: unknown mode %d", int(m))
	}
	return []byte(m.String()), nil
}

// UnmarshalText reads "tail" or "head".
func (m *Mode) UnmarshalText(b []byte) error {
	switch string(b) {
	case "tail":
		*m = Tail
	case "head":
		*m = Head
	default:
		return fmt.Errorf("output: unknown mode %q (want head or tail)", b)
	}
	return nil
}

// The default truncation setting.
const (
	DefaultBytes = 50 << 10
	DefaultLines = 2000
)

// Limit is the one truncation setting that bounds every output. A field that is zero (or
// less) sets no bound on its measure; the zero Limit is the opt-out that keeps everything.
//
// A line is a run of bytes ending in '\n', or the final run without one; an empty line is
// its newline alone. The window holds whole lines only, with one exception: when the single
// line at the kept end is over Bytes on its own, the window is that line cut at a UTF-8
// character boundary (Head: its first bytes, Tail: its last). A line counts as dropped only
// when no byte of it is kept. Without a byte bound a window stores its lines whole, however
// long they are: only a byte bound bounds memory.
type Limit struct {
	Bytes int  `json:"bytes" mapstructure:"bytes"`
	Lines int  `json:"lines" mapstructure:"lines"`
	Mode  Mode `json:"mode" mapstructure:"mode"`
}

// Default returns the default setting: 50 KiB and 2000 lines, tail.
func Default() Limit { return Limit{Bytes: DefaultBytes, Lines: DefaultLines, Mode: Tail} }

// Unbounded reports whether the limit is the opt-out that keeps everything.
func (l Limit) Unbounded() bool { return l.Bytes <= 0 && l.Lines <= 0 }

// ErrLimit is the class of an invalid Limit.
var ErrLimit = errors.New("invalid output limit")

// Validate refuses negative bounds and unknown modes, for settings read from configuration.
func (l Limit) Validate() error {
	if l.Bytes < 0 || l.Lines < 0 {
		return fmt.Errorf("%w: bytes %d, lines %d: a bound is 0 (none) or positive", ErrLimit, l.Bytes, l.Lines)
	}
	if l.Mode != Tail && l.Mode != Head {
		return fmt.Errorf("%w: mode %d", ErrLimit, int(l.Mode))
	}
	return nil
}
