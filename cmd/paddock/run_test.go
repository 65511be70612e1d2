package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

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
	files := map[string]string{
		"a.txt":          "alpha\nbeta\ngamma\n",
		"b.txt":          "one\ntwo\nthree\nfour\n",
		"c.go":           "package c\n",
		"with space.txt": "spaced\n",
		".hidden":        "hidden\n",
		"sub/d.txt":      "delta\n",
		"sub/e.md":       "# e\n",
		"nums":           "3\n1\n2\n10\n",
	}
	for name, body := range files {
		p := filepath.Join(dir, name)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// differential are scripts within the grammar; each must give the same stdout, stderr and
// exit status through paddock run as through bash -c in the same directory.
var differential = []string{
	`echo hello`,
	`echo hello world`,
	`echo "hello   world"`,
	`echo 'single $HOME'`,
	`echo "double $HOME"`,
	`echo $HOME`,
	`echo ${HOME}/x`,
	`echo ~`,
	`echo ~/sub`,
	`echo $NOPE_UNSET end`,
	`echo "$NOPE_UNSET" end`,
	`echo a\ b`,
	`echo $'tab\there'`,
	`printf '%s\n' a b c`,
	`printf '%s|' *.txt`,
	`echo *.txt`,
	`echo sub/*`,
	`echo *.nomatch`,
	`echo ?.go`,
	`echo [ab].txt`,
	`echo .*`,
	`ls`,
	`ls sub`,
	`ls -a | sort`,
	`cat a.txt`,
	`cat a.txt b.txt | wc -l`,
	`cat a.txt | grep beta`,
	`cat a.txt | grep nope`,
	`sort -n nums`,
	`sort nums | head -n 2`,
	`cat nums | sort -n | tail -n 1`,
	`true && echo yes`,
	`false && echo yes`,
	`false || echo fallback`,
	`true || echo never`,
	`false; echo $?`,
	`true; echo $?`,
	`sh -c 'exit 7'; echo $?`,
	`false | true; echo $?`,
	`true | false; echo $?`,
	`echo one; echo two`,
	"echo one\necho two",
	`echo x > out.txt; cat out.txt`,
	`echo x > out.txt; echo y >> out.txt; cat out.txt`,
	`cat < a.txt`,
	`wc -l < b.txt`,
	`ls nope 2>&1`,
	`ls nope 2> err.txt; cat err.txt`,
	`ls nope a.txt &> all.txt; cat all.txt`,
	`echo to-stderr >&2`,
	`echo both; ls nope`,
	`nosuchcommand`,
	`nosuchcommand; echo after $?`,
	`cd sub && pwd && ls`,
	`cd sub; cd ..; ls | head -n 1`,
	`cd nope`,
	`cd nope; echo $?`,
	`X=1; echo $X`,
	`X=hello; sh -c 'echo ${X:-unset}'`,
	`export X=hello; sh -c 'echo $X'`,
	`X=inline sh -c 'echo $X'`,
	`export A=1 B=2; echo $A$B`,
	`A=1; unset A; echo ${A}end`,
	`exit 4`,
	`echo before; exit 2; echo after`,
	`yes | head -n 3`,
	`seq 1 5 | tail -n 2`,
	`head -c 5 a.txt`,
	`echo "a b" c | wc -w`,
	`echo '"quoted"'`,
	`echo "it's"`,
	`echo a"b"'c'`,
	`grep -c a a.txt b.txt`,
	`find sub -name '*.txt'`,
	`cat 'with space.txt'`,
	`cat with\ space.txt`,
	`echo $?`,
	`test -f a.txt && echo file`,
	`[ -d sub ] && echo dir`,
	`tr a-z A-Z < a.txt`,
	`cut -c1-3 a.txt | uniq`,
	`sh -c 'echo out; echo err >&2; exit 3'`,
	`sh -c 'exit 300'; echo $?`,
	`cat < nope; echo $?`,
	`echo x > sub; echo $?`,
	`cat a.txt > nodir/x`,
}

func TestRunDifferential(t *testing.T) {
	peer.Program(t, "bash", "bash")
	if len(differential) < 60 {
		t.Fatalf("%d scripts, want at least 60", len(differential))
	}
	for _, script := range differential {
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
