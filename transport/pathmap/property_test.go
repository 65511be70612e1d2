package pathmap

import (
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func newRand(t testing.TB) *rand.Rand {
	seed := uint64(rand.Int64())
	t.Logf("seed %d", seed)
	return rand.New(rand.NewPCG(seed, seed^0x9a7b))
}

var names = []string{"a", "ab", "c", "l1", "l2", "l3"}

// tree is a random directory tree under root with random symlinks (absolute and relative,
// inside and outside the mounts, dangling, looping) and a random mount set over it.
type tree struct {
	root   string
	dirs   []string // host directories, root first
	mounts []Mount
}

func randTree(t testing.TB, r *rand.Rand) tree {
	tr := tree{root: tempDir(t)}
	tr.dirs = []string{tr.root}
	for range 3 + r.IntN(10) {
		parent := tr.dirs[r.IntN(len(tr.dirs))]
		d := filepath.Join(parent, names[r.IntN(3)])
		if strings.Count(d[len(tr.root):], "/") > 4 {
			continue
		}
		if err := os.MkdirAll(d, 0o755); err == nil {
			tr.dirs = append(tr.dirs, d)
		}
	}
	for range 2 + r.IntN(8) {
		dir := tr.dirs[r.IntN(len(tr.dirs))]
		name := filepath.Join(dir, names[3+r.IntN(3)])
		var target string
		switch r.IntN(6) {
		case 0: // an absolute directory anywhere in the tree
			target = tr.dirs[r.IntN(len(tr.dirs))]
		case 1: // out of the tree altogether
			target = []string{"/", "/etc", os.TempDir()}[r.IntN(3)]
		case 2: // dangling
			target = filepath.Join(tr.dirs[r.IntN(len(tr.dirs))], "nothing")
		default: // relative, climbing or descending, maybe through other links
			var parts []string
			for range 1 + r.IntN(4) {
				parts = append(parts, []string{"..", "..", "a", "ab", "l1", "l2", "."}[r.IntN(7)])
			}
			target = strings.Join(parts, "/")
		}
		os.Symlink(target, name) // an existing name just keeps what is there
	}
	// Mounts: host directories from the tree (never the root, so links can lead out).
	sandboxes := []string{"/work", "/work/sub", "/data", "/", "/data/deep/er"}
	used := map[string]bool{}
	for range 1 + r.IntN(3) {
		if len(tr.dirs) < 2 {
			break
		}
		sb := sandboxes[r.IntN(len(sandboxes))]
		if used[sb] {
			continue
		}
		used[sb] = true
		tr.mounts = append(tr.mounts, Mount{Sandbox: sb, Host: tr.dirs[1+r.IntN(len(tr.dirs)-1)]})
	}
	if len(tr.mounts) == 0 {
		os.MkdirAll(tr.root+"/m", 0o755)
		tr.mounts = []Mount{{Sandbox: "/work", Host: tr.root + "/m"}}
	}
	return tr
}

// randSandboxPath is a mount's sandbox path and a few random components.
func randSandboxPath(r *rand.Rand, mounts []Mount) string {
	p := mounts[r.IntN(len(mounts))].Sandbox
	for range r.IntN(6) {
		p += "/" + []string{"a", "ab", "c", "l1", "l2", "l3", "..", ".", "x", "sub", "deep"}[r.IntN(11)]
	}
	return p
}

// realMountDirs are the mounts' host directories as the OS resolves them.
func realMountDirs(t testing.TB, mounts []Mount) []string {
	var dirs []string
	for _, mt := range mounts {
		d, err := filepath.EvalSymlinks(mt.Host)
		if err != nil {
			t.Fatalf("mount host %s: %v", mt.Host, err)
		}
		dirs = append(dirs, d)
	}
	return dirs
}

func insideSome(dirs []string, p string) bool {
	for _, d := range dirs {
		if d == "/" || p == d || strings.HasPrefix(p, d+"/") {
			return true
		}
	}
	return false
}

// lexicalHost is the test's own reading of a sandbox path: the deepest mount holding its
// components before any "..", and the rest appended as written (not cleaned).
func lexicalHost(mounts []Mount, sandbox string) (string, bool) {
	var parts []string
	for _, c := range strings.Split(sandbox, "/") {
		if c != "" && c != "." {
			parts = append(parts, c)
		}
	}
	best, bestLen := -1, -1
	for i, mt := range mounts {
		mp := strings.FieldsFunc(mt.Sandbox, func(r rune) bool { return r == '/' })
		if len(mp) > len(parts) || len(mp) <= bestLen {
			continue
		}
		match := true
		for j := range mp {
			if parts[j] != mp[j] {
				match = false
			}
		}
		if match {
			best, bestLen = i, len(mp)
		}
	}
	if best < 0 {
		return "", false
	}
	return mounts[best].Host + "/" + strings.Join(parts[bestLen:], "/"), true
}

// refHost is the host path the kernel's walk of a sandbox path leads to before the host
// resolves it: components up to the first symlink walked in the sandbox (".." is the lexical
// parent there), the rest appended as written.
func refHost(mounts []Mount, sandbox string) (string, bool) {
	var parts []string
	for _, c := range strings.Split(sandbox, "/") {
		if c != "" && c != "." {
			parts = append(parts, c)
		}
	}
	var cur []string
	for i, c := range parts {
		if c == ".." {
			if len(cur) > 0 {
				cur = cur[:len(cur)-1]
			}
			continue
		}
		next := append(append([]string(nil), cur...), c)
		h, ok := lexicalHost(mounts, "/"+strings.Join(next, "/"))
		if !ok {
			dir := "/" + strings.Join(next, "/")
			if !slices.ContainsFunc(mounts, func(mt Mount) bool { return strings.HasPrefix(mt.Sandbox+"/", dir+"/") }) {
				return "", false
			}
			cur = next // an ancestor of a mount point
			continue
		}
		if fi, err := os.Lstat(h); err == nil && fi.Mode()&fs.ModeSymlink != 0 {
			base, _ := lexicalHost(mounts, "/"+strings.Join(cur, "/"))
			return base + "/" + strings.Join(parts[i:], "/"), true
		}
		cur = next
	}
	return lexicalHost(mounts, "/"+strings.Join(cur, "/"))
}

// noLinkPrefix reports whether no existing prefix of p is a symlink.
func noLinkPrefix(p string) bool {
	for q := p; q != "/"; q = filepath.Dir(q) {
		if fi, err := os.Lstat(q); err == nil && fi.Mode()&fs.ModeSymlink != 0 {
			return false
		}
	}
	return true
}

// law: path_rejects_escape
// law: path_resolves_inside
// ToHost is checked against the OS's own resolution (filepath.EvalSymlinks) of the mapped
// path: inside a mount it resolves to exactly that; out of every mount it is refused; and no
// path it returns lies outside the resolved host directory of a mount.
func TestToHostAgainstOS(t *testing.T) {
	t.Parallel()
	r := newRand(t)
	compared, escapes, resolved := 0, 0, 0
	for range 150 {
		tr := randTree(t, r)
		m, err := New(tr.mounts...)
		if err != nil {
			t.Fatal(err)
		}
		dirs := realMountDirs(t, tr.mounts)
		for range 60 {
			p := randSandboxPath(r, tr.mounts)
			got, err := m.ToHost(p)
			if err == nil {
				resolved++
				if !insideSome(dirs, got) {
					t.Fatalf("mounts %v: ToHost(%q) = %q, outside every mount's real directory", tr.mounts, p, got)
				}
				if !noLinkPrefix(got) || got != path.Clean(got) {
					t.Fatalf("ToHost(%q) = %q is not a real path", p, got)
				}
			} else if code(err) == "" {
				t.Fatalf("ToHost(%q): %v is not a refusal", p, err)
			} else if strings.Contains(err.Error(), tr.root) {
				t.Fatalf("refusal names a host path: %v", err)
			}
			if _, in := lexicalHost(tr.mounts, path.Clean(p)); !in {
				if code(err) != Outside {
					t.Fatalf("mounts %v: ToHost(%q) = %q, %v; want outside", tr.mounts, p, got, err)
				}
				continue
			}
			h, ok := refHost(tr.mounts, p)
			if !ok {
				if code(err) != Outside {
					t.Fatalf("mounts %v: ToHost(%q) = %q, %v; it passes a directory no mount shows", tr.mounts, p, got, err)
				}
				continue
			}
			real, eerr := filepath.EvalSymlinks(h)
			if eerr != nil {
				continue // missing, or a loop: only the safety checks above apply
			}
			compared++
			if insideSome(dirs, real) {
				if err != nil || got != real {
					t.Fatalf("mounts %v: ToHost(%q) = %q, %v; the OS resolves it to %q, inside", tr.mounts, p, got, err, real)
				}
			} else {
				escapes++
				if code(err) != Escapes {
					t.Fatalf("mounts %v: ToHost(%q) = %q, %v; the OS resolves it to %q, outside every mount", tr.mounts, p, got, err, real)
				}
			}
		}
	}
	t.Logf("%d resolved, %d compared with the OS, %d escapes", resolved, compared, escapes)
	if compared == 0 || escapes == 0 {
		t.Fatal("the random trees never exercised both outcomes")
	}
}

// Round trip: with no symlink involved, ToSandbox(ToHost(p)) == p; and for any host path
// ToSandbox accepts, ToHost takes it back.
func TestRoundTrip(t *testing.T) {
	t.Parallel()
	r := newRand(t)
	for range 200 {
		root := tempDir(t)
		// Host directories are siblings (none holds another); sandbox paths may nest.
		var mounts []Mount
		used := map[string]bool{}
		for i := range 1 + r.IntN(4) {
			sb := []string{"/", "/work", "/work/sub", "/data", "/data/x/y", "/w"}[r.IntN(6)]
			if used[sb] {
				continue
			}
			used[sb] = true
			h := fmt.Sprintf("%s/h%d", root, i)
			mkdirs(t, h, "a/b")
			mounts = append(mounts, Mount{Sandbox: sb, Host: h})
		}
		m := mustNew(t, mounts...)
		for range 40 {
			p := mounts[r.IntN(len(mounts))].Sandbox
			for range r.IntN(4) {
				p += "/" + []string{"a", "b", "sub", "x", "y", "new"}[r.IntN(6)]
			}
			p = path.Clean(p)
			h, err := m.ToHost(p)
			if err != nil {
				t.Fatalf("mounts %v: ToHost(%q): %v", mounts, p, err)
			}
			if back, err := m.ToSandbox(h); err != nil || back != p {
				t.Fatalf("mounts %v: ToSandbox(ToHost(%q) = %q) = %q, %v", mounts, p, h, back, err)
			}
			// And from the host side: any host path under the root.
			hp := root + "/" + fmt.Sprintf("h%d", r.IntN(5))
			for range r.IntN(3) {
				hp += "/" + []string{"a", "b", "sub"}[r.IntN(3)]
			}
			if sb, err := m.ToSandbox(hp); err == nil {
				if back, err := m.ToHost(sb); err != nil || back != hp {
					t.Fatalf("mounts %v: ToHost(ToSandbox(%q) = %q) = %q, %v", mounts, hp, sb, back, err)
				}
			} else if code(err) != Outside {
				t.Fatalf("ToSandbox(%q): %v", hp, err)
			}
		}
	}
}

// The refusal codes are stable classes for errors.Is.
func TestRefusalIs(t *testing.T) {
	t.Parallel()
	m := mustNew(t, Mount{Sandbox: "/work", Host: tempDir(t)})
	_, err := m.ToHost("/etc")
	if !errors.Is(err, &Refusal{Code: Outside}) || errors.Is(err, &Refusal{Code: Escapes}) {
		t.Errorf("errors.Is on %v", err)
	}
}
