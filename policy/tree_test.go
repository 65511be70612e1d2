package policy

import (
	"math/rand/v2"
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"
)

// A random symlink graph for property tests: directories, files and symlinks below a few
// top directories, with names that hit the rules (.git, .ssh, …) and symlink targets that
// are relative, absolute, dangling, or loop.
type treeGen struct {
	r     *rand.Rand
	tops  []string
	names []string
}

func newTreeGen(seed uint64, tops ...string) *treeGen {
	if len(tops) == 0 {
		tops = []string{"/ws", "/home/u", "/tmp", "/usr/bin"}
	}
	return &treeGen{
		r:     rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
		tops:  tops,
		names: []string{"a", "b", "c", ".git", ".paddock", ".ssh", ".aws", ".config", "paddock", "id", ".env"},
	}
}

// path draws a path, often below a top directory, sometimes with "." or "..".
func (g *treeGen) path(depth int) string {
	p := g.tops[g.r.IntN(len(g.tops))]
	if g.r.IntN(8) == 0 {
		p = "/"
	}
	for i := g.r.IntN(depth + 1); i > 0; i-- {
		switch g.r.IntN(12) {
		case 0:
			p += "/.."
		case 1:
			p += "/."
		default:
			p += "/" + g.names[g.r.IntN(len(g.names))]
		}
	}
	return p
}

// target draws a symlink target.
func (g *treeGen) target() string {
	switch g.r.IntN(5) {
	case 0:
		return g.path(3)
	case 1:
		return ".."
	case 2:
		return "../" + g.names[g.r.IntN(len(g.names))]
	case 3:
		return "."
	}
	t := g.names[g.r.IntN(len(g.names))]
	if g.r.IntN(2) == 0 {
		t += "/" + g.names[g.r.IntN(len(g.names))]
	}
	return t
}

// tree draws n entries.
func (g *treeGen) tree(n int) *MapFS {
	m := NewMapFS()
	for _, top := range g.tops {
		m.Add(top + "/")
	}
	for i := 0; i < n; i++ {
		p := path.Clean(strings.ReplaceAll(g.path(3), "..", "a"))
		if p == "/" {
			continue
		}
		switch g.r.IntN(3) {
		case 0:
			m.Add(p + "/")
		case 1:
			m.Add(p)
		default:
			m.Add(p + " -> " + g.target())
		}
	}
	return m
}

// materialize writes m below dir on disk, absolute symlink targets moved below dir too.
func materialize(t *testing.T, m *MapFS, dir string) {
	t.Helper()
	for _, e := range m.Entries() {
		name, target, isLink := strings.Cut(e, " -> ")
		p := filepath.Join(dir, strings.TrimSuffix(name, "/"))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		switch {
		case isLink:
			if strings.HasPrefix(target, "/") {
				target = dir + target
			}
			if err := os.Symlink(target, p); err != nil {
				t.Fatal(err)
			}
		case strings.HasSuffix(name, "/"):
			if err := os.MkdirAll(p, 0o755); err != nil {
				t.Fatal(err)
			}
		default:
			if err := os.WriteFile(p, nil, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
}
