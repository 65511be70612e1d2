package workspace

import (
	"os"
	"path/filepath"
	"testing"
)

// A repository configuration of any size, sparse, is not read whole to be scanned: past a
// mebibyte git reads the facts instead.
func TestSnapshotFactsBoundsConfig(t *testing.T) {
	parent := t.TempDir()
	if err := os.Mkdir(filepath.Join(parent, ".git"), 0o700); err != nil {
		t.Fatal(err)
	}
	config := filepath.Join(parent, ".git", "config")
	if err := os.WriteFile(config, []byte("[core]\n\tbare = false\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if h, ok := snapshotFacts(parent); !ok || !h.GitFromBase {
		t.Fatalf("a plain configuration: ok %v, GitFromBase %v", ok, h.GitFromBase)
	}
	if err := os.Truncate(config, 1<<30); err != nil {
		t.Fatal(err)
	}
	if _, ok := snapshotFacts(parent); ok {
		t.Fatal("a sparse configuration of a gibibyte was scanned")
	}
	if err := os.Truncate(config, maxGitConfig); err != nil {
		t.Fatal(err)
	}
	if _, ok := snapshotFacts(parent); !ok {
		t.Fatal("a configuration of exactly the limit was refused")
	}
}
