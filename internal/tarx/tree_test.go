package tarx

import (
	"archive/tar"
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// A tree goes through a tar stream and comes back as it was: files with their bytes and modes,
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
	if err := WriteTree(&buf, src, TreeOptions{AnyUser: true, Plain: true}); err != nil {
		t.Fatal(err)
	}
	dst := t.TempDir()
	if err := ReadTree(&buf, dst, "the test's tree"); err != nil {
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

// FuzzReadTree: whatever tar stream a sandbox sends, nothing is made outside the directory it
// is read into, and what is made inside is only directories, regular files and symlinks,
// none of them reached through a symlink.
func FuzzReadTree(f *testing.F) {
	seed := func(entries ...*tar.Header) []byte {
		var b bytes.Buffer
		tw := tar.NewWriter(&b)
		for _, h := range entries {
			tw.WriteHeader(h)
			if h.Typeflag == tar.TypeReg {
				tw.Write(make([]byte, h.Size))
			}
		}
		tw.Close()
		return b.Bytes()
	}
	dir := func(n string) *tar.Header { return &tar.Header{Name: n, Typeflag: tar.TypeDir, Mode: 0o755} }
	file := func(n string) *tar.Header { return &tar.Header{Name: n, Typeflag: tar.TypeReg, Mode: 0o644, Size: 3} }
	link := func(n, to string) *tar.Header { return &tar.Header{Name: n, Typeflag: tar.TypeSymlink, Linkname: to} }
	f.Add(seed(dir("./"), dir("./d/"), file("./d/f"), link("./l", "d/f")))
	f.Add(seed(file("../escape")))
	f.Add(seed(file("/abs")))
	f.Add(seed(link("up", ".."), file("up/x")))
	f.Add(seed(link("d", "/tmp"), dir("d/"), file("d/x")))
	f.Add(seed(dir("d/"), link("d", "/")))
	f.Add(seed(file("f"), file("f")))
	f.Add(seed(&tar.Header{Name: "h", Typeflag: tar.TypeLink, Linkname: "/etc/passwd"}, file("h")))
	f.Add(seed(&tar.Header{Name: "dev", Typeflag: tar.TypeChar, Devmajor: 1, Devminor: 3}))
	f.Add(seed(&tar.Header{Name: "s", Typeflag: tar.TypeReg, Mode: 0o4755, Size: 3}))
	for _, name := range []string{"sparse-1t.tar", "gnu-sparse-1t.tar"} {
		b, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		top := t.TempDir()
		root := filepath.Join(top, "root")
		if err := os.Mkdir(root, 0o700); err != nil {
			t.Fatal(err)
		}
		_ = ReadTree(bytes.NewReader(data), root, "the fuzzer's tree")
		// Nothing beside root.
		if es, _ := os.ReadDir(top); len(es) != 1 {
			t.Fatalf("made beside the root: %v", es)
		}
		filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				t.Fatal(err)
			}
			fi, err := d.Info()
			if err != nil {
				t.Fatal(err)
			}
			switch m := fi.Mode(); {
			case m.IsDir(), m&fs.ModeSymlink != 0:
			case m.IsRegular():
				if m&(fs.ModeSetuid|fs.ModeSetgid) != 0 {
					t.Fatalf("%s is set-id: %v", p, m)
				}
			default:
				t.Fatalf("%s is %v", p, m)
			}
			return nil
		})
	})
}

// A sparse entry (a file of a terabyte in ten kilobytes of GNU tar's stream) is refused
// before a byte of it is written: its holes would come back as zeros.
func TestReadTreeRefusesSparse(t *testing.T) {
	for _, name := range []string{"sparse-1t.tar", "gnu-sparse-1t.tar"} {
		b, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			t.Fatal(err)
		}
		root := t.TempDir()
		if err := ReadTree(bytes.NewReader(b), root, "the test's tree"); err == nil || !strings.Contains(err.Error(), "sparse") {
			t.Errorf("%s: %v", name, err)
		}
		if es, _ := os.ReadDir(root); len(es) != 0 {
			t.Errorf("%s: made %v", name, es)
		}
	}
}
