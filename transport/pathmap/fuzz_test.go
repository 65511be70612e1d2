package pathmap

import (
	"errors"
	"os"
	"path"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// fuzzMap is a fixed tree with links out of, between and within its mounts, and loops.
func fuzzMap(f *testing.F) (*Map, []string, string) {
	root, err := filepath.EvalSymlinks(f.TempDir())
	if err != nil {
		f.Fatal(err)
	}
	for _, d := range []string{"w/a/b", "s/x", "d/x", "o/inner", "wx"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			f.Fatal(err)
		}
	}
	for name, target := range map[string]string{
		"w/out": root + "/o/inner", "w/a/rel": "../../o", "w/deep": "a/b", "w/todata": root + "/d/x",
		"w/dangle": root + "/o/none", "w/loop1": "loop2", "w/loop2": "loop1", "w/wx": "../wx",
		"w/root": "/", "d/x/back": "../../w/a", "s/x/up": "../../..",
	} {
		if err := os.Symlink(target, filepath.Join(root, name)); err != nil {
			f.Fatal(err)
		}
	}
	m, err := New(Mount{Sandbox: "/work", Host: root + "/w"}, Mount{Sandbox: "/work/sub", Host: root + "/s"},
		Mount{Sandbox: "/data", Host: root + "/d"})
	if err != nil {
		f.Fatal(err)
	}
	return m, []string{root + "/w", root + "/s", root + "/d"}, root
}

// FuzzToHost: any string, never a panic; a path returned is real and inside a mount; a
// refusal never names a host path.
func FuzzToHost(f *testing.F) {
	m, dirs, root := fuzzMap(f)
	for _, s := range []string{"/work/a", "/work/out/..", "/work/deep/../../..", "/work/sub/x/up/w", "/data/x/back/b",
		"~/x", "rel", "", "/work/loop1/x", "/work/wx", "/work/./a//b/", "/work/root/etc", "/work/\x00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, err := m.ToHost(s)
		if err != nil {
			// Not a refusal: the host's own error (a name too long), its cause an errno.
			var errno syscall.Errno
			if code(err) == "" && !errors.As(err, &errno) {
				t.Fatalf("ToHost(%q): %v is neither a refusal nor an errno", s, err)
			}
			if strings.Contains(err.Error(), root) {
				t.Fatalf("refusal names a host path: %v", err)
			}
			return
		}
		if !insideSome(dirs, got) || got != path.Clean(got) || !noLinkPrefix(got) {
			t.Fatalf("ToHost(%q) = %q: not a real path inside a mount", s, got)
		}
	})
}

// FuzzToSandbox: any string, never a panic; a path returned is clean, under a mount, and
// maps back to the host path it came from.
func FuzzToSandbox(f *testing.F) {
	m, _, root := fuzzMap(f)
	for _, s := range []string{root + "/w/a", root + "/wx", root + "/s/x", root + "/w/sub/x", "/", "", "rel", root + "/d/../w"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, h string) {
		got, err := m.ToSandbox(h)
		if err != nil {
			if code(err) == "" || strings.Contains(err.Error(), root) {
				t.Fatalf("ToSandbox(%q): %v", h, err)
			}
			return
		}
		if got != path.Clean(got) || !path.IsAbs(got) {
			t.Fatalf("ToSandbox(%q) = %q is not clean", h, got)
		}
		if _, ok := m.Mount(got); !ok {
			t.Fatalf("ToSandbox(%q) = %q is under no mount", h, got)
		}
		if back, ok := m.lexicalHost(got); !ok || back != path.Clean(h) {
			t.Fatalf("ToSandbox(%q) = %q maps back to %q", h, got, back)
		}
	})
}
