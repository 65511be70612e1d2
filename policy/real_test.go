package policy

import (
	"fmt"
	"io/fs"
	"math/rand/v2"
	"path"
	"path/filepath"
	"strings"
	"testing"
)

func TestReal(t *testing.T) {
	t.Parallel()
	m := NewMapFS(
		"/ws/src/",
		"/ws/docs -> src",
		"/ws/abs -> /ws/src",
		"/ws/up -> ..",
		"/ws/dangling -> /nowhere/file",
		"/ws/rel-dangling -> ../gone",
		"/ws/loop -> loop",
		"/ws/ping -> pong",
		"/ws/pong -> ping",
		"/ws/deep/a -> ../src",
		"/ws/file",
	)
	// A chain of exactly MaxLinks links resolves; one more loops.
	for i := 0; i < MaxLinks-1; i++ {
		m.Add(fmt.Sprintf("/ws/chain%d -> chain%d", i, i+1))
	}
	m.Add(fmt.Sprintf("/ws/chain%d -> src", MaxLinks-1))
	m.Add("/ws/long0 -> chain0/../chain0")
	for _, tc := range []struct {
		in   string
		want string
		loop bool
	}{
		{"/", "/", false},
		{"/..", "/", false},
		{"/../../ws", "/ws", false},
		{"/ws/src/x.go", "/ws/src/x.go", false},
		{"/ws/docs/x.go", "/ws/src/x.go", false},
		{"/ws/abs/x.go", "/ws/src/x.go", false},
		{"/ws/docs/../file", "/ws/file", false},       // ".." from the real directory
		{"/ws/deep/a/../file", "/ws/file", false},     // a's real directory is /ws/src
		{"/ws/up/ws/src", "/ws/src", false},           // up -> .. is /
		{"/ws/dangling", "/nowhere/file", false},      // dangling: where a write lands
		{"/ws/rel-dangling/x", "/gone/x", false},      // relative dangling
		{"/ws/missing/../src", "/ws/src", false},      // the missing part stays as written…
		{"/ws/missing/a/b", "/ws/missing/a/b", false}, // …until ".." climbs back
		{"/ws/file/x", "/ws/file/x", false},           // below a file: nothing exists
		{"ws/src", "/ws/src", false},                  // relative: from /
		{"/ws//src/./", "/ws/src", false},
		{"/ws/chain0/x", "/ws/src/x", false},
		{"/ws/loop/x", "/ws/loop/x", true},
		{"/ws/ping", "/ws/ping", true},
		{"/ws/long0", "", true}, // MaxLinks+1 links in all
	} {
		got, loop := Real(m, tc.in)
		if loop != tc.loop || (tc.want != "" && got != tc.want) {
			t.Errorf("Real(%q) = %q, %v; want %q, %v", tc.in, got, loop, tc.want, tc.loop)
		}
	}
}

// hasLinkPrefix returns a prefix of p (clean, absolute) that is a symlink in fsys, or "".
func hasLinkPrefix(fsys FS, p string) string {
	for _, pre := range prefixes(p) {
		if fi, err := fsys.Lstat(pre); err == nil && fi.Mode()&fs.ModeSymlink != 0 {
			return pre
		}
	}
	return ""
}

// prefixes returns "/a", "/a/b", … of a clean absolute path.
func prefixes(p string) []string {
	var out []string
	for i := 1; i <= len(p); i++ {
		if i == len(p) || p[i] == '/' {
			out = append(out, p[:i])
		}
	}
	return out
}

// law: path_real_has_no_link — and Real is a function of the tree: the same answer twice.
func TestRealHasNoLink(t *testing.T) {
	t.Parallel()
	for seed := uint64(0); seed < 300; seed++ {
		g := newTreeGen(seed)
		m := g.tree(40)
		for i := 0; i < 50; i++ {
			p := g.path(6)
			real, loop := Real(m, p)
			if again, l2 := Real(m, p); again != real || l2 != loop {
				t.Fatalf("seed %d: Real(%q) not stable", seed, p)
			}
			if loop {
				continue
			}
			if filepath.Clean(real) != real || !strings.HasPrefix(real, "/") {
				t.Fatalf("seed %d: Real(%q) = %q is not clean and absolute", seed, p, real)
			}
			if l := hasLinkPrefix(m, real); l != "" {
				t.Fatalf("seed %d: Real(%q) = %q, but %s is a symlink\n%s", seed, p, real, l, strings.Join(m.Entries(), "\n"))
			}
		}
	}
}

