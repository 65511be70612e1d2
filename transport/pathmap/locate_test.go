package pathmap

import (
	"path"
	"path/filepath"
	"strings"
	"testing"
)

// Locate names where ToHost leads as a mount's real directory and a clean relative path
// beneath it: the deepest real mount directory holding it, agreeing with ToHost on every
// path and every refusal.
func TestLocateAgreesWithToHost(t *testing.T) {
	t.Parallel()
	r := newRand(t)
	located := 0
	for range 100 {
		tr := randTree(t, r)
		m, err := New(tr.mounts...)
		if err != nil {
			t.Fatal(err)
		}
		dirs := realMountDirs(t, tr.mounts)
		for range 40 {
			p := randSandboxPath(r, tr.mounts)
			host, herr := m.ToHost(p)
			loc, err := m.Locate(p)
			if code(err) != code(herr) || (err == nil) != (herr == nil) {
				t.Fatalf("mounts %v: Locate(%q) = %+v, %v; ToHost: %q, %v", tr.mounts, p, loc, err, host, herr)
			}
			if err != nil {
				continue
			}
			located++
			if loc.Host() != host {
				t.Fatalf("Locate(%q) = %+v at %s; ToHost gives %s", p, loc, loc.Host(), host)
			}
			if loc.Rel != "." && (path.IsAbs(loc.Rel) || path.Clean(loc.Rel) != loc.Rel || strings.HasPrefix(loc.Rel, "..")) {
				t.Fatalf("Locate(%q): Rel %q is not clean and relative", p, loc.Rel)
			}
			deepest := ""
			for _, d := range dirs {
				if insideSome([]string{d}, host) && len(d) > len(deepest) {
					deepest = d
				}
			}
			if loc.Root != deepest {
				t.Fatalf("mounts %v: Locate(%q) root %s, want the deepest mount directory holding %s: %s", tr.mounts, p, loc.Root, host, deepest)
			}
		}
	}
	if located == 0 {
		t.Fatal("nothing located")
	}
}

// A write is read-only when the mount asked is, or when the link leads into a read-only
// mount's directory that no writable mount at that depth shares.
func TestLocateReadOnly(t *testing.T) {
	t.Parallel()
	root := tempDir(t)
	mkdirs(t, root, "w/sub", "ro", "both")
	w := filepath.Join(root, "w")
	symlink(t, root+"/ro", w+"/toro")
	symlink(t, "sub", w+"/tosub")
	symlink(t, root+"/both", w+"/toboth")
	m := mustNew(t,
		Mount{Sandbox: "/work", Host: w},
		Mount{Sandbox: "/work/sub", Host: w + "/sub", ReadOnly: true}, // nested, read-only
		Mount{Sandbox: "/ro", Host: root + "/ro", ReadOnly: true},
		Mount{Sandbox: "/both-ro", Host: root + "/both", ReadOnly: true},
		Mount{Sandbox: "/both-rw", Host: root + "/both"},
	)
	for _, tc := range []struct {
		sandbox, root, rel string
		ro                 bool
	}{
		{"/work/f", w, "f", false},
		{"/work", w, ".", false},
		{"/work/sub/f", w + "/sub", "f", true},
		{"/work/tosub/f", w + "/sub", "f", true}, // through a link, into the read-only mount
		{"/work/toro/f", root + "/ro", "f", true},
		{"/ro/f", root + "/ro", "f", true},
		{"/work/toboth/f", root + "/both", "f", false}, // a writable mount shares it
		{"/both-ro/f", root + "/both", "f", true},      // the mount asked is read-only
		{"/both-rw/f", root + "/both", "f", false},
	} {
		loc, err := m.Locate(tc.sandbox)
		if err != nil || loc.Root != tc.root || loc.Rel != tc.rel || loc.ReadOnly != tc.ro {
			t.Errorf("Locate(%q) = %+v, %v; want %s %s read-only %v", tc.sandbox, loc, err, tc.root, tc.rel, tc.ro)
		}
	}
	loc, err := Identity().Locate(w + "/tosub/f")
	if err != nil || loc.Root != "/" || loc.Rel != strings.TrimPrefix(w, "/")+"/sub/f" || loc.ReadOnly {
		t.Errorf("identity: %+v, %v", loc, err)
	}
}
