package kubernetes

import (
	"context"
	"os"
	"path/filepath"
	"testing"
)

// law: nothing-lost. A hand-back whose parent changed a file the pod changed too keeps the
// pod's version where the report says it is saved: the sync's directory stays while it
// holds a conflict, and goes when nothing is left in it.
func TestHandbackKeepsConflicts(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	for _, conflict := range []bool{true, false} {
		parent := t.TempDir()
		os.WriteFile(filepath.Join(parent, "both.txt"), []byte("base\n"), 0o644)
		s, err := StartSync(parent)
		if err != nil {
			t.Fatal(err)
		}
		// The pod's tree, as it came back: its own version of both.txt, a new file.
		os.WriteFile(filepath.Join(s.Copy(), "both.txt"), []byte("pod\n"), 0o644)
		os.WriteFile(filepath.Join(s.Copy(), "made.txt"), []byte("new\n"), 0o644)
		if conflict {
			os.WriteFile(filepath.Join(parent, "both.txt"), []byte("host\n"), 0o644)
		}
		s.fetched = true
		rep, err := s.Handback(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if b, _ := os.ReadFile(filepath.Join(parent, "made.txt")); string(b) != "new\n" {
			t.Errorf("conflict %v: made.txt in the parent: %q", conflict, b)
		}
		if !conflict {
			if len(rep.Conflicts) != 0 {
				t.Errorf("conflicts %+v", rep.Conflicts)
			}
			if _, err := os.Stat(s.Dir); !os.IsNotExist(err) {
				t.Errorf("the sync's directory is left with nothing in it: %v", err)
			}
			continue
		}
		if len(rep.Conflicts) != 1 || rep.Conflicts[0].Path != "both.txt" || rep.Conflicts[0].Saved == "" {
			t.Fatalf("conflicts %+v", rep.Conflicts)
		}
		if b, err := os.ReadFile(filepath.Join(rep.Dir, rep.Conflicts[0].Saved)); err != nil || string(b) != "pod\n" {
			t.Errorf("the pod's version of both.txt, where the report says it is saved: %q %v", b, err)
		}
		if b, _ := os.ReadFile(filepath.Join(parent, "both.txt")); string(b) != "host\n" {
			t.Errorf("the parent's both.txt: %q", b)
		}
	}
}
