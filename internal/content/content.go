// Package content compares the bytes of two open files, as a hand-back must when stat facts
// cannot tell: cancellable, and led by the files' maps of data and holes, so that two
// sparse files of a terabyte cost what their data does, not what their length does.
package content

import (
	"bytes"
	"context"
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// chunk is how much of each file is read at once, and how often ctx is checked.
const chunk = 1 << 20

// Equal reports whether the regular files a and b hold the same bytes. A run where both
// files are holes is equal zeros and is not read; a run where one is a hole is compared
// with zeros read from the other alone. Where the filesystem cannot tell data from holes,
// every byte is read. ctx is checked before each chunk.
func Equal(ctx context.Context, a, b *os.File) (bool, error) {
	sa, err := a.Stat()
	if err != nil {
		return false, err
	}
	sb, err := b.Stat()
	if err != nil {
		return false, err
	}
	if sa.Size() != sb.Size() {
		return false, nil
	}
	size := sa.Size()
	fa, fb := int(a.Fd()), int(b.Fd())
	bufA, bufB := make([]byte, chunk), make([]byte, chunk)
	for off := int64(0); off < size; {
		if err := ctx.Err(); err != nil {
			return false, err
		}
		da, db := nextData(fa, off, size), nextData(fb, off, size)
		d := min(da, db) // [off, d) is a hole in both
		if d >= size {
			break
		}
		// From d to the next edge of either map, each file is all data or all hole.
		ea, eb := da, db
		if da == d {
			ea = nextHole(fa, d, size)
		}
		if db == d {
			eb = nextHole(fb, d, size)
		}
		end := min(ea, eb, size)
		for off = d; off < end; {
			if err := ctx.Err(); err != nil {
				return false, err
			}
			n := min(int64(chunk), end-off)
			var x, y []byte
			if da == d {
				x, err = readAt(fa, bufA[:n], off)
			}
			if db == d && err == nil {
				y, err = readAt(fb, bufB[:n], off)
			}
			switch {
			case errors.Is(err, errShrank):
				return false, nil
			case err != nil:
				return false, err
			case x == nil:
				x = zero[:n]
			case y == nil:
				y = zero[:n]
			}
			if !bytes.Equal(x, y) {
				return false, nil
			}
			off += n
		}
	}
	return true, nil
}

// nextData is where the first data at or after off begins, size when there is none; off
// itself where the filesystem cannot tell.
func nextData(fd int, off, size int64) int64 {
	d, err := unix.Seek(fd, off, unix.SEEK_DATA)
	switch {
	case err == unix.ENXIO:
		return size
	case err != nil:
		return off
	}
	return min(d, size)
}

// nextHole is where the first hole at or after off begins (size at the end); size where
// the filesystem cannot tell.
func nextHole(fd int, off, size int64) int64 {
	h, err := unix.Seek(fd, off, unix.SEEK_HOLE)
	if err != nil {
		return size
	}
	return min(h, size)
}

// readAt fills buf from fd at off; a file that ends before it is full (it shrank while
// compared) gives errShrank.
func readAt(fd int, buf []byte, off int64) ([]byte, error) {
	for got := 0; got < len(buf); {
		n, err := unix.Pread(fd, buf[got:], off+int64(got))
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, err
		}
		if n == 0 {
			return nil, errShrank
		}
		got += n
	}
	return buf, nil
}

// errShrank is a file shorter than its size as compared: not the same as the other.
var errShrank = errors.New("the file shrank while compared")

// zero is a chunk of the zeros a hole reads as.
var zero [chunk]byte
