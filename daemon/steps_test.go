package daemon

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/paddockhq/paddock/orchestrator"
)

// A job's steps file holds each step ended once; reading it takes the steps the state file
// counts and cuts off what a daemon that died wrote past them, a half-written line too.
func TestStepsFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "job.steps")
	steps := []orchestrator.StepResult{{Index: 0, Command: "a"}, {Index: 1, Command: "b", Status: 3}, {Index: 2, Command: "c"}}
	if err := appendSteps(path, steps[:2]); err != nil {
		t.Fatal(err)
	}
	if err := appendSteps(path, steps[2:]); err != nil {
		t.Fatal(err)
	}
	f, _ := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	f.Write([]byte(`{"index":3,"comm`))
	f.Close()
	got, err := readSteps(path, 2)
	if err != nil || len(got) != 2 || got[1].Command != "b" || got[1].Status != 3 {
		t.Fatalf("%+v %v", got, err)
	}
	// What follows the two is gone: the next step appended is the third line.
	if err := appendSteps(path, steps[2:]); err != nil {
		t.Fatal(err)
	}
	if got, err := readSteps(path, 3); err != nil || len(got) != 3 || got[2].Command != "c" {
		t.Fatalf("%+v %v", got, err)
	}
	if _, err := readSteps(path, 4); err == nil {
		t.Error("four steps read from a file of three")
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("the steps file: %v %v", fi.Mode(), err)
	}
}

// A job none of whose steps had ended has no steps file: it is read as no steps, so that
// the job is taken up again (a one-step job running at a stop).
func TestStepsFileNeverMade(t *testing.T) {
	path := filepath.Join(t.TempDir(), "job.steps")
	if got, err := readSteps(path, 0); err != nil || len(got) != 0 {
		t.Fatalf("%+v %v", got, err)
	}
	if _, err := readSteps(path, 1); err == nil {
		t.Error("a step read from no file")
	}
}
