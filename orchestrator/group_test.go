package orchestrator

import (
	"context"
	"os"
	"path/filepath"
	"testing"
)

// Children spawned as a group share one base: each works in its own copy, hands back as
// a child spawned alone does, and the group's directories go with the last clean one, by
// the time the parent has closed.
func TestSpawnGroup(t *testing.T) {
	ws, state := t.TempDir(), t.TempDir()
	os.WriteFile(filepath.Join(ws, "a.txt"), []byte("parent\n"), 0o644)
	s := openLocal(t, ws, Config{StateDir: state})
	ctx := context.Background()
	kids, err := s.SpawnGroup(ctx, []ChildConfig{
		{Name: "one", Workspace: Isolated}, {Name: "two", Workspace: Isolated}, {Name: "shared"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if groups, _ := filepath.Glob(filepath.Join(state, "group-*", "base")); len(groups) != 1 {
		t.Fatalf("shared bases: %v, want one", groups)
	}
	if kids[2].CloneReport() != nil || kids[2].Workspace() != ws {
		t.Errorf("the shared child got a clone: %+v", kids[2].CloneReport())
	}
	for i, script := range []string{"echo one > one.txt", "echo two > two.txt"} {
		if _, err := kids[i].Bash(ctx, script); err != nil {
			t.Fatal(err)
		}
		if kids[i].Workspace() == ws {
			t.Errorf("%s works in the parent's workspace", kids[i].name)
		}
	}
	for _, k := range kids {
		if err := k.Close(); err != nil {
			t.Fatal(err)
		}
	}
	for i, name := range []string{"one.txt", "two.txt"} {
		if rep := kids[i].Handback(); rep == nil || len(rep.Taken) != 1 || rep.Dir != "" {
			t.Errorf("hand-back %d: %+v", i, rep)
		}
		if _, err := os.Stat(filepath.Join(ws, name)); err != nil {
			t.Errorf("%s not taken: %v", name, err)
		}
	}
	// The trees go in the background; once the parent has closed, nothing is left.
	s.Close()
	if left, _ := os.ReadDir(state); len(left) > 1 { // the audit log may stay
		var names []string
		for _, e := range left {
			names = append(names, e.Name())
		}
		t.Errorf("left in the state directory: %v", names)
	}
}
