package pathmap

import (
	"os"
	"path/filepath"
	"testing"
)

// BenchmarkToHost maps and resolves a path five levels into a mount, with a symlink on the
// way, against filepath.EvalSymlinks of the same host path: what a caller would otherwise do
// (and EvalSymlinks checks no mount).
func BenchmarkToHost(b *testing.B) {
	root := tempDir(b)
	mkdirs(b, root, "w/a/b/c/d", "d")
	symlink(b, "a/b", root+"/w/l")
	if err := os.WriteFile(root+"/w/a/b/c/d/f", nil, 0o644); err != nil {
		b.Fatal(err)
	}
	m := mustNew(b, Mount{Sandbox: "/work", Host: root + "/w"}, Mount{Sandbox: "/data", Host: root + "/d"})
	want := root + "/w/a/b/c/d/f"
	b.Run("pathmap", func(b *testing.B) {
		for b.Loop() {
			if got, err := m.ToHost("/work/l/c/d/f"); err != nil || got != want {
				b.Fatal(got, err)
			}
		}
	})
	b.Run("evalsymlinks", func(b *testing.B) {
		for b.Loop() {
			if got, err := filepath.EvalSymlinks(root + "/w/l/c/d/f"); err != nil || got != want {
				b.Fatal(got, err)
			}
		}
	})
}
