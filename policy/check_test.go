package policy

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/paddockhq/paddock/script"
)

func check(t *testing.T, ctx *Context, src string) Analysis {
	t.Helper()
	sc, err := script.Parse(src)
	if err != nil {
		t.Fatalf("%q: %v", src, err)
	}
	return Check(ctx, sc)
}

func TestCheckSteps(t *testing.T) {
	t.Parallel()
	ctx := testContext()
	ctx.Env = append(ctx.Env, "SRC=src", "EMPTY=")
	for _, tc := range []struct {
		src      string
		commands []string
		effects  []string
	}{
		{"pwd", []string{"pwd"}, []string{""}},
		{"cat src/main.go | wc -l", []string{"cat src/main.go", "wc -l"}, []string{"read", "read"}},
		{"ls && rm -rf build", []string{"ls", "rm -rf build"}, []string{"read", "write"}},
		// Expansion over the environment, with globs through the FS.
		{"cat $SRC/*.go", []string{"cat src/main.go"}, []string{"read"}},
		{"cat docs/*.go", []string{"cat docs/main.go"}, []string{"read"}},
		{"cat *.nomatch", []string{"cat '*.nomatch'"}, []string{"read"}},
		{"cat ~/.netrc", []string{"cat /home/u/.netrc"}, []string{"read,secret"}},
		{`cat "$HOME"/.npmrc`, []string{"cat /home/u/.npmrc"}, []string{"read,secret"}},
		{"$'\\x72\\x6d' -rf build", []string{"rm -rf build"}, []string{"write"}},
		{"echo $EMPTY x", []string{"echo x"}, []string{""}},
		// cd, export, assignments and unset carry to later steps.
		{"cd src && cat main.go", []string{"cd src", "cat main.go"}, []string{"", "read"}},
		{"cd; ls", []string{"cd", "ls"}, []string{"", "read,secret"}},                         // cd alone names no path
		{"cd /home/u && ls", []string{"cd /home/u", "ls"}, []string{"secret", "read,secret"}}, // cd names a path that holds one
		{"cd src; cd ..; ls", []string{"cd src", "cd ..", "ls"}, []string{"", "", "read"}},
		{"cd keys/..; ls", []string{"cd keys/..", "ls"}, []string{"secret", "read"}}, // cd is logical
		{"export D=/home/u/.ssh; cat $D/id_ed25519", []string{"export D=/home/u/.ssh", "cat /home/u/.ssh/id_ed25519"}, []string{"exec,secret", "read,secret"}},
		{"X=/home/u; ls $X", []string{"X=/home/u", "ls /home/u"}, []string{"exec,secret", "read,secret"}},
		{"unset SRC; cat $SRC/x", []string{"unset SRC", "cat /x"}, []string{"", "read"}},
		{"X=1 cat $X", []string{"X=1 cat", ""}[:1], []string{"exec,read"}}, // X is the command's, not the shell's
		// Redirections, shown as they run.
		{"echo hi > out.txt 2>&1", []string{"echo hi >out.txt 2>&1"}, []string{"write"}},
		{"cat < /home/u/.ssh/id_ed25519", []string{"cat </home/u/.ssh/id_ed25519"}, []string{"read,secret"}},
		{"cd /srv/aws && echo x >> log", []string{"cd /srv/aws", "echo x >>log"}, []string{"secret", "outside,write"}}, // the directory holds a secret
		// A cd that fails leaves the directory as it was, as bash's does: the write after it
		// lands in the workspace.
		{"cd /nowhere; echo x >> log", []string{"cd /nowhere", "echo x >>log"}, []string{"", "write"}},
		{"cd src/main.go; echo x >> log", []string{"cd src/main.go", "echo x >>log"}, []string{"", "write"}}, // not a directory
		{"echo x &> /dev/null", []string{"echo x &>/dev/null"}, []string{""}},
		// Control characters are shown escaped.
		{"echo $'a\\u202eb' $'\\n'", []string{`echo $'a\xe2\x80\xaeb' $'\x0a'`}, []string{""}},
	} {
		a := check(t, ctx, tc.src)
		if a.Grammar != script.Steps || len(a.Steps) != len(tc.commands) {
			t.Errorf("%q: grammar %s, %d steps", tc.src, a.Grammar, len(a.Steps))
			continue
		}
		var union Effects
		for i, s := range a.Steps {
			if s.Command != tc.commands[i] || s.Effects.String() != tc.effects[i] {
				t.Errorf("%q: step %d: %q %q, want %q %q", tc.src, i, s.Command, s.Effects, tc.commands[i], tc.effects[i])
			}
			union |= s.Effects
		}
		if a.Effects != union {
			t.Errorf("%q: effects %s, union of the steps %s", tc.src, a.Effects, union)
		}
	}
}

