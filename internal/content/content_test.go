package content

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
)

// layout writes a file of size bytes at name: holes, save for each run of data.
func layout(t *testing.T, name string, size int64, runs map[int64][]byte) *os.File {
	t.Helper()
	f, err := os.Create(name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	for off, b := range runs {
		if _, err := f.WriteAt(b, off); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Truncate(size); err != nil {
		t.Fatal(err)
	}
	return f
}

// Equal says what comparing every byte says, whatever the files' maps of data and holes:
// data written in different places, zeros written as data against holes, a byte apart.
func TestEqualIsBytesEqual(t *testing.T) {
	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 300 {
		size := rng.Int64N(3 << 20)
		ra, rb := map[int64][]byte{}, map[int64][]byte{}
		for range rng.IntN(6) {
			off := rng.Int64N(size + 1)
			b := make([]byte, rng.IntN(200<<10))
			switch rng.IntN(3) {
			case 0: // the same bytes in both
				for j := range b {
					b[j] = byte(rng.IntN(3))
				}
				ra[off], rb[off] = b, b
			case 1: // zeros written in one only
				ra[off] = b
			default: // bytes in one only
				for j := range b {
					b[j] = byte(rng.IntN(2))
				}
				rb[off] = b
			}
		}
		a := layout(t, filepath.Join(dir, "a"), size, ra)
		b := layout(t, filepath.Join(dir, "b"), size, rb)
		ba, _ := os.ReadFile(a.Name())
		bb, _ := os.ReadFile(b.Name())
		got, err := Equal(context.Background(), a, b)
		if err != nil {
			t.Fatal(err)
		}
		if want := bytes.Equal(ba, bb); got != want {
			t.Fatalf("case %d (size %d): Equal %v, bytes.Equal %v", i, size, got, want)
		}
		os.Remove(a.Name())
		os.Remove(b.Name())
	}
}

// Two sparse files of 15 TiB with their data in the same places cost what their data does.
func TestEqualReadsOnlyData(t *testing.T) {
	dir := t.TempDir()
	runs := map[int64][]byte{8 << 40: []byte("data in the middle"), 15<<40 - 5: []byte("end")}
	a := layout(t, filepath.Join(dir, "a"), 15<<40, runs)
	b := layout(t, filepath.Join(dir, "b"), 15<<40, runs)
	if eq, err := Equal(context.Background(), a, b); err != nil || !eq {
		t.Fatalf("two equal sparse files: equal %v, %v", eq, err)
	}
	runs[15<<40-5] = []byte("END")
	c := layout(t, filepath.Join(dir, "c"), 15<<40, runs)
	if eq, err := Equal(context.Background(), a, c); err != nil || eq {
		t.Fatalf("files a byte apart at their end: equal %v, %v", eq, err)
	}
}

// A cancelled comparison stops before its next chunk with the context's error.
func TestEqualCancelled(t *testing.T) {
	dir := t.TempDir()
	runs := map[int64][]byte{0: bytes.Repeat([]byte("x"), 3<<20)}
	a := layout(t, filepath.Join(dir, "a"), 3<<20, runs)
	b := layout(t, filepath.Join(dir, "b"), 3<<20, runs)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Equal(ctx, a, b); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled: %v", err)
	}
}
