package ssh

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// member is one entry of a tar stream a box could send.
type member struct {
	name, link string
	typ        byte
	mode       int64
	body       string
}

func tarOf(t testing.TB, ms ...member) []byte {
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for _, m := range ms {
		h := &tar.Header{Name: m.name, Linkname: m.link, Typeflag: m.typ, Mode: m.mode, Size: int64(len(m.body)), Format: tar.FormatGNU}
		if m.typ != tar.TypeReg {
			h.Size = 0
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		tw.Write([]byte(m.body))
	}
	tw.Close()
	return b.Bytes()
}

const secret = "the host's secret\n"

// fetchInto runs a hand-back's fetch of the tar stream into a fresh copy, beside a victim
// directory it must not touch, and fails the test if anything outside the copy changed or
// the victim's content reached the copy.
func fetchInto(t *testing.T, stream []byte) {
	outer := t.TempDir()
	victim := filepath.Join(outer, "victim")
	os.Mkdir(victim, 0o750)
	os.WriteFile(filepath.Join(victim, "file"), []byte(secret), 0o640)
	os.Mkdir(filepath.Join(victim, "sub"), 0o750)
	dir := filepath.Join(outer, "ws")
	s := &Sync{Dir: dir, Remote: "/box/ws", sent: map[string]item{}}
	if err := os.MkdirAll(s.Copy(), 0o755); err != nil {
		t.Fatal(err)
	}
	walk := func(_ context.Context, _ string, fn func(listed) error) error {
		return readTar(bytes.NewReader(stream), fn)
	}
	s.fetch(context.Background(), walk) // an error is fine; a write outside is not

	want := map[string]string{"victim": "dir -rwxr-x---", "victim/file": "-rw-r----- " + secret, "victim/sub": "dir -rwxr-x---", "ws": "dir", "ws/copy": "dir"}
	filepath.WalkDir(outer, func(p string, d fs.DirEntry, err error) error {
		rel, _ := filepath.Rel(outer, p)
		if err != nil || rel == "." {
			return nil
		}
		if strings.HasPrefix(rel, "ws/copy/") {
			if fi, err := os.Lstat(p); err == nil && fi.Mode().IsRegular() {
				if b, _ := os.ReadFile(p); strings.Contains(string(b), secret) {
					t.Errorf("the victim's content reached the copy at %s", rel)
				}
			}
			return nil
		}
		fi, _ := os.Lstat(p)
		got := "dir"
		switch {
		case rel == "ws" || rel == "ws/copy":
		case fi.IsDir():
			got = "dir " + fi.Mode().Perm().String()
		case fi.Mode().IsRegular():
			b, _ := os.ReadFile(p)
			got = fi.Mode().String() + " " + string(b)
		default:
			got = fi.Mode().String()
		}
		if want[rel] != got {
			t.Errorf("outside the copy, %s is %q; want %q", rel, got, want[rel])
		}
		delete(want, rel)
		return nil
	})
	for rel := range want {
		t.Errorf("outside the copy, %s is gone", rel)
	}
}

// Whatever tar stream the box sends back, the hand-back's fetch writes, changes and reads
// nothing outside the local copy: not above it, not through a symlink the box made in it.
func FuzzFetch(f *testing.F) {
	for _, ms := range [][]member{
		{{name: "./a", typ: tar.TypeReg, mode: 0o644, body: "a\n"}, {name: "./d/", typ: tar.TypeDir, mode: 0o755}, {name: "./d/b", typ: tar.TypeLink, link: "./a"}},
		{{name: "../../victim/file", typ: tar.TypeReg, mode: 0o644, body: "overwritten\n"}},
		{{name: "/victim/x", typ: tar.TypeReg, mode: 0o644, body: "x\n"}},
		{{name: "./l", typ: tar.TypeSymlink, link: "../../victim"}, {name: "./l/file", typ: tar.TypeReg, mode: 0o644, body: "through a link\n"}},
		{{name: "./l", typ: tar.TypeSymlink, link: "../../victim"}, {name: "./l/new", typ: tar.TypeDir, mode: 0o777}},
		// A directory listed, then listed again as a symlink out: its listed subdirectory's
		// mode must not be given through the link.
		{{name: "./d/", typ: tar.TypeDir, mode: 0o755}, {name: "./d/sub/", typ: tar.TypeDir, mode: 0o777}, {name: "./d", typ: tar.TypeSymlink, link: "../../victim"}},
		// A file, then a symlink out at its name, then a hard link to the name: the content
		// must not be read through the link.
		{{name: "./a", typ: tar.TypeReg, mode: 0o644, body: "a\n"}, {name: "./a", typ: tar.TypeSymlink, link: "../../victim/file"}, {name: "./b", typ: tar.TypeLink, link: "./a"}},
		{{name: "./d/", typ: tar.TypeDir, mode: 0o755}, {name: "./d/a", typ: tar.TypeReg, mode: 0o644, body: "a\n"}, {name: "./d", typ: tar.TypeSymlink, link: "../../victim"}, {name: "./b", typ: tar.TypeLink, link: "./d/file"}},
		{{name: "./d/", typ: tar.TypeDir, mode: 0o755}, {name: "./d/file", typ: tar.TypeReg, mode: 0o644, body: "a\n"}, {name: "./d", typ: tar.TypeSymlink, link: "../../victim"}, {name: "./b", typ: tar.TypeLink, link: "./d/file"}},
		{{name: "./b", typ: tar.TypeLink, link: "../../victim/file"}},
		// Names of one file, linked in the copy: to the first, to a link, and one whose
		// target is then replaced by a symlink out, which must not be linked.
		{{name: "./a", typ: tar.TypeReg, mode: 0o644, body: "a\n"}, {name: "./b", typ: tar.TypeLink, link: "./a"}, {name: "./c", typ: tar.TypeLink, link: "./b"}, {name: "./a", typ: tar.TypeSymlink, link: "../../victim/file"}, {name: "./e", typ: tar.TypeLink, link: "./a"}},
	} {
		f.Add(tarOf(f, ms...))
	}
	f.Fuzz(func(t *testing.T, stream []byte) { fetchInto(t, stream) })
}

// A sparse entry (a file of a terabyte in ten kilobytes of GNU tar's stream) is refused
// before a byte of it is read: its holes would come back as zeros.
func TestReadTarRefusesSparse(t *testing.T) {
	for _, name := range []string{"sparse-1t.tar", "gnu-sparse-1t.tar"} {
		b, err := os.ReadFile(filepath.Join("..", "..", "internal", "tarx", "testdata", name))
		if err != nil {
			t.Fatal(err)
		}
		called := false
		err = readTar(bytes.NewReader(b), func(listed) error { called = true; return nil })
		if err == nil || !strings.Contains(err.Error(), "sparse") || called {
			t.Errorf("%s: %v (an entry handed on: %v)", name, err, called)
		}
	}
}

// A file the box sends with many names is written once: each later name's link header
// makes a hard link to the file already in the copy, not a copy of its bytes.
func TestFetchLinksNamesOfOneFile(t *testing.T) {
	body := strings.Repeat("the box's file\n", 64<<10) // about 1 MiB
	ms := []member{{name: "./a", typ: tar.TypeReg, mode: 0o644, body: body}, {name: "./d/", typ: tar.TypeDir, mode: 0o755}}
	for i := range 100 {
		ms = append(ms, member{name: fmt.Sprintf("./d/l%d", i), typ: tar.TypeLink, mode: 0o644, link: "./a"})
	}
	stream := tarOf(t, ms...)
	s := &Sync{Dir: t.TempDir(), Remote: "/box/ws", sent: map[string]item{}}
	if err := os.MkdirAll(s.Copy(), 0o755); err != nil {
		t.Fatal(err)
	}
	walk := func(_ context.Context, _ string, fn func(listed) error) error {
		return readTar(bytes.NewReader(stream), fn)
	}
	if err := s.fetch(context.Background(), walk); err != nil {
		t.Fatal(err)
	}
	a, err := os.Lstat(filepath.Join(s.Copy(), "a"))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 100 {
		name := filepath.Join(s.Copy(), "d", fmt.Sprintf("l%d", i))
		fi, err := os.Lstat(name)
		if err != nil {
			t.Fatal(err)
		}
		if !os.SameFile(a, fi) {
			t.Fatalf("%s is a file of its own, not a link to a", name)
		}
	}
	if b, err := os.ReadFile(filepath.Join(s.Copy(), "d", "l99")); err != nil || string(b) != body {
		t.Fatalf("d/l99 does not hold the box's file (%v)", err)
	}
}

// sameContent opens no symlink, and compares sparse files by their data: two of 15 TiB
// with the same data are the same at once.
func TestSameContent(t *testing.T) {
	dir := t.TempDir()
	sparse := func(name, data string) string {
		p := filepath.Join(dir, name)
		f, err := os.Create(p)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if _, err := f.WriteAt([]byte(data), 7<<40); err != nil {
			t.Fatal(err)
		}
		if err := f.Truncate(15 << 40); err != nil {
			t.Fatal(err)
		}
		return p
	}
	a, b, c := sparse("a", "data"), sparse("b", "data"), sparse("c", "DATA")
	ctx := context.Background()
	if !sameContent(ctx, a, b) || sameContent(ctx, a, c) {
		t.Fatal("sparse files compared wrong")
	}
	l := filepath.Join(dir, "l")
	if err := os.Symlink(a, l); err != nil {
		t.Fatal(err)
	}
	if sameContent(ctx, l, b) || sameContent(ctx, b, l) {
		t.Fatal("a symlink compared as the file it names")
	}
}