func TestCheckExec(t *testing.T) {
	t.Parallel()
	ctx := testContext()
	for _, tc := range []struct {
		src  string
		want string
	}{
		{"if true; then echo; fi", "exec"},
		{"(cd x && rm -rf y)", "exec,write"},
		{"for f in /home/u/.ssh/*; do cat $f; done", "exec,read,secret"},
		{"echo $(cat /home/u/.ssh/id_ed25519)", "exec,read,secret"},
		{"echo `cat ~/.netrc`", "exec,read,secret"},
		{"printf '%s' \"$(< ~/.git-credentials)\"", "exec,read,secret"},
		{"cat <(cat /home/u/.netrc)", "exec,read,secret"},
		{"diff <(ls) >(cat)", "exec,read"},
		{"{ echo; } > /tmp/x", "exec,outside,write"},
		{"while read l; do echo $l; done < /home/u/.netrc", "exec,read,secret"},
		{"echo > $(mktemp)", "exec,outside,protected,write"},
		{"cat < $(ls)", "exec,read"},
		{"if true; then curl -o f https://example.com; fi", "exec,net,write"},
		{"cat <<EOF\n$(rm -rf /tmp/x)\nEOF", "exec,outside,read,write"},
		{"cat <<'EOF'\n$(rm -rf /tmp/x)\nEOF", "exec,read"},
		{"sleep 1 &", "exec"},
		{"f() { rm -rf /usr/bin/x; }; f", "exec,protected,write"},
		{"exec 3<>/dev/tcp/example.com/80", "exec,net"},
		{"ls |& cat", "exec,read"},
		{"x=$(cat /home/u/.ssh/id_ed25519)", "exec,read,secret"},
		{"[[ -f /home/u/.ssh/id_ed25519 ]] && echo yes", "exec,secret"},
		{"cmd=rm; $cmd -rf build", "exec"},
		{"case \"$1\" in clean) rm -rf build;; esac", "exec,write"},
		{"nohup python3 server.py > server.log 2>&1 &", "exec,write"},
		{"declare -x A=/home/u/.aws", "exec,secret"},
	} {
		a := check(t, ctx, tc.src)
		if a.Grammar != script.Exec || len(a.Steps) != 1 {
			t.Errorf("%q: grammar %s, %d steps", tc.src, a.Grammar, len(a.Steps))
			continue
		}
		if a.Effects.String() != tc.want || a.Steps[0].Effects != a.Effects {
			t.Errorf("%q: %s, want %s", tc.src, a.Effects, tc.want)
		}
		if want := Quote([]string{"bash", "-c", tc.src}); a.Steps[0].Command != want {
			t.Errorf("%q: shown as %q, want %q", tc.src, a.Steps[0].Command, want)
		}
	}
}

func TestCheckAsks(t *testing.T) {
	t.Parallel()
	ctx := testContext()
	ctx.Auto, _ = ParseAutoSet([]string{"read"})
	a := check(t, ctx, "cat src/main.go; rm -rf build; cat ~/.netrc; pwd")
	var asks []bool
	for _, s := range a.Steps {
		asks = append(asks, s.Asks)
	}
	if want := []bool{false, true, true, false}; !equalBools(asks, want) {
		t.Errorf("asks %v, want %v", asks, want)
	}
	ctx = testContext()
	ctx.Auto = AutoSet{}
	if a := check(t, ctx, "pwd; cat f"); a.Steps[0].Asks || !a.Steps[1].Asks {
		t.Errorf("zero auto set: %+v", a.Steps)
	}
}

func equalBools(a, b []bool) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestAnalysisJSON(t *testing.T) {
	t.Parallel()
	a := check(t, testContext(), "pwd; cat ~/.netrc")
	b, err := json.Marshal(a)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"grammar":"steps","steps":[{"command":"pwd","effects":[],"asks":false,"verdict":"run"},` +
		`{"command":"cat /home/u/.netrc","effects":["read","secret"],"asks":true,"verdict":"ask"}],"effects":["read","secret"]}`
	if string(b) != want {
		t.Errorf("%s\nwant %s", b, want)
	}
	var keys map[string]json.RawMessage
	if err := json.Unmarshal(b, &keys); err != nil || len(keys) != 3 {
		t.Errorf("keys %v", keys)
	}
}

func TestStepString(t *testing.T) {
	t.Parallel()
	s := Step{
		Assigns:   []string{"A=x y", "B="},
		Argv:      []string{"cat", "a b", "it's"},
		Redirects: []Redirect{{0, "<", "in"}, {3, "<", "fd3"}, {1, ">", "o ut"}, {2, ">>", "log"}, {2, ">&", "1"}, {1, "&>", "all"}},
	}
	want := `A='x y' B='' cat 'a b' 'it'\''s' <in 3<fd3 >'o ut' 2>>log 2>&1 &>all`
	if got := s.String(); got != want {
		t.Errorf("%s\nwant %s", got, want)
	}
	if !strings.HasPrefix(Step{Assigns: []string{"X=1"}}.String(), "X=1") {
		t.Error("a bare assignment")
	}
}

// A step that does not expand fails before anything runs, as the bash tool fails it: check
// says so, still judges it as written (the sandbox may see otherwise), and goes on to the
// steps after it from the same state; a pipeline with such a member fails whole.
func TestCheckStepThatFails(t *testing.T) {
	t.Parallel()
	ctx := testContext()
	a := check(t, ctx, "echo x > *; cat src/main.go")
	if len(a.Steps) != 2 {
		t.Fatalf("steps %+v", a.Steps)
	}
	// Its effects are those of the step as written: a write, in case it runs.
	if s := a.Steps[0]; s.Fails == "" || !strings.Contains(s.Fails, "ambiguous redirect") || s.Effects&Write == 0 || s.Command != "echo x > *;" {
		t.Errorf("failing step %+v", s)
	}
	if s := a.Steps[1]; s.Fails != "" || s.Effects != Read {
		t.Errorf("the step after it %+v", s)
	}
	a = check(t, ctx, "cat src/main.go | tee > *")
	for i, s := range a.Steps {
		if s.Fails == "" {
			t.Errorf("pipeline member %d: %+v", i, s)
		}
	}
	if a.Effects&Write == 0 {
		t.Errorf("the failing pipeline's effects %s: its redirection writes as written", a.Effects)
	}
}
