package output

import (
	"bytes"
	"fmt"
	"io"
	"strings"
	"sync"
)

// Window is an io.Writer that keeps the window its Limit allows of everything written to it
// and counts the rest. At any moment Text is the window of all that was written so far,
// exactly as Bound gives it for the whole text at once, however the writes were chunked.
//
// A tail stores at most twice the byte bound: once more would be held it drops the front of
// its store, keeping the last Bytes bytes (and, with a line bound, the last Lines lines),
// which hold every byte of any later window. A head stores the byte bound plus one byte (to
// see whether its first line goes on) and then stops storing. The zero Window keeps
// everything.
//
// A Window is written from one goroutine but may be read from others meanwhile.
type Window struct {
	lim Limit // set at creation, never changed

	mu       sync.Mutex
	buf      []byte // guarded by mu; the stored part of the output (a prefix for a head, a suffix for a tail)
	midLine  bool   // guarded by mu; tail: buf[0] continues a line begun before it
	full     bool   // guarded by mu; head: the window is decided, nothing more is stored
	storedNL int    // guarded by mu; newlines in buf
	total    int64  // guarded by mu; bytes written
	totalNL  int64  // guarded by mu; newlines written
	endsLine bool   // guarded by mu; the last byte written was '\n'
}

var _ io.Writer = (*Window)(nil)

// NewWindow returns an empty window bounded by lim.
func NewWindow(lim Limit) *Window { return &Window{lim: lim} }

// Limit returns the window's bound.
func (w *Window) Limit() Limit { return w.lim }

// Write keeps what the window needs of p and counts all of it. It never fails.
func (w *Window) Write(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	nl := bytes.Count(p, newline)
	w.total += int64(len(p))
	w.totalNL += int64(nl)
	w.endsLine = p[len(p)-1] == '\n'
	switch {
	case w.lim.Unbounded():
		w.buf = append(w.buf, p...)
		w.storedNL += nl
	case w.lim.Mode == Head:
		w.storeHead(p)
	default:
		w.storeTail(p, nl)
	}
	return len(p), nil
}

// storeHead stores p until the head's window is decided: one byte past the byte bound, or
// the newline that ends the last line the line bound keeps.
func (w *Window) storeHead(p []byte) {
	if w.full {
		return
	}
	take := len(p)
	if w.lim.Bytes > 0 {
		take = min(take, w.lim.Bytes+1-len(w.buf))
	}
	if w.lim.Lines > 0 {
		// Stop after the newline that completes the last line the bound keeps.
		need, off := w.lim.Lines-w.storedNL, 0
		for need > 0 && off < take {
			i := bytes.IndexByte(p[off:take], '\n')
			if i < 0 {
				break
			}
			off += i + 1
			need--
		}
		if need == 0 {
			take = off
		}
	}
	w.buf = grow(w.buf, take, w.lim.Bytes+1)
	w.buf = append(w.buf, p[:take]...)
	w.storedNL += bytes.Count(p[:take], newline)
	if (w.lim.Bytes > 0 && len(w.buf) > w.lim.Bytes) || (w.lim.Lines > 0 && w.storedNL >= w.lim.Lines) {
		w.full = true
	}
}

// storeTail appends p to the store. With a byte bound the store never holds more than twice
// it: the part of store+p that any later window can reach is its last Bytes bytes, so when
// store+p would be over twice the bound, the front of the store (or all of it, and the front
// of p) goes first. With a line bound, a store over twice the bound in lines keeps its last
// Lines lines.
func (w *Window) storeTail(p []byte, nl int) {
	b := w.lim.Bytes
	if b > 0 && len(w.buf)+len(p) > 2*b {
		if len(p) >= b {
			// Only the last b bytes of p can be reached: the store and the front of p go.
			cut := len(p) - b
			if cut > 0 {
				w.midLine = p[cut-1] != '\n'
			} else if len(w.buf) > 0 {
				w.midLine = w.buf[len(w.buf)-1] != '\n'
			}
			p = p[cut:]
			nl = bytes.Count(p, newline)
			w.buf, w.storedNL = w.buf[:0], 0
		} else {
			w.dropFront(len(w.buf) - (b - len(p)))
		}
	}
	w.buf = grow(w.buf, len(p), 2*b)
	w.buf = append(w.buf, p...)
	w.storedNL += nl
	if l := w.lim.Lines; l > 0 && w.storedNL > 2*l {
		// Keep the last l lines: start after the newline ending the line before them. The
		// store's own last newline, if it ends the store, ends the last line.
		end := len(w.buf)
		if w.buf[end-1] == '\n' {
			end--
		}
		for range l {
			end = bytes.LastIndexByte(w.buf[:end], '\n')
		}
		w.dropFront(end + 1)
	}
}

