package wire

import (
	"bytes"
	"io"
	"sync"
	"sync/atomic"
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

	blk *block // the block Bytes lies in, when it may be recycled
}

// Release says the line's bytes are no longer used: once every line of its block is
// released, the Reader may read into the block again. Call it at most once; a line never
// released costs only its share of garbage.
func (l Line) Release() {
	if l.blk != nil {
		l.blk.release()
	}
}

// block is a chunk of memory lines are cut from. refs counts its lines not yet released,
// plus one while it is the Reader's current block; at zero it goes back to the pool.
type block struct {
	buf  []byte
	refs atomic.Int32
}

// blocks recycles chunk-sized blocks; a Reader takes them, released lines return them.
var blocks = sync.Pool{New: func() any { return &block{buf: make([]byte, chunk)} }}

func (b *block) release() {
	if b.refs.Add(-1) == 0 && len(b.buf) == chunk {
		blocks.Put(b)
	}
}

// Block is the size of the buffer the line lies in. Until the line is released it keeps all
// of that buffer from reuse (with the other lines cut from it), whatever its own size: what
// holding the line costs. A line over the limit lies in no buffer: 0.
func (l Line) Block() int {
	if l.blk == nil {
		return 0
	}
	return len(l.blk.buf)
}

// Oversize reports whether the line was over MaxLine and so only its head was kept.
func (l Line) Oversize() bool { return l.Bytes == nil }

// Reader splits a stream into lines. A line up to max bytes is returned whole; of a longer
// one only the first MaxHead bytes are kept and the rest is read and dropped up to its
// newline, so one over-long line never costs more than max of memory.
//
// Lines are slices of the chunks the Reader reads into, and a chunk is never written again
// where a line was handed out: a line costs no copy unless it straddles two chunks. (bufio
// would copy every line out of its one buffer.)
type Reader struct {
	r          io.Reader
	max        int
	blk        *block // the current block
	buf        []byte // blk.buf; buf[start:end] is read and not yet returned
	start, end int
	err        error // the reader's error, returned once the block is used up
}

// chunk is the size of a fresh chunk.
const chunk = 256 << 10

// NewReader reads lines from r with the wire's limits.
func NewReader(r io.Reader) *Reader { return NewReaderSize(r, MaxLine) }

// NewReaderSize reads lines from r, taking lines of up to max bytes whole. Tests use small
// limits; the wire uses MaxLine.
func NewReaderSize(r io.Reader, max int) *Reader {
	return &Reader{r: r, max: max}
}

// Next reads the next line. The line's slices are the caller's: a Reader never writes
// them again. A final line without a newline is returned; then io.EOF.
func (r *Reader) Next() (Line, error) {
	scanned := 0 // bytes of buf[start:end] known to hold no newline
	for {
		if i := bytes.IndexByte(r.buf[r.start+scanned:r.end], '\n'); i >= 0 {
			n := scanned + i
			line := r.buf[r.start : r.start+n : r.start+n]
			r.start += n + 1
			if n > r.max {
				return Line{Head: bytes.Clone(line[:min(MaxHead, r.max)]), Size: int64(n)}, nil
			}
			return r.cut(line), nil
		}
		scanned = r.end - r.start
		if r.err != nil {
			if scanned == 0 {
				return Line{}, r.err
			}
			line := r.buf[r.start:r.end:r.end]
			r.start = r.end
			if scanned > r.max {
				return Line{Head: bytes.Clone(line[:min(MaxHead, r.max)]), Size: int64(scanned)}, nil
			}
			return r.cut(line), nil
		}
		if scanned > r.max {
			return r.drop()
		}
		r.fill(scanned)
	}
}

// cut hands out a line of the current block.
func (r *Reader) cut(line []byte) Line {
	r.blk.refs.Add(1)
	return Line{Bytes: line, Head: line[:min(len(line), MaxHead)], Size: int64(len(line)), blk: r.blk}
}

// fill reads more into the block, first moving the partial line of `partial` bytes to a
// fresh block when the current one is full.
func (r *Reader) fill(partial int) {
	if r.end == len(r.buf) {
		size := max(chunk, 2*partial)
		if partial >= r.max {
			size = r.max + 1
		}
		var fresh *block
		if size == chunk {
			fresh = blocks.Get().(*block)
		} else {
			fresh = &block{buf: make([]byte, size)}
		}
		fresh.refs.Store(1)
		copy(fresh.buf, r.buf[r.start:r.end])
		if r.blk != nil {
			r.blk.release()
		}
		r.blk, r.buf, r.start, r.end = fresh, fresh.buf, 0, partial
	}
	n, err := r.r.Read(r.buf[r.end:])
	r.end += n
	if err != nil {
		r.err = err
	}
}

// drop keeps the head of an over-long line and reads the rest up to its newline. The rest is
// read into a scratch chunk, never into one that holds lines handed out, and the scratch
// chunk becomes the current one once the newline is found.
func (r *Reader) drop() (Line, error) {
	head := bytes.Clone(r.buf[r.start : r.start+min(MaxHead, r.max)])
	size := int64(0)
	var scratch *block
	for {
		if i := bytes.IndexByte(r.buf[r.start:r.end], '\n'); i >= 0 {
			size += int64(i)
			r.start += i + 1
			return Line{Head: head, Size: size}, nil
		}
		size += int64(r.end - r.start)
		if r.err != nil {
			r.start = r.end
			return Line{Head: head, Size: size}, nil
		}
		if scratch == nil {
			scratch = blocks.Get().(*block)
			scratch.refs.Store(1)
			if r.blk != nil {
				r.blk.release()
			}
			r.blk = scratch
		}
		n, err := r.r.Read(scratch.buf)
		r.buf, r.start, r.end = scratch.buf, 0, n
		if err != nil {
			r.err = err
		}
	}
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
