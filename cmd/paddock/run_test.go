package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"

	"github.com/paddockhq/paddock/internal/difftest"
	"github.com/paddockhq/paddock/internal/peer"
	"github.com/paddockhq/paddock/session"
)

// paddock runs the CLI in-process, as a user would run it, and returns its output and exit
// status.
func paddock(t testing.TB, dir string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	root := newRoot()
	var out, errOut bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errOut)
	root.SetArgs(args)
	wd, _ := os.Getwd()
	if dir != "" {
		os.Chdir(dir)
		defer os.Chdir(wd)
	}
	cmd, err := root.ExecuteC()
	code = exitCode(err, nil, jsonAsked(cmd), &out, &errOut)
	return out.String(), errOut.String(), code
}

// fixture makes the directory the differential scripts run in.
func fixture(t testing.TB) string {
	dir := t.TempDir()
	if err := difftest.Fixture(dir); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestRunDifferential(t *testing.T) {
	peer.Program(t, "bash", "bash")
	if len(difftest.Scripts) < 60 {
		t.Fatalf("%d scripts, want at least 60", len(difftest.Scripts))
	}
	for _, script := range difftest.Scripts {
		want := fixture(t)
		cmd := exec.Command("bash", "-c", script)
		cmd.Dir = want
		var wo, we bytes.Buffer
		cmd.Stdout, cmd.Stderr = &wo, &we
		wcode := 0
		if err := cmd.Run(); err != nil {
			var ee *exec.ExitError
			if !errors.As(err, &ee) {
				t.Fatal(err)
			}
			wcode = ee.ExitCode()
			if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
				wcode = 128 + int(ws.Signal())
			}
		}
		got := fixture(t)
		so, se, code := paddock(t, got, "run", "--transport", "local", "--", script)
		// The fixture's path differs between the two runs.
		norm := func(s, dir string) string { return strings.ReplaceAll(s, dir, "$DIR") }
		if norm(so, got) != norm(wo.String(), want) || norm(se, got) != norm(we.String(), want) || code != wcode {
			t.Errorf("%q:\npaddock: status %d\nstdout %q\nstderr %q\nbash:    status %d\nstdout %q\nstderr %q",
				script, code, so, se, wcode, wo.String(), we.String())
		}
	}
}

func TestRunJSON(t *testing.T) {
	dir := fixture(t)
	so, _, code := paddock(t, dir, "run", "--transport", "local", "--json", "--", "cat a.txt | wc -l; exit 3")
	var res struct {
		Grammar string
		Steps   []struct {
			Command string
			Status  int
			Stdout  struct{ Text string }
		}
		End struct {
			Kind   string
			Status int
		}
	}
	if err := json.Unmarshal([]byte(so), &res); err != nil {
		t.Fatalf("%v: %s", err, so)
	}
	if code != 3 || res.Grammar != "steps" || len(res.Steps) != 3 || strings.TrimSpace(res.Steps[1].Stdout.Text) != "3" || res.End.Kind != "exited" {
		t.Fatalf("code %d, result %+v", code, res)
	}
}

// Every verdict of a run is a record in the CLI's audit file, 0600.
func TestRunAudits(t *testing.T) {
	dir := fixture(t)
	_, _, code := paddock(t, dir, "run", "--transport", "local", "--auto-effects", "read", "--", "cat a.txt; echo x > f")
	if code != 126 {
		t.Fatalf("exit %d, want 126 (the write refused, nobody attached)", code)
	}
	p := session.AuditFile()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"command":"cat a.txt"`) || !strings.Contains(string(b), `"outcome":"unanswered"`) {
		t.Fatalf("audit file:\n%s", b)
	}
	if fi, _ := os.Stat(p); fi.Mode().Perm() != 0o600 {
		t.Fatalf("audit file mode %v", fi.Mode())
	}
}
