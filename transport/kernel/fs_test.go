//go:build linux

package kernel_test

import (
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"testing"

	"github.com/paddockhq/paddock/transport/wire"
)

// tree makes: dir/ with a (file, 5 bytes, 0640), b/ (dir), c -> a (symlink), d -> missing.
func tree(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "a"), []byte("hello"), 0o640); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(dir, "a"), 0o640); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "b"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("a", filepath.Join(dir, "c")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("missing", filepath.Join(dir, "d")); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestReaddir(t *testing.T) {
	dir := tree(t)
	k := startKernel(t, dir)
	for _, path := range []string{dir, "."} { // a relative path is from the kernel's cwd
		var d wire.Dir
		k.call(wire.TypeReaddir, wire.Path{Path: path}, &d)
		var got []string
		for _, e := range d.Entries {
			got = append(got, e.Name+" "+e.Type+" "+e.Target)
		}
		want := []string{"a file ", "b dir ", "c symlink a", "d symlink missing"}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("readdir %s: %q, want %q", path, got, want)
		}
		if a := d.Entries[0]; a.Size != 5 || a.Mode != 0o640 || a.ModTime == 0 {
			t.Errorf("entry a: %+v", a)
		}
	}
	if e := k.callErr(wire.TypeReaddir, wire.Path{Path: filepath.Join(dir, "nope")}); e.Code != "not_found" {
		t.Errorf("missing dir: %v", e)
	}
	if e := k.callErr(wire.TypeReaddir, wire.Path{}); e.Code != "bad_request" {
		t.Errorf("no path: %v", e)
	}
}

func TestStat(t *testing.T) {
	dir := tree(t)
	k := startKernel(t, dir)
	cases := []struct {
		path     string
		nofollow bool
		want     string // type target
		code     string
	}{
		{path: "a", want: "file "},
		{path: filepath.Join(dir, "b"), want: "dir "},
		{path: "c", want: "file "},
		{path: "c", nofollow: true, want: "symlink a"},
		{path: "d", nofollow: true, want: "symlink missing"},
		{path: "d", code: "not_found"},
		{path: "a/x", code: "not_found"},
		{path: "", code: "bad_request"},
	}
	for _, c := range cases {
		body := wire.Path{Path: c.path, NoFollow: c.nofollow}
		if c.code != "" {
			if e := k.callErr(wire.TypeStat, body); e.Code != c.code {
				t.Errorf("stat %+v: %v, want %s", body, e, c.code)
			}
			continue
		}
		var e wire.Entry
		k.call(wire.TypeStat, body, &e)
		if got := e.Type + " " + e.Target; got != c.want || e.Name != filepath.Base(c.path) {
			t.Errorf("stat %+v: %+v, want %q", body, e, c.want)
		}
	}
	var e wire.Entry
	k.call(wire.TypeStat, wire.Path{Path: "c"}, &e)
	if e.Size != 5 || e.Mode != 0o640 {
		t.Errorf("followed link: %+v", e)
	}
}

func TestRealpath(t *testing.T) {
	dir := tree(t)
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		t.Fatal(err)
	}
	k := startKernel(t, dir)
	for path, want := range map[string]string{
		"c":                     filepath.Join(real, "a"),
		"b/../c":                filepath.Join(real, "a"),
		filepath.Join(dir, "b"): filepath.Join(real, "b"),
		".":                     real,
	} {
		var p wire.Path
		k.call(wire.TypeRealpath, wire.Path{Path: path}, &p)
		if p.Path != want {
			t.Errorf("realpath %s: %q, want %q", path, p.Path, want)
		}
	}
	if e := k.callErr(wire.TypeRealpath, wire.Path{Path: "d"}); e.Code != "not_found" {
		t.Errorf("dangling: %v", e)
	}
}

// chdir moves the kernel's own working directory: relative paths are taken from there
// after it, as the kernel's /proc cwd shows.
func TestChdir(t *testing.T) {
	dir := tree(t)
	other := t.TempDir()
	os.WriteFile(filepath.Join(other, "here"), nil, 0o600)
	k := startKernel(t, dir)
	k.call(wire.TypeChdir, wire.Path{Path: other}, nil)
	var e wire.Entry
	k.call(wire.TypeStat, wire.Path{Path: "here"}, &e)
	if e.Name != "here" {
		t.Fatalf("stat of a relative path after chdir: %+v", e)
	}
	h := k.hello()
	cwd, err := os.Readlink(filepath.Join("/proc", strconv.Itoa(h.PID), "cwd"))
	if err != nil || cwd != other {
		t.Fatalf("the kernel's cwd is %q (%v), want %q", cwd, err, other)
	}
	if e := k.callErr(wire.TypeChdir, wire.Path{Path: filepath.Join(other, "nope")}); e.Code != "not_found" {
		t.Errorf("chdir to a missing directory: %v", e)
	}
}
