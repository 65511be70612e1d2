package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Eight children each write their own file and all change one shared file: the eight own
// files are taken; the shared file is taken from the first child handed back and is a
// conflict for each other child, its version kept under that child's conflicts/.
// law: cow_conflict_reported, cow_takes_child
func TestFanoutEightChildren(t *testing.T) {
	ws := t.TempDir()
	os.WriteFile(filepath.Join(ws, "shared.txt"), []byte("parent\n"), 0o644)
	state := t.TempDir()
	so, se, code := paddock(t, "", "fanout", "-n", "8", "--parallel", "8", "--json", "--workspace", ws, "--state-dir", state, "--",
		`echo own $PADDOCK_CHILD_INDEX > own-$PADDOCK_CHILD_INDEX.txt; echo child $PADDOCK_CHILD_INDEX > shared.txt`)
	if code != exitConflicts {
		t.Fatalf("exit %d, want %d (conflicts)\n%s\n%s", code, exitConflicts, so, se)
	}
	var rep fanoutReport
	if err := json.Unmarshal([]byte(so), &rep); err != nil {
		t.Fatalf("%v\n%s", err, so)
	}
	if len(rep.Children) != 8 || rep.Failed != 0 || rep.Conflicts != 7 {
		t.Fatalf("report: %d children, %d failed, %d conflicts", len(rep.Children), rep.Failed, rep.Conflicts)
	}
	takers := 0
	for _, c := range rep.Children {
		own := fmt.Sprintf("own-%d.txt", c.Index)
		b, err := os.ReadFile(filepath.Join(ws, own))
		if err != nil || string(b) != fmt.Sprintf("own %d\n", c.Index) {
			t.Errorf("%s not taken: %q %v", own, b, err)
		}
		tookShared := false
		for _, ch := range c.Taken {
			if ch.Path == "shared.txt" {
				tookShared = true
			}
		}
		if tookShared {
			takers++
			b, _ := os.ReadFile(filepath.Join(ws, "shared.txt"))
			if string(b) != fmt.Sprintf("child %d\n", c.Index) {
				t.Errorf("shared.txt holds %q, not the taking child's version", b)
			}
			continue
		}
		if len(c.Conflicts) != 1 || c.Conflicts[0].Path != "shared.txt" {
			t.Fatalf("%s: conflicts %+v", c.Name, c.Conflicts)
		}
		saved := filepath.Join(c.Dir, c.Conflicts[0].Saved)
		b, err = os.ReadFile(saved)
		if err != nil || strings.TrimSpace(string(b)) != fmt.Sprintf("child %d", c.Index) {
			t.Errorf("%s: its version under conflicts/ is %q, %v", c.Name, b, err)
		}
	}
	if takers != 1 {
		t.Fatalf("%d children took shared.txt, want 1", takers)
	}
}
