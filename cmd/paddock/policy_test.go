package main

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/paddockhq/paddock/images"
	"github.com/paddockhq/paddock/internal/peer"
	"github.com/paddockhq/paddock/internal/place"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/paddockhq/paddock/policy/policytest"
)

// buildPaddock builds the paddock command into a new directory and returns its path.
func buildPaddock(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "paddock")
	// Built as this test binary is, so that a cold run compiles no dependency for it alone.
	if err := peer.Build(".", ".", bin); err != nil {
		t.Fatal(err)
	}
	return bin
}

// policyCheck is the JSON paddock policy check --json prints.
type policyCheck struct {
	Grammar string `json:"grammar"`
	Steps   []struct {
		Command string   `json:"command"`
		Effects []string `json:"effects"`
		Asks    *bool    `json:"asks"`
		Verdict string   `json:"verdict"`
		Rule    string   `json:"rule"`
		Fails   string   `json:"fails"`
	} `json:"steps"`
	Effects []string `json:"effects"`
}

// TestPolicyCorpus passes every row of the command corpus through
// paddock policy check --json, in the fixture the corpus describes: the copy kept in
// policy/testdata, and the shared one beside the repository when it is there.
func TestPolicyCorpus(t *testing.T) {
	bin := buildPaddock(t)
	ws := t.TempDir()
	if err := policytest.Fixture(ws); err != nil {
		t.Fatal(err)
	}
	files := []string{filepath.Join("..", "..", "policy", "testdata", "commands.tsv")}
	if shared := filepath.Join("..", "..", "..", "shared", "corpus", "commands.tsv"); fileExists(shared) {
		files = append(files, shared)
	}
	for _, file := range files {
		rows, err := policytest.ReadCorpus(file)
		if err != nil {
			t.Fatal(err)
		}
		if len(rows) < 40 {
			t.Fatalf("%s: %d rows", file, len(rows))
		}
		for _, row := range rows {
			cmd := exec.Command(bin, "policy", "check", "--json", "--", row.Command)
			cmd.Dir, cmd.Env = ws, append(policytest.CorpusEnv(ws), peer.Env()...)
			out, err := cmd.Output()
			if err != nil {
				t.Errorf("%s:%d: %q: %v", file, row.Line, row.Command, err)
				continue
			}
			var got policyCheck
			dec := json.NewDecoder(strings.NewReader(string(out)))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&got); err != nil {
				t.Errorf("%s:%d: %q: %v: %s", file, row.Line, row.Command, err, out)
				continue
			}
			if !slices.Equal(got.Effects, row.Effects) {
				t.Errorf("%s:%d: %q: effects %v, want %v (%s)", file, row.Line, row.Command, got.Effects, row.Effects, row.Why)
			}
			checkShape(t, row.Command, got)
		}
	}
}

