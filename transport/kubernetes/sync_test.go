package kubernetes

import (
	"bytes"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// A workspace goes to the pod and comes back as it was: files with their bytes and modes,
// directories, symlinks as links; a pipe is not sent.
func TestTarRoundTrip(t *testing.T) {
	src := t.TempDir()
	os.MkdirAll(filepath.Join(src, "d", "e"), 0o755)
	os.WriteFile(filepath.Join(src, "d", "f.txt"), []byte("bytes\n"), 0o640)
	os.WriteFile(filepath.Join(src, "run.sh"), []byte("#!/bin/sh\n"), 0o755)
	os.Symlink("d/f.txt", filepath.Join(src, "link"))
	if err := syscall.Mkfifo(filepath.Join(src, "pipe"), 0o600); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := writeTar(&buf, src); err != nil {
		t.Fatal(err)
	}
	dst := t.TempDir()
	if err := readTar(&buf, dst); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{"d/f.txt": "bytes\n", "run.sh": "#!/bin/sh\n"} {
		b, err := os.ReadFile(filepath.Join(dst, name))
		if err != nil || string(b) != want {
			t.Errorf("%s: %q %v", name, b, err)
		}
		a, _ := os.Stat(filepath.Join(src, name))
		c, _ := os.Stat(filepath.Join(dst, name))
		if c == nil || a.Mode().Perm() != c.Mode().Perm() {
			t.Errorf("%s: mode %v, want %v", name, c, a.Mode())
		}
	}
	if l, err := os.Readlink(filepath.Join(dst, "link")); err != nil || l != "d/f.txt" {
		t.Errorf("link: %q %v", l, err)
	}
	if fi, err := os.Stat(filepath.Join(dst, "d", "e")); err != nil || !fi.IsDir() {
		t.Errorf("d/e: %v %v", fi, err)
	}
	if _, err := os.Lstat(filepath.Join(dst, "pipe")); !os.IsNotExist(err) {
		t.Errorf("a pipe was sent: %v", err)
	}
}
