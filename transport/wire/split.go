package wire

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strconv"
	"unicode/utf8"
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

// Head is what the gate reads of a frame: its leading small fields.
type Head struct {
	Event  string
	ID     string
	Type   string
	Status string
	Step   int
	FD     int
}

// ReadHead reads the head of a line: the leading `event`, `id`, `type`, `status`, `step` and
// `fd` members of its object, stopping at the first other member or where the head ends. A
// head that is not UTF-8, does not open an object, or has no `event` is a ProtocolFault.
// complete says whether head is the whole line; a cut head may end mid-value.
func ReadHead(head []byte, complete bool) (Head, error) {
	if !complete {
		// A head cut inside a multi-byte character is still a head.
		for i := 0; i < utf8.UTFMax && len(head) > 0; i++ {
			if r, _ := utf8.DecodeLastRune(head); r != utf8.RuneError {
				break
			}
			head = head[:len(head)-1]
		}
	}
	if !utf8.Valid(head) {
		return Head{}, &ProtocolFault{Reason: "not UTF-8"}
	}
	var h Head
	d := json.NewDecoder(bytes.NewReader(head))
	d.UseNumber()
	if t, err := d.Token(); err != nil || t != json.Delim('{') {
		return Head{}, &ProtocolFault{Reason: "not a frame"}
	}
	for {
		k, err := d.Token()
		if err != nil {
			break
		}
		key, ok := k.(string)
		if !ok {
			break
		}
		v, err := d.Token()
		if err != nil {
			break
		}
		switch key {
		case "event", "id", "type", "status":
			s, ok := v.(string)
			if !ok {
				return Head{}, &ProtocolFault{Reason: "not a frame: " + key + " is not a string"}
			}
			switch key {
			case "event":
				h.Event = s
			case "id":
				h.ID = s
			case "type":
				h.Type = s
			case "status":
				h.Status = s
			}
			continue
		case "step", "fd":
			n, ok := v.(json.Number)
			if !ok {
				return Head{}, &ProtocolFault{Reason: "not a frame: " + key + " is not a number"}
			}
			i, err := strconv.Atoi(n.String())
			if err != nil {
				return Head{}, &ProtocolFault{Reason: "not a frame: " + key + " is not an integer"}
			}
			if key == "step" {
				h.Step = i
			} else {
				h.FD = i
			}
			continue
		}
		break
	}
	if h.Event == "" {
		return Head{}, &ProtocolFault{Reason: "not a frame: no event in its head"}
	}
	return h, nil
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
