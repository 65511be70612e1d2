package workspace

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/go-git/go-git/v5/plumbing/format/gitignore"
)

// A manifest reads back exactly as written.
func TestManifestRoundTrip(t *testing.T) {
	parent, dir := filepath.Join(t.TempDir(), "p"), filepath.Join(t.TempDir(), "w")
	writeTree(t, parent, spec("a=1", "b c/d\ne=2", "l->a", "e/", "x*=run"))
	if _, err := Clone(context.Background(), parent, dir, Options{}); err != nil {
		t.Fatal(err)
	}
	m, err := readManifest(dir)
	if err != nil {
		t.Fatal(err)
	}
	var paths []string
	for _, r := range m.records {
		paths = append(paths, r.Path)
	}
	if want := []string{"a", "b c", "b c/d\ne", "e", "l", "x"}; !reflect.DeepEqual(paths, want) {
		t.Errorf("paths %q, want %q", paths, want)
	}
	name := filepath.Join(t.TempDir(), "m")
	if err := writeManifest(name, m); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(name)
	m2, err := parseManifest(data)
	if err != nil || !reflect.DeepEqual(m, m2) {
		t.Errorf("read back %+v, %v\nwant %+v", m2, err, m)
	}
}

// The manifest parser takes any bytes (the workspace directory is not trusted) without
// panicking; what it accepts holds only clean relative paths and writes back the same.
func FuzzManifest(f *testing.F) {
	f.Add([]byte("{\"version\":1,\"parent\":\"/p\",\"files\":1}\nf 33188 1 2 3 4 33188 1 2 3 5 a\x00d 16877 0 0 0 0 0 0 0 0 0 b\x00"))
	f.Add([]byte("{\"version\":1}\nL 41471 1 2 3 18446744073709551615 1 1 1 1 1 a/b\x00"))
	f.Add([]byte("{\"version\":1}\nf 1 1 1 1 1 1 1 1 1 1 ../x\x00"))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := parseManifest(data)
		if err != nil {
			return
		}
		for _, r := range m.records {
			if !validRel(r.Path) || strings.Contains(r.Path, "\x00") {
				t.Fatalf("accepted path %q", r.Path)
			}
		}
		name := filepath.Join(t.TempDir(), "m")
		if err := writeManifest(name, m); err != nil {
			t.Fatal(err)
		}
		again, _ := os.ReadFile(name)
		m2, err := parseManifest(again)
		if err != nil {
			t.Fatalf("written manifest does not parse: %v", err)
		}
		if !reflect.DeepEqual(m.records, m2.records) && !(len(m.records) == 0 && len(m2.records) == 0) {
			t.Fatalf("round trip changed the records:\n%+v\n%+v", m.records, m2.records)
		}
	})
}

// Ignore files are untrusted text: any of them, matched against any path, never panics,
// and an ignore file naming a path literally ignores it.
func FuzzIgnore(f *testing.F) {
	f.Add("*.log\n!keep.log\nbuild/\n", "a/b.log")
	f.Add("a/**/b\n[a-\n\\!x\n", "a/x/y/b")
	f.Add("/top\n#c\n  \n", "top")
	f.Fuzz(func(t *testing.T, text, p string) {
		ps, err := parseIgnore(bytes.NewReader([]byte(text)), nil)
		if err != nil {
			return
		}
		elems := strings.Split(p, "/")
		gitignore.NewMatcher(ps).Match(elems, false)
		gitignore.NewMatcher(ps).Match(elems, true)
	})
}