// grow makes room for n more bytes in buf, doubling its capacity but never past most (when
// most > 0), so a store costs the memory of its bound and no more.
func grow(buf []byte, n, most int) []byte {
	need := len(buf) + n
	if need <= cap(buf) {
		return buf
	}
	c := max(need, 2*cap(buf), 512)
	if most > 0 {
		c = max(min(c, most), need)
	}
	return append(make([]byte, 0, c), buf...)
}

// dropFront removes the first n bytes of the store.
func (w *Window) dropFront(n int) {
	if n <= 0 {
		return
	}
	w.midLine = w.buf[n-1] != '\n'
	w.storedNL -= bytes.Count(w.buf[:n], newline)
	w.buf = w.buf[:copy(w.buf, w.buf[n:])]
}

// span is the window within the store. w.mu must be held.
func (w *Window) span() span {
	switch {
	case w.lim.Unbounded():
		return span{0, len(w.buf), w.totalLines()}
	case w.lim.Mode == Head:
		return headSpan(w.buf, w.lim, int64(len(w.buf)) == w.total)
	default:
		return tailSpan(w.buf, w.lim, !w.midLine)
	}
}

// totalLines counts the lines written. w.mu must be held.
func (w *Window) totalLines() int64 {
	if w.total > 0 && !w.endsLine {
		return w.totalNL + 1
	}
	return w.totalNL
}

// Snapshot is a window's state read at one moment.
type Snapshot struct {
	Text         string `json:"text"`             // the window
	TotalBytes   int64  `json:"total_bytes"`      // written
	TotalLines   int64  `json:"total_lines"`      // written
	DroppedBytes int64  `json:"dropped_bytes"`    // outside the window
	DroppedLines int64  `json:"dropped_lines"`    // of which the window keeps no byte
	Notice       string `json:"notice,omitempty"` // the truncation notice, "" when nothing was dropped
}

// Whole is the snapshot of a text kept whole (one the host wrote itself, say).
func Whole(text string) Snapshot {
	return Snapshot{Text: text, TotalBytes: int64(len(text)), TotalLines: countLines([]byte(text))}
}

// Snapshot returns the window's text, counts and notice, all read at one moment.
func (w *Window) Snapshot() Snapshot {
	w.mu.Lock()
	defer w.mu.Unlock()
	s := w.span()
	kept := int64(s.end - s.start)
	tl := w.totalLines()
	return Snapshot{
		Text:         string(w.buf[s.start:s.end]),
		TotalBytes:   w.total,
		TotalLines:   tl,
		DroppedBytes: w.total - kept,
		DroppedLines: tl - s.lines,
		Notice:       notice(w.lim, w.total-kept, tl-s.lines, kept, s.lines),
	}
}

// Text returns the window of everything written so far.
func (w *Window) Text() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	s := w.span()
	return string(w.buf[s.start:s.end])
}

// Total returns the bytes and lines written so far.
func (w *Window) Total() (bytes, lines int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.total, w.totalLines()
}

// Dropped returns the bytes outside the window and the lines of which it keeps no byte.
func (w *Window) Dropped() (bytes, lines int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	s := w.span()
	return w.total - int64(s.end-s.start), w.totalLines() - s.lines
}

// Notice returns the one truncation notice, stating exactly the bytes and lines dropped, or
// "" when nothing was.
func (w *Window) Notice() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	s := w.span()
	kept := int64(s.end - s.start)
	return notice(w.lim, w.total-kept, w.totalLines()-s.lines, kept, s.lines)
}

// notice words a truncation: what was dropped, from which end, and what was kept.
func notice(lim Limit, droppedBytes, droppedLines, keptBytes, keptLines int64) string {
	if droppedBytes == 0 {
		return ""
	}
	from, which := "start", "last"
	if lim.Mode == Head {
		from, which = "end", "first"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "[output truncated: %s and %s dropped from the %s; kept the %s %s and %s",
		count(droppedBytes, "byte"), count(droppedLines, "line"), from, which,
		count(keptLines, "line"), count(keptBytes, "byte"))
	var bounds []string
	if lim.Lines > 0 {
		bounds = append(bounds, count(int64(lim.Lines), "line"))
	}
	if lim.Bytes > 0 {
		bounds = append(bounds, count(int64(lim.Bytes), "byte"))
	}
	fmt.Fprintf(&b, " (limit %s)]", strings.Join(bounds, ", "))
	return b.String()
}

func count(n int64, unit string) string {
	if n == 1 {
		return "1 " + unit
	}
	return fmt.Sprintf("%d %ss", n, unit)
}
