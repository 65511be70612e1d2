package workspace

import (
	"context"
	"os"
	"path/filepath"
	"testing"
)

// ws makes a parent from base, clones it, then lets the parent and the child change their
// trees, and returns the parent and workspace directories.
func ws(t *testing.T, base tree, parentEdit, childEdit func(root string)) (parent, dir string) {
	t.Helper()
	tmp := t.TempDir()
	parent, dir = filepath.Join(tmp, "parent"), filepath.Join(tmp, "ws")
	writeTree(t, parent, base)
	if _, err := Clone(context.Background(), parent, dir, Options{}); err != nil {
		t.Fatal(err)
	}
	if got := readTree(t, filepath.Join(dir, CopyDir)); diffTrees(base, got) != "" {
		t.Fatalf("copy differs from the parent:\n%s", diffTrees(base, got))
	}
	if parentEdit != nil {
		parentEdit(parent)
	}
	if childEdit != nil {
		childEdit(filepath.Join(dir, CopyDir))
	}
	return parent, dir
}

func TestSmoke(t *testing.T) {
	parent, dir := ws(t, spec("a=1", "b/c=2", "e/", "l->a"), func(r string) {
		os.WriteFile(filepath.Join(r, "a"), []byte("parent"), 0o644)
	}, func(r string) {
		os.WriteFile(filepath.Join(r, "a"), []byte("child"), 0o644)
		os.WriteFile(filepath.Join(r, "b/c"), []byte("child"), 0o644)
		os.WriteFile(filepath.Join(r, "new"), []byte("n"), 0o644)
	})
	rep, err := Handback(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%+v", rep)
	t.Log(readTree(t, parent))
	t.Log(readTree(t, dir))
}
