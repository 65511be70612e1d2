package tarx

import (
	"archive/tar"
	"bytes"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// The sparse archives in testdata (GNU tar's PAX and old GNU formats) each stand for a file
// of a terabyte in ten kilobytes: both are told apart, a plain file is not.
func TestSparse(t *testing.T) {
	for _, name := range []string{"sparse-1t.tar", "gnu-sparse-1t.tar"} {
		f, err := os.Open(filepath.Join("testdata", name))
		if err != nil {
			t.Fatal(err)
		}
		h, err := tar.NewReader(f).Next()
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		if !Sparse(h) {
			t.Errorf("%s: %+v is not told sparse", name, h)
		}
	}
	if Sparse(&tar.Header{Name: "f", Typeflag: tar.TypeReg, Size: 1 << 40, PAXRecords: map[string]string{"comment": "GNU.sparse.map"}}) {
		t.Error("a plain file is told sparse")
	}
}

// CopyHoles writes what it reads, byte for byte, the runs of zeros as holes (a trailing one
// included, the size right), and a cut stream stays an error.
func TestCopyHoles(t *testing.T) {
	var src bytes.Buffer
	src.Write(bytes.Repeat([]byte("a"), holeChunk))
	src.Write(make([]byte, 8*holeChunk))
	src.WriteString("b")
	src.Write(make([]byte, 4*holeChunk+17))
	src.Write(make([]byte, 4*holeChunk))
	want := src.Bytes()
	p := filepath.Join(t.TempDir(), "f")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	n, err := CopyHoles(f, bytes.NewReader(want))
	f.Close()
	if err != nil || n != int64(len(want)) {
		t.Fatalf("copied %d of %d: %v", n, len(want), err)
	}
	got, err := os.ReadFile(p)
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("the copy differs (%d bytes, want %d): %v", len(got), len(want), err)
	}
	var st syscall.Stat_t
	if err := syscall.Stat(p, &st); err != nil {
		t.Fatal(err)
	}
	if used := st.Blocks * 512; used > 4*holeChunk {
		t.Errorf("%d bytes of disk for %d bytes, 2 chunks of them not zero", used, len(want))
	}

	cut := io.MultiReader(bytes.NewReader(make([]byte, 3*holeChunk)), errReader{io.ErrUnexpectedEOF})
	f, err = os.Create(filepath.Join(t.TempDir(), "g"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := CopyHoles(f, cut); err != io.ErrUnexpectedEOF {
		t.Errorf("a cut stream: %v", err)
	}
}

type errReader struct{ err error }

func (r errReader) Read([]byte) (int, error) { return 0, r.err }
