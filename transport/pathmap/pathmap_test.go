package pathmap

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// tempDir is t.TempDir with its own symlinks resolved, so expected host paths are real.
func tempDir(t testing.TB) string {
	t.Helper()
	d, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func mkdirs(t testing.TB, root string, dirs ...string) {
	t.Helper()
	for _, d := range dirs {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
}

func symlink(t testing.TB, target, name string) {
	t.Helper()
	if err := os.Symlink(target, name); err != nil {
		t.Fatal(err)
	}
}

func mustNew(t testing.TB, mounts ...Mount) *Map {
	t.Helper()
	m, err := New(mounts...)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func code(err error) string {
	var r *Refusal
	if errors.As(err, &r) {
		return r.Code
	}
	return ""
}

func TestNew(t *testing.T) {
	t.Parallel()
	bad := map[string][]Mount{
		"no mounts":          nil,
		"empty sandbox":      {{Sandbox: "", Host: "/h"}},
		"relative sandbox":   {{Sandbox: "work", Host: "/h"}},
		"relative host":      {{Sandbox: "/work", Host: "h"}},
		"tilde sandbox":      {{Sandbox: "~/work", Host: "/h"}},
		"dot-dot":            {{Sandbox: "/work/../etc", Host: "/h"}},
		"dot-dot host":       {{Sandbox: "/work", Host: "/h/.."}},
		"NUL":                {{Sandbox: "/wo\x00rk", Host: "/h"}},
		"duplicate":          {{Sandbox: "/work", Host: "/a"}, {Sandbox: "/work", Host: "/b"}},
		"duplicate un-clean": {{Sandbox: "/work", Host: "/a"}, {Sandbox: "/work/", Host: "/b"}},
	}
	for name, mounts := range bad {
		if _, err := New(mounts...); !errors.Is(err, ErrMount) {
			t.Errorf("%s: New(%v) = %v, want ErrMount", name, mounts, err)
		}
	}
	m, err := New(Mount{Sandbox: "/work/", Host: "/h//w/."}, Mount{Sandbox: "/data", Host: "/h/w", ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	want := []Mount{{Sandbox: "/work", Host: "/h/w"}, {Sandbox: "/data", Host: "/h/w", ReadOnly: true}}
	if got := m.Mounts(); len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("Mounts() = %v, want %v", got, want)
	}
	if mt, ok := m.Mount("/data/x"); !ok || !mt.ReadOnly {
		t.Errorf("Mount(/data/x) = %v, %v", mt, ok)
	}
}

func TestBothWays(t *testing.T) {
	t.Parallel()
	root := tempDir(t)
	mkdirs(t, root, "w/a", "w/sub", "s", "d", "wshop")
	w, s, d := filepath.Join(root, "w"), filepath.Join(root, "s"), filepath.Join(root, "d")
	m := mustNew(t,
		Mount{Sandbox: "/work", Host: w},
		Mount{Sandbox: "/work/sub", Host: s}, // deeper: over /work's own sub
		Mount{Sandbox: "/data", Host: d},
	)
	both := []struct{ sandbox, host string }{
		{"/work", w},
		{"/work/a", w + "/a"},
		{"/work/a/new/file", w + "/a/new/file"},
		{"/work/sub", s},
		{"/work/sub/x", s + "/x"}, // the deepest mount maps it
		{"/work/subway", w + "/subway"},
		{"/data/f", d + "/f"},
	}
	for _, c := range both {
		if got, err := m.ToHost(c.sandbox); err != nil || got != c.host {
			t.Errorf("ToHost(%q) = %q, %v; want %q", c.sandbox, got, err, c.host)
		}
		if got, err := m.ToSandbox(c.host); err != nil || got != c.sandbox {
			t.Errorf("ToSandbox(%q) = %q, %v; want %q", c.host, got, err, c.sandbox)
		}
	}
	// Not clean on the way in, clean on the way out.
	for in, want := range map[string]string{
		"/work//a/./b/":        w + "/a/b",
		"/work/a/../a":         w + "/a",
		"/work/sub/../a":       w + "/a", // ".." above a mount point is the sandbox's parent
		"/data/../work/sub/x":  s + "/x",
		"/work/missing/../sub": s,
	} {
		if got, err := m.ToHost(in); err != nil || got != want {
			t.Errorf("ToHost(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	outside := []string{"/workshop", "/etc/passwd", "/", "work/a", "./work", "~", "~/x", "~user/x", "", "/work/../etc", "/x/../work/a"}
	for _, p := range outside {
		_, err := m.ToHost(p)
		if code(err) != Outside || !errors.Is(err, &Refusal{Code: Outside}) {
			t.Errorf("ToHost(%q) = %v, want outside", p, err)
		}
		if err != nil && strings.Contains(err.Error(), root) {
			t.Errorf("refusal names a host path: %v", err)
		}
	}
	hostOutside := []string{
		filepath.Join(root, "wshop"), // component-wise: w does not hold wshop
		root, "/etc", "relative/w",
		w + "/sub/x", // hidden in the sandbox by the mount at /work/sub
	}
	for _, h := range hostOutside {
		_, err := m.ToSandbox(h)
		if code(err) != Outside {
			t.Errorf("ToSandbox(%q) = %v, want outside", h, err)
		}
		if err != nil && strings.Contains(err.Error(), root) {
			t.Errorf("refusal names a host path: %v", err)
		}
	}
}

// law: path_rejects_escape
func TestSymlinks(t *testing.T) {
	t.Parallel()
	root := tempDir(t)
	mkdirs(t, root, "w/a/b", "o/inner", "d/x")
	w, o, d := filepath.Join(root, "w"), filepath.Join(root, "o"), filepath.Join(root, "d")
	symlink(t, o+"/inner", w+"/out")          // points out of every mount
	symlink(t, "../../o", w+"/a/rel")         // relative, out
	symlink(t, w+"/a/b", w+"/deep")           // inside
	symlink(t, d+"/x", w+"/todata")           // into another mount
	symlink(t, o+"/nothing", w+"/dangle-out") // dangling, out
	symlink(t, "a/none", w+"/dangle-in")      // dangling, inside
	symlink(t, "loop2", w+"/loop1")
	symlink(t, "loop1", w+"/loop2")
	symlink(t, w, w+"/self") // a link to the mount itself
	symlink(t, o+"/inner", w+"/a/b/out2")
	mkdirs(t, root, "wx")
	symlink(t, root+"/wx", w+"/towx") // wx shares w's name as a prefix, not as a directory
	m := mustNew(t, Mount{Sandbox: "/work", Host: w}, Mount{Sandbox: "/data", Host: d})

	ok := []struct{ sandbox, host string }{
		{"/work/deep", w + "/a/b"},
		{"/work/deep/f", w + "/a/b/f"},
		{"/work/deep/../x", w + "/a/x"}, // ".." from the link's real directory, not w/x
		{"/work/todata/f", d + "/x/f"},  // one mount into another
		{"/work/dangle-in", w + "/a/none"},
		{"/work/self/self/a", w + "/a"},
		{"/work/missing/../a", w + "/a"},
		{"/work/a/b/out2/../../w/a", w + "/a"}, // out and back in: the real path is inside
	}
	for _, c := range ok {
		if got, err := m.ToHost(c.sandbox); err != nil || got != c.host {
			t.Errorf("ToHost(%q) = %q, %v; want %q", c.sandbox, got, err, c.host)
		}
	}
	refused := map[string]string{
		"/work/out":             Escapes,
		"/work/out/f":           Escapes,
		"/work/a/rel":           Escapes,
		"/work/out/..":          Escapes, // ".." after the link: the link's real parent, o
		"/work/deep/../../../o": Outside, // above every mount, read as written
		"/work/a/b/out2/../..":  Escapes, // from the link's real directory o/inner up and out
		"/work/deep/../../../w": Outside,
		"/work/..":              Outside,
		"/work/dangle-out":      Escapes,
		"/work/missing/../out":  Escapes,
		"/work/towx":            Escapes,
		"/work/towx/f":          Escapes,
		"/work/loop1":           Loop,
		"/work/loop1/x":         Loop,
	}
	for p, want := range refused {
		got, err := m.ToHost(p)
		if code(err) != want {
			t.Errorf("ToHost(%q) = %q, %v; want %s", p, got, err, want)
		}
		if err != nil && strings.Contains(err.Error(), root) {
			t.Errorf("refusal names a host path: %v", err)
		}
	}
}

func TestIdentity(t *testing.T) {
	t.Parallel()
	root := tempDir(t)
	mkdirs(t, root, "a")
	symlink(t, root+"/a", root+"/l")
	for _, m := range []*Map{nil, Identity()} {
		if got, err := m.ToHost(root + "/l/x"); err != nil || got != root+"/a/x" {
			t.Errorf("ToHost through a link = %q, %v", got, err)
		}
		if got, err := m.ToSandbox("/etc//x/"); err != nil || got != "/etc/x" {
			t.Errorf("ToSandbox = %q, %v", got, err)
		}
		if _, err := m.ToHost("rel"); code(err) != Outside {
			t.Errorf("ToHost(rel) = %v", err)
		}
		if _, err := m.ToHost("~/x"); code(err) != Outside {
			t.Errorf("ToHost(~/x) = %v", err)
		}
		if ms := m.Mounts(); len(ms) != 1 || ms[0] != (Mount{Sandbox: "/", Host: "/"}) {
			t.Errorf("Mounts() = %v", ms)
		}
	}
}

func TestResolveErrorHidesHostPath(t *testing.T) {
	t.Parallel()
	if os.Geteuid() == 0 {
		t.Skip("root reads any directory: no permission error to provoke")
	}
	root := tempDir(t)
	mkdirs(t, root, "w/locked/in")
	if err := os.Chmod(root+"/w/locked", 0); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Chmod(root+"/w/locked", 0o755) })
	m := mustNew(t, Mount{Sandbox: "/work", Host: root + "/w"})
	_, err := m.ToHost("/work/locked/in/x")
	if !errors.Is(err, fs.ErrPermission) || strings.Contains(err.Error(), root) {
		t.Errorf("ToHost under an unreadable directory = %v", err)
	}
}

// At most MaxLinks links are followed, as Linux does: a chain of 40 resolves, of 41 is a loop.
func TestMaxLinks(t *testing.T) {
	t.Parallel()
	root := tempDir(t)
	mkdirs(t, root, "w/end")
	w := root + "/w"
	for i := range MaxLinks + 1 {
		target := fmt.Sprintf("c%d", i+1)
		if i == MaxLinks {
			target = "end"
		}
		symlink(t, target, fmt.Sprintf("%s/c%d", w, i))
	}
	m := mustNew(t, Mount{Sandbox: "/work", Host: w})
	// c1 .. c40 then end: 40 links.
	if got, err := m.ToHost("/work/c1"); err != nil || got != w+"/end" {
		t.Errorf("40 links: %q, %v", got, err)
	}
	// c0 .. c40: 41 links.
	if _, err := m.ToHost("/work/c0"); code(err) != Loop {
		t.Errorf("41 links: %v, want loop", err)
	}
}
