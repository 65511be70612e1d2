package orchestrator

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// hangBound is how long a file access may take before a test calls it blocked. It only
// turns a hang into a failure: a passing access returns at once.
const hangBound = 20 * time.Second

// releaseFIFO opens a FIFO for writing and reading once the test ends, so that a reader a
// failing test left blocked in open goes free.
func releaseFIFO(t *testing.T, p string) {
	t.Cleanup(func() {
		if fd, err := unix.Open(p, unix.O_RDWR|unix.O_NONBLOCK, 0); err == nil {
			unix.Close(fd)
		}
	})
}

// Nothing but a regular file is read or written, and refusing the rest never blocks: a FIFO
// (no writer: an open for reading would wait for one), a unix socket, a device node, a
// directory, each as the final name, are refused with not_file (is_dir) at once.
func TestFSNotFile(t *testing.T) {
	f := newFSFixture(t)
	fifo := filepath.Join(f.ws, "fifo")
	if err := unix.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	releaseFIFO(t, fifo)
	l, err := net.Listen("unix", filepath.Join(f.ws, "sock"))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	// A character device made in the workspace (as root it can be: the kernel's own
	// /dev/zero, 1:5).
	dev := filepath.Join(f.ws, "zero")
	devErr := unix.Mknod(dev, unix.S_IFCHR|0o666, int(unix.Mkdev(1, 5)))
	for _, tc := range []struct {
		typ  string
		body any
		code string
	}{
		{TypeFSRead, FSReadRequest{Path: "/work/fifo"}, FSNotFile},
		{TypeFSWrite, FSWriteRequest{Path: "/work/fifo", Content: "x"}, FSNotFile},
		{TypeFSRead, FSReadRequest{Path: "/work/sock"}, FSNotFile},
		{TypeFSWrite, FSWriteRequest{Path: "/work/sock", Content: "x"}, FSNotFile},
		{TypeFSRead, FSReadRequest{Path: "/work/zero"}, FSNotFile},
		{TypeFSWrite, FSWriteRequest{Path: "/work/zero", Content: "x"}, FSNotFile},
		{TypeFSRead, FSReadRequest{Path: "/work/sub"}, FSIsDir},
		{TypeFSWrite, FSWriteRequest{Path: "/work/sub", Content: "x"}, FSIsDir},
		{TypeFSRead, FSReadRequest{Path: "/work"}, FSIsDir},
		{TypeFSWrite, FSWriteRequest{Path: "/work", Content: "x"}, FSIsDir},
	} {
		if tc.body == (FSReadRequest{Path: "/work/zero"}) || tc.body == (FSWriteRequest{Path: "/work/zero", Content: "x"}) {
			if devErr != nil {
				t.Errorf("mknod: %v (this test runs as root)", devErr)
				continue
			}
		}
		_, err := f.callBounded(t, tc.typ, tc.body)
		if !errors.Is(err, &FSError{Reason: tc.code}) {
			t.Errorf("%s %v: %v, want %s", tc.typ, tc.body, err, tc.code)
		}
	}
	for _, p := range []string{fifo, dev} {
		if fi, err := os.Lstat(p); err == nil && fi.Mode().IsRegular() {
			t.Errorf("%s was replaced by a file", p)
		}
	}
}

// A FIFO put in the file's place while the access is judged neither blocks the host nor is
// written: a read reads the file that was opened; a write finds the FIFO before it renames,
// and refuses.
func TestFSFIFOSwappedInWhileJudged(t *testing.T) {
	for _, write := range []bool{false, true} {
		f := newFSFixture(t)
		target, fifo := filepath.Join(f.ws, "a.txt"), filepath.Join(f.ws, "fifo")
		if err := unix.Mkfifo(fifo, 0o644); err != nil {
			t.Fatal(err)
		}
		releaseFIFO(t, fifo)
		releaseFIFO(t, target)
		f.h = FSHandlers(FSConfig{PathMap: f.pm, Guard: func(context.Context, FSOp) error {
			return exchange(target, fifo)
		}})
		if write {
			_, err := f.callBounded(t, TypeFSWrite, FSWriteRequest{Path: "/work/a.txt", Content: "x"})
			if !errors.Is(err, &FSError{Reason: FSNotFile}) && !errors.Is(err, &FSError{Reason: FSChanged}) {
				t.Errorf("a write over a FIFO swapped in: %v", err)
			}
			if fi, err := os.Lstat(target); err != nil || fi.Mode()&os.ModeNamedPipe == 0 {
				t.Errorf("the FIFO swapped in was replaced: %v %v", fi.Mode(), err)
			}
			continue
		}
		r, err := f.callBounded(t, TypeFSRead, FSReadRequest{Path: "/work/a.txt"})
		if err != nil || r.Content != "alpha\n" {
			t.Errorf("a read with a FIFO swapped in: %+v, %v", r, err)
		}
	}
}

// Under the identity map (the local transport) a symlink in the workspace may lead to a
// device or a FIFO anywhere: what it leads to is refused as not a file, at once.
func TestFSNotFileThroughLink(t *testing.T) {
	base, _ := filepath.EvalSymlinks(t.TempDir())
	fifo := filepath.Join(base, "fifo")
	if err := unix.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	releaseFIFO(t, fifo)
	ws := filepath.Join(base, "ws")
	os.Mkdir(ws, 0o755)
	os.Symlink("/dev/zero", filepath.Join(ws, "zero"))
	os.Symlink(fifo, filepath.Join(ws, "fifo"))
	f := &fsFixture{ws: ws, h: FSHandlers(FSConfig{Roots: []string{ws}, Env: []string{"HOME=" + base}})}
	for _, name := range []string{"zero", "fifo"} {
		_, err := f.callBounded(t, TypeFSRead, FSReadRequest{Path: filepath.Join(ws, name)})
		if !errors.Is(err, &FSError{Reason: FSNotFile}) {
			t.Errorf("read %s: %v, want not_file", name, err)
		}
	}
}