// checkShape holds the JSON form: a grammar, one step at least (exactly one for exec), each
// with a command, sorted effects and asks; the top-level effects their sorted union.
func checkShape(t *testing.T, src string, got policyCheck) {
	t.Helper()
	if got.Grammar != "steps" && got.Grammar != "exec" || len(got.Steps) == 0 || (got.Grammar == "exec" && len(got.Steps) != 1) {
		t.Errorf("%q: grammar %q, %d steps", src, got.Grammar, len(got.Steps))
	}
	var union []string
	for _, s := range got.Steps {
		if s.Command == "" || s.Effects == nil || s.Asks == nil || !slices.IsSorted(s.Effects) {
			t.Errorf("%q: step %+v", src, s)
		}
		union = append(union, s.Effects...)
	}
	slices.Sort(union)
	if union = slices.Compact(union); !slices.Equal(union, got.Effects) && !(len(union) == 0 && len(got.Effects) == 0) {
		t.Errorf("%q: effects %v, union of the steps %v", src, got.Effects, union)
	}
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// A wrong command line exits 2, and so does a script that does not parse (it is the
// command line's); a check, 0.
func TestPolicyExitCodes(t *testing.T) {
	bin := buildPaddock(t)
	for _, tc := range []struct {
		args []string
		code int
	}{
		{[]string{"policy", "check", "--", "ls"}, 0},
		{[]string{"policy", "check", "--auto-effects", "", "--", "cat ~/.netrc"}, 0},
		{[]string{"policy", "check"}, 2},
		{[]string{"policy", "check", "--", "ls", "pwd"}, 2},
		{[]string{"policy", "check", "--auto-effects", "read,secret", "--", "ls"}, 2},
		{[]string{"policy", "check", "--auto-effects", "bogus", "--", "ls"}, 2},
		{[]string{"policy", "check", "--bogus", "--", "ls"}, 2},
		{[]string{"policy", "bogus"}, 2},
		{[]string{"policy", "check", "--", "echo 'unclosed"}, 2},
	} {
		err := exec.Command(bin, tc.args...).Run()
		code := 0
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		if code != tc.code {
			t.Errorf("paddock %q: exit %d, want %d", tc.args, code, tc.code)
		}
	}
}

// TestPolicyScripts runs testdata/script/policy*.txtar with paddock on PATH.
func TestPolicyScripts(t *testing.T) {
	runScripts(t, "policy*.txtar", nil, nil)
}

// runScripts runs the scripts of testdata/script matching glob with a freshly built paddock
// first on PATH (scriptBin); setup, when set, adds to each script's environment.
func runScripts(t *testing.T, glob string, setup func(e *testscript.Env) error, cmds map[string]func(ts *testscript.TestScript, neg bool, args []string)) {
	t.Helper()
	bin := buildPaddock(t)
	scriptBin = bin
	files, err := filepath.Glob(filepath.Join("testdata", "script", glob))
	if err != nil || len(files) == 0 {
		t.Fatalf("no scripts: %v", err)
	}
	testscript.Run(t, testscript.Params{
		Files: files,
		Setup: func(e *testscript.Env) error {
			e.Setenv("PATH", filepath.Dir(bin)+string(os.PathListSeparator)+e.Getenv("PATH"))
			if setup != nil {
				return setup(e)
			}
			return nil
		},
		Cmds: cmds,
	})
}

// paddock policy check and paddock run agree on every corpus script: with the same
// settings (the global file's auto set of read alone, an allow and a deny rule) and nobody
// attached, the steps run reaches are those check says run, and the first it does not run is
// the one check says asks (refused unanswered) or refuses (denied by the rule); a script
// outside the grammar, which the kernel's shell judges command by command, check judges as
// a whole, and never more leniently. Under an auto set of read alone, only reads and steps
// with no effect run: nothing of the host changes.
func TestPolicyCheckAgreesWithRun(t *testing.T) {
	bin := buildPaddock(t)
	kernel, err := images.Default.Find(context.Background(), runtime.GOARCH)
	if err != nil {
		t.Fatal(err)
	}
	conf := t.TempDir()
	os.MkdirAll(filepath.Join(conf, "paddock"), 0o700)
	os.WriteFile(filepath.Join(conf, "paddock", "settings.yaml"), []byte(
		"shell:\n  autoEffects: [read]\n  rules:\n    - {action: allow, command: git log}\n    - {action: deny, command: curl}\n"), 0o600)
	files := []string{filepath.Join("..", "..", "policy", "testdata", "commands.tsv")}
	if shared := filepath.Join("..", "..", "..", "shared", "corpus", "commands.tsv"); fileExists(shared) {
		files = append(files, shared)
	}
	extra := []policytest.Row{
		{Command: "ls; git log -1; curl -s https://example.com"},
		{Command: "cat a b; echo ~/.ssh/id_rsa | xargs cat"},
		{Command: "pwd && ls && touch x"},
		// Where the two once worked a step out apart: a redirection that is not one word,
		// a word that does not expand, a cd into a directory that is not there.
		{Command: "echo hi > d*; ls; touch y"}, // docs and documentation: two words
		{Command: "echo ${NOPE:?gone}; ls; touch y"},
		{Command: "echo ${NOPE:?gone} | cat; ls; touch y"},
		{Command: "cd nowhere; ls ..; touch y"}, // .. is the workspace's parent: outside
		{Command: "cd src; ls ..; touch y"},     // .. is the workspace
		{Command: "cd .git/HEAD; ls; touch y"},
	}
	refused := map[string]int{}
	for _, file := range files {
		rows, err := policytest.ReadCorpus(file)
		if err != nil {
			t.Fatal(err)
		}
		for _, row := range append(rows, extra...) {
			ws := t.TempDir()
			if err := policytest.Fixture(ws); err != nil {
				t.Fatal(err)
			}
			// The audit file is there before check judges, as it is for a user who has run
			// paddock before: a secret place, listed by a step that lists its directory.
			state := t.TempDir()
			os.MkdirAll(filepath.Join(state, "paddock"), 0o700)
			os.WriteFile(place.AuditFile(filepath.Join(state, "paddock")), nil, 0o600)
			env := append(policytest.CorpusEnv(ws), "XDG_CONFIG_HOME="+conf, "XDG_STATE_HOME="+state, "PADDOCK_KERNEL="+kernel)
			env = append(env, peer.Env()...)
			check := exec.Command(bin, "policy", "check", "--json", "--", row.Command)
			check.Dir, check.Env = ws, env
			out, err := check.Output()
			if err != nil {
				t.Errorf("%q: policy check: %v", row.Command, err)
				continue
			}
			var got policyCheck
			if err := json.Unmarshal(out, &got); err != nil {
				t.Fatalf("%q: %v", row.Command, err)
			}
			run := exec.Command(bin, "run", "--transport", "local", "--json", "--", row.Command)
			run.Dir, run.Env, run.Stdin = ws, env, nil
			rout, _ := run.Output()
			var res struct {
				Steps []struct {
					Index   int
					Command string
				}
				End struct {
					Kind, Code, Command string
					Step                int
				}
			}
			if err := json.Unmarshal(rout, &res); err != nil {
				t.Errorf("%q: paddock run --json: %v: %s", row.Command, err, rout)
				continue
			}
			if got.Grammar == "exec" {
				// The kernel's shell asks about each command as it runs, with the words it
				// runs with; check judges the whole script at once, every command it may run,
				// every branch. So check is the stricter: what it says runs, runs unasked,
				// and where run refuses a command, check asks about (or refuses) the script.
				v := got.Steps[0].Verdict
				switch {
				case v == "run" && res.End.Kind == "refused":
					t.Errorf("%q: check says run, run refused it (%s)", row.Command, res.End.Code)
				case res.End.Kind == "refused":
					refused[res.End.Code]++
				}
				continue
			}
			// Each step run ran is a step check says runs, worked out the same: the same
			// words, shown the same.
			for _, st := range res.Steps {
				if st.Index >= len(got.Steps) {
					t.Errorf("%q: run ran step %d, check has %d steps", row.Command, st.Index, len(got.Steps))
					continue
				}
				// A step the bash tool failed before running it (fails) ran nothing.
				if c := got.Steps[st.Index]; (c.Verdict != "run" && c.Fails == "") || c.Command != st.Command {
					t.Errorf("%q: run ran step %d as %q, check says %s for %q", row.Command, st.Index, st.Command, c.Verdict, c.Command)
				}
			}
			if res.End.Kind != "refused" {
				continue
			}
			if res.End.Step >= len(got.Steps) {
				t.Errorf("%q: run refused step %d, check has %d steps", row.Command, res.End.Step, len(got.Steps))
				continue
			}
			if c := got.Steps[res.End.Step].Command; c != res.End.Command {
				t.Errorf("%q: run refused step %d as %q, check shows %q", row.Command, res.End.Step, res.End.Command, c)
			}
			refused[res.End.Code]++
			want := map[string]string{"unanswered": "ask", "denied": "refuse"}[res.End.Code]
			if v := got.Steps[res.End.Step].Verdict; v != want {
				t.Errorf("%q: run refused step %d (%s), check says %s", row.Command, res.End.Step, res.End.Code, v)
			}
		}
	}
	// The comparison is not empty: many scripts stop at a question, and the deny rule acts.
	if refused["unanswered"] < 20 || refused["denied"] < 1 {
		t.Errorf("refusals seen: %v", refused)
	}
}
