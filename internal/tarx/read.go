package tarx

import (
	"archive/tar"
	"bytes"
	"io"
	"os"
	"strings"
)

// Sparse says whether an entry is a sparse file (GNU's old type, or a PAX header's
// GNU.sparse records): archive/tar reads its holes back as zeros, so a few kilobytes of
// stream would stand for terabytes. A stream from a sandbox has no need of one (the tar
// commands Paddock runs do not write them), and its reader refuses it.
func Sparse(h *tar.Header) bool {
	if h.Typeflag == tar.TypeGNUSparse {
		return true
	}
	for k := range h.PAXRecords {
		if strings.HasPrefix(k, "GNU.sparse.") {
			return true
		}
	}
	return false
}

// holeChunk is the size of the runs of zeros CopyHoles leaves as holes.
const holeChunk = 64 << 10

// CopyHoles copies src to the new, empty file dst, leaving every whole chunk of zeros as a
// hole: a file a sandbox made with truncate, or zeros it sent, takes time to copy but no
// disk. It returns the bytes copied.
func CopyHoles(dst *os.File, src io.Reader) (int64, error) {
	buf := make([]byte, holeChunk)
	zero := make([]byte, holeChunk)
	var n int64
	hole := false
	for {
		m, err := fill(src, buf)
		if m > 0 {
			if m == holeChunk && bytes.Equal(buf, zero) {
				if _, serr := dst.Seek(int64(m), io.SeekCurrent); serr != nil {
					return n, serr
				}
				hole = true
			} else {
				if _, werr := dst.Write(buf[:m]); werr != nil {
					return n, werr
				}
				hole = false
			}
			n += int64(m)
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return n, err
		}
	}
	if hole {
		// A file that ends in a hole has its size only once it is truncated to it.
		if err := dst.Truncate(n); err != nil {
			return n, err
		}
	}
	return n, nil
}

// fill reads into buf until it is full or src fails; io.EOF only when src ended (unlike
// io.ReadFull, a source's own io.ErrUnexpectedEOF, a cut stream, stays an error).
func fill(src io.Reader, buf []byte) (int, error) {
	n := 0
	for n < len(buf) {
		m, err := src.Read(buf[n:])
		n += m
		if err != nil {
			return n, err
		}
	}
	return n, nil
}
