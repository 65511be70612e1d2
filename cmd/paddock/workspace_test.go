package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/paddockhq/paddock/workspace"
)

// wsRun runs the CLI in process and returns its stdout, stderr and exit code.
func wsRun(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	root := newRoot()
	var out, errOut bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errOut)
	root.SetArgs(args)
	errFile, err := os.CreateTemp(t.TempDir(), "stderr")
	if err != nil {
		t.Fatal(err)
	}
	cmd, err := root.ExecuteC()
	code := exitCode(err, nil, jsonAsked(cmd), &out, errFile)
	errFile.Close()
	msg, _ := os.ReadFile(errFile.Name())
	return out.String(), errOut.String() + string(msg), code
}

func wsWrite(t *testing.T, name, data string) {
	t.Helper()
	os.MkdirAll(filepath.Dir(name), 0o755)
	if err := os.WriteFile(name, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

// clone, a change on both sides, and a hand-back that exits 3 with the conflict reported
// exactly as handback.json holds it.
func TestWorkspaceCommands(t *testing.T) {
	tmp := t.TempDir()
	parent, dir := filepath.Join(tmp, "parent"), filepath.Join(tmp, "ws")
	wsWrite(t, filepath.Join(parent, "a.txt"), "1")
	wsWrite(t, filepath.Join(parent, "b.txt"), "1")

	out, _, code := wsRun(t, "workspace", "list", parent)
	if code != exitOK || out != "a.txt\nb.txt\n" {
		t.Fatalf("list: code %d, out %q", code, out)
	}
	out, _, code = wsRun(t, "workspace", "list", "--json", parent)
	if want := "[\n  {\n    \"path\": \"a.txt\",\n    \"kind\": \"file\"\n  },\n  {\n    \"path\": \"b.txt\",\n    \"kind\": \"file\"\n  }\n]\n"; code != exitOK || out != want {
		t.Fatalf("list --json: code %d, out %q, want %q", code, out, want)
	}
	out, _, code = wsRun(t, "workspace", "list", "--json", t.TempDir())
	if code != exitOK || out != "[]\n" {
		t.Fatalf("list --json of nothing: code %d, out %q", code, out)
	}
	out, errOut, code := wsRun(t, "workspace", "clone", "--json", parent, dir)
	if code != exitOK {
		t.Fatalf("clone: code %d: %s", code, errOut)
	}
	var cr workspace.CloneReport
	if err := json.Unmarshal([]byte(out), &cr); err != nil || cr.Files != 2 || cr.Cloned+cr.Copied != 2 {
		t.Fatalf("clone report %q: %v", out, err)
	}
	if (cr.Copied > 0) != strings.Contains(errOut, "warning: no reflinks") {
		t.Errorf("copied %d files; stderr %q", cr.Copied, errOut)
	}
	wsWrite(t, filepath.Join(parent, "a.txt"), "parent")
	wsWrite(t, filepath.Join(dir, "copy", "a.txt"), "child")
	wsWrite(t, filepath.Join(dir, "copy", "b.txt"), "child")

	out, _, code = wsRun(t, "workspace", "handback", "--json", dir)
	if code != exitConflicts {
		t.Fatalf("handback with a conflict: code %d, want %d", code, exitConflicts)
	}
	var got, file workspace.Report
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(dir, workspace.ReportName))
	if err != nil {
		t.Fatal(err)
	}
	json.Unmarshal(data, &file)
	if !reflect.DeepEqual(got, file) {
		t.Errorf("printed report %+v differs from handback.json %+v", got, file)
	}
	if len(got.Conflicts) != 1 || got.Conflicts[0].Path != "a.txt" || len(got.Taken) != 1 || got.Taken[0].Path != "b.txt" {
		t.Errorf("report %+v", got)
	}
	if b, _ := os.ReadFile(filepath.Join(parent, "b.txt")); string(b) != "child" {
		t.Errorf("b.txt = %q, want the child's", b)
	}
	// A repeat prints the same and still exits 3; the text form names the saved version.
	out, _, code = wsRun(t, "workspace", "handback", dir)
	if code != exitConflicts || !strings.Contains(out, "C a.txt (both_changed") || !strings.Contains(out, filepath.Join(dir, "conflicts", "a.txt")) {
		t.Errorf("repeat: code %d, out %q", code, out)
	}
}

func TestWorkspaceUsage(t *testing.T) {
	for _, args := range [][]string{
		{"workspace", "clone", "only-one"},
		{"workspace", "handback"},
		{"workspace", "handback", "--nope", "x"},
	} {
		if _, _, code := wsRun(t, args...); code != exitUsage {
			t.Errorf("%q: code %d, want %d", args, code, exitUsage)
		}
	}
	// A hand-back of a directory holding no workspace fails, not as usage.
	if _, errOut, code := wsRun(t, "workspace", "handback", t.TempDir()); code != exitError || !strings.Contains(errOut, "no isolated workspace") {
		t.Errorf("handback of an empty dir: code %d, %q", code, errOut)
	}
	// A clean hand-back exits 0.
	tmp := t.TempDir()
	wsWrite(t, filepath.Join(tmp, "p", "f"), "x")
	if _, e, code := wsRun(t, "workspace", "clone", filepath.Join(tmp, "p"), filepath.Join(tmp, "w")); code != 0 {
		t.Fatal(e)
	}
	if out, _, code := wsRun(t, "workspace", "handback", filepath.Join(tmp, "w")); code != exitOK || !strings.Contains(out, "0 taken, 0 conflicts") {
		t.Errorf("clean handback: code %d, %q", code, out)
	}
}
