package wire

import (
	"bufio"
	"bytes"
	"errors"
	"io"
)

// ProtocolFault is a line that cannot be answered: not UTF-8, not a frame, or over the limit
// with no readable head. The host replaces a kernel that sends one.
type ProtocolFault struct {
	Reason string
}

func (e *ProtocolFault) Error() string { return "protocol fault: " + e.Reason }

// Line is one line read by a Reader.
type Line struct {
	// Bytes is the whole line without its newline; nil when the line was over MaxLine.
	Bytes []byte
	// Head is the line's first MaxHead bytes (all of it when shorter).
	Head []byte
	// Size is the line's length in bytes, newline excluded, whether read or dropped.
	Size int64
}

// Oversize reports whether the line was over MaxLine and so only its head was kept.
func (l Line) Oversize() bool { return l.Bytes == nil }

// Reader splits a stream into lines. A line up to MaxLine bytes is returned whole; of a
// longer one only the first MaxHead bytes are kept and the rest is read and dropped up to its
// newline, so one over-long line never costs more than MaxLine of memory.
type Reader struct {
	br      *bufio.Reader
	max     int
	buf     []byte // reused across lines when the caller does not keep them
	discard bool
}

// NewReader reads lines from r with the wire's limits.
func NewReader(r io.Reader) *Reader { return NewReaderSize(r, MaxLine) }

// NewReaderSize reads lines from r, taking lines of up to max bytes whole. Tests use small
// limits; the wire uses MaxLine.
func NewReaderSize(r io.Reader, max int) *Reader {
	return &Reader{br: bufio.NewReaderSize(r, 256<<10), max: max}
}

// Next reads the next line. The line's slices are the caller's: a Reader never reuses them.
// A final line without a newline is returned; then io.EOF.
func (r *Reader) Next() (Line, error) {
	var line []byte
	var size int64
	over := false
	for {
		chunk, err := r.br.ReadSlice('\n')
		n := len(chunk)
		if err == nil {
			n-- // the newline
		}
		size += int64(n)
		if !over {
			if len(line)+n > r.max {
				over = true
				keep := min(MaxHead, r.max) - len(line)
				if keep > 0 {
					line = append(line, chunk[:min(keep, n)]...)
				} else if len(line) > MaxHead {
					line = line[:MaxHead]
				}
			} else if line == nil && err == nil {
				// The common case: the whole line is in the buffer.
				line = bytes.Clone(chunk[:n])
				return Line{Bytes: line, Head: line[:min(len(line), MaxHead)], Size: size}, nil
			} else {
				line = append(line, chunk[:n]...)
			}
		}
		switch {
		case err == nil:
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case errors.Is(err, io.EOF):
			if size == 0 && line == nil {
				return Line{}, io.EOF
			}
		default:
			return Line{}, err
		}
		break
	}
	if over {
		if len(line) > MaxHead {
			line = line[:MaxHead]
		}
		return Line{Head: line, Size: size}, nil
	}
	if line == nil {
		line = []byte{}
	}
	return Line{Bytes: line, Head: line[:min(len(line), MaxHead)], Size: size}, nil
}

// Writer writes frames, one line each. It is not safe for concurrent use; the owner of a
// stream serializes writes.
type Writer struct {
	w   io.Writer
	buf []byte
}

// NewWriter writes frames to w.
func NewWriter(w io.Writer) *Writer { return &Writer{w: w} }

// Write writes one frame in one Write call.
func (w *Writer) Write(f *Frame) error {
	b, err := Append(w.buf[:0], f)
	if err != nil {
		return err
	}
	if cap(b) <= 1<<20 {
		w.buf = b
	}
	_, err = w.w.Write(b)
	return err
}
