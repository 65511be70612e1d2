package workspace

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// node is what a test tree holds at one path.
type node struct {
	Kind Kind
	Data string // a file's bytes, a symlink's target
	Exec bool   // a file's exec bits
}

func (n node) String() string {
	switch n.Kind {
	case File:
		if n.Exec {
			return fmt.Sprintf("file+x(%q)", n.Data)
		}
		return fmt.Sprintf("file(%q)", n.Data)
	case Symlink:
		return fmt.Sprintf("link(%q)", n.Data)
	}
	return n.Kind.String()
}

type tree map[string]node

// spec builds a tree from "path=content" (file), "path/" (dir), "path->target" (symlink),
// "path*=content" (executable file); directories above each path are implied.
func spec(items ...string) tree {
	t := tree{}
	for _, it := range items {
		var p string
		var n node
		switch {
		case strings.HasSuffix(it, "/"):
			p, n = strings.TrimSuffix(it, "/"), node{Kind: Dir}
		case strings.Contains(it, "->"):
			a, b, _ := strings.Cut(it, "->")
			p, n = a, node{Kind: Symlink, Data: b}
		default:
			a, b, _ := strings.Cut(it, "=")
			p, n = a, node{Kind: File, Data: b}
			if strings.HasSuffix(a, "*") {
				p, n.Exec = strings.TrimSuffix(a, "*"), true
			}
		}
		t[p] = n
		for d := filepath.Dir(p); d != "."; d = filepath.Dir(d) {
			t[filepath.ToSlash(d)] = node{Kind: Dir}
		}
	}
	return t
}

func writeTree(t testing.TB, root string, tr tree) {
	t.Helper()
	paths := make([]string, 0, len(tr))
	for p := range tr {
		paths = append(paths, p)
	}
	sort.Slice(paths, func(i, j int) bool { return comparePaths(paths[i], paths[j]) < 0 })
	if err := os.MkdirAll(root, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, p := range paths {
		writeNode(t, filepath.Join(root, filepath.FromSlash(p)), tr[p])
	}
}

func writeNode(t testing.TB, name string, n node) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
		t.Fatal(err)
	}
	var err error
	switch n.Kind {
	case Dir:
		err = os.Mkdir(name, 0o755)
	case Symlink:
		err = os.Symlink(n.Data, name)
	case File:
		perm := os.FileMode(0o644)
		if n.Exec {
			perm = 0o755
		}
		if err = os.WriteFile(name, []byte(n.Data), perm); err == nil {
			err = os.Chmod(name, perm)
		}
	}
	if err != nil {
		t.Fatal(err)
	}
}

// readTree reads every entry under root, skipping the names given.
func readTree(t testing.TB, root string, skip ...string) tree {
	t.Helper()
	tr := tree{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if rel == "." {
			return nil
		}
		rel = filepath.ToSlash(rel)
		for _, s := range skip {
			if rel == s {
				if d.IsDir() {
					return fs.SkipDir
				}
				return nil
			}
		}
		switch {
		case d.Type()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			tr[rel] = node{Kind: Symlink, Data: target}
		case d.IsDir():
			tr[rel] = node{Kind: Dir}
		default:
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			fi, err := d.Info()
			if err != nil {
				return err
			}
			tr[rel] = node{Kind: File, Data: string(data), Exec: fi.Mode()&0o100 != 0}
		}
		return nil
	})
	if os.IsNotExist(err) {
		return tr
	}
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

func diffTrees(want, got tree) string {
	var b strings.Builder
	keys := map[string]bool{}
	for k := range want {
		keys[k] = true
	}
	for k := range got {
		keys[k] = true
	}
	var ks []string
	for k := range keys {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	for _, k := range ks {
		w, wok := want[k]
		g, gok := got[k]
		if wok != gok || w != g {
			fmt.Fprintf(&b, "  %s: want %v, got %v\n", k, show(w, wok), show(g, gok))
		}
	}
	return b.String()
}

func show(n node, ok bool) string {
	if !ok {
		return "absent"
	}
	return n.String()
}

// syncTree changes the tree at root, which holds from, to hold to, touching only the
// paths that differ.
func syncTree(t testing.TB, root string, from, to tree) {
	t.Helper()
	var gone []string
	for p, n := range from {
		if m, ok := to[p]; !ok || m != n {
			gone = append(gone, p)
		}
	}
	sort.Slice(gone, func(i, j int) bool { return comparePaths(gone[i], gone[j]) > 0 })
	for _, p := range gone {
		name := filepath.Join(root, filepath.FromSlash(p))
		if from[p].Kind == Dir && to[p].Kind == Dir {
			continue
		}
		if err := os.RemoveAll(name); err != nil {
			t.Fatal(err)
		}
	}
	var add []string
	for p, n := range to {
		if m, ok := from[p]; !ok || m != n {
			add = append(add, p)
		}
	}
	sort.Slice(add, func(i, j int) bool { return comparePaths(add[i], add[j]) < 0 })
	for _, p := range add {
		name := filepath.Join(root, filepath.FromSlash(p))
		if _, err := os.Lstat(name); err == nil && to[p].Kind == Dir {
			continue // already made for a path below it
		}
		writeNode(t, name, to[p])
	}
}