// Real over the real disk agrees with Real over the same tree in a MapFS (so the fake is
// faithful) and, where the whole path exists and does not loop, with filepath.EvalSymlinks.
func TestRealMatchesDisk(t *testing.T) {
	t.Parallel()
	compared, loops, evals := 0, 0, 0
	for seed := uint64(0); seed < 40; seed++ {
		g := newTreeGen(seed, "/w", "/h", "/x")
		m := g.tree(30)
		dir, err := filepath.EvalSymlinks(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		materialize(t, m, dir)
		for i := 0; i < 60; i++ {
			p := g.path(6)
			want, wantLoop := Real(m, p)
			got, gotLoop := Real(OSFS{}, dir+p)
			if !strings.HasPrefix(got+"/", dir+"/") {
				continue // climbed above the test's root, which the fake's "/" cannot
			}
			if gotLoop != wantLoop || (!wantLoop && got != dir+strings.TrimSuffix(want, "/")) && !(want == "/" && got == dir) {
				t.Fatalf("seed %d: %q: disk %q %v, fake %q %v\n%s", seed, p, got, gotLoop, want, wantLoop, strings.Join(m.Entries(), "\n"))
			}
			if ev, err := filepath.EvalSymlinks(dir + p); err == nil && !wantLoop && ev != got {
				t.Fatalf("seed %d: %q: EvalSymlinks %q, Real %q", seed, p, ev, got)
			} else if err == nil {
				evals++
			}
			compared++
			if wantLoop {
				loops++
			}
		}
	}
	// The comparison must have met every kind of case, or it proves little.
	if compared < 1000 || loops == 0 || evals < 100 {
		t.Fatalf("compared %d paths, %d loops, %d through EvalSymlinks", compared, loops, evals)
	}
}

// The judgment of a step's paths on the real disk (which takes shortcuts: one openat2 for
// a path with no symlink, the working directory resolved once) agrees with the judgment
// over the same tree in a MapFS, which walks component by component.
func TestFactsMatchDisk(t *testing.T) {
	t.Parallel()
	compared := 0
	for seed := uint64(0); seed < 60; seed++ {
		g := newTreeGen(seed, "/w", "/h", "/x")
		m := g.tree(30)
		dir, err := filepath.EvalSymlinks(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		materialize(t, m, dir)
		ctxFor := func(prefix string, fsys FS) *Context {
			return &Context{Cwd: prefix + "/w", Home: prefix + "/h", Env: []string{"PATH=" + prefix + "/x"}, Roots: []string{prefix + "/w"}, FS: fsys}
		}
		fake, disk := ctxFor("", m), ctxFor(dir, OSFS{})
		if escapes(disk.compiled().host, dir) {
			continue // an entry climbs above the test's root, which the fake's "/" cannot
		}
		for i := 0; i < 60; i++ {
			cwd := g.path(3)
			p := strings.TrimLeft(g.path(4), "/")
			if r, _ := Real(OSFS{}, dir+cwd+"/"+p); !strings.HasPrefix(r+"/", dir+"/") {
				continue // climbed above the test's root, which the fake's "/" cannot
			}
			if r, _ := Real(OSFS{}, dir+cwd); !strings.HasPrefix(r+"/", dir+"/") {
				continue
			}
			for _, full := range []bool{false, true} {
				want := fake.paths(cwd).facts(p, full)
				got := disk.paths(dir+cwd).facts(p, full)
				if got != want {
					t.Fatalf("seed %d: in %s, %q (full %v): disk %+v, fake %+v\n%s", seed, cwd, p, full, got, want, strings.Join(m.Entries(), "\n"))
				}
			}
			compared++
		}
	}
	if compared < 800 {
		t.Fatalf("compared %d paths", compared)
	}
}

// escapes reports whether an entry of the rules lies outside dir.
func escapes(rs *ruleSet, dir string) bool {
	for _, list := range [][]string{rs.secrets, rs.protected, rs.roots} {
		for _, e := range list {
			if !strings.HasPrefix(e+"/", dir+"/") {
				return true
			}
		}
	}
	return false
}

// TestIsCleanAgreesWithClean: isClean is path.Clean(p) == p for absolute paths, without
// building the clean path.
func TestIsCleanAgreesWithClean(t *testing.T) {
	t.Parallel()
	parts := []string{"", "/", "//", ".", "..", "a", "b.", ".c", "...", "/./", "/../"}
	r := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 20000; i++ {
		p := ""
		for n := r.IntN(6); n >= 0; n-- {
			p += parts[r.IntN(len(parts))]
		}
		want := strings.HasPrefix(p, "/") && path.Clean(p) == p
		if got := isClean(p); got != want {
			t.Fatalf("isClean(%q) = %v, want %v", p, got, want)
		}
	}
}
