package policy

import (
	"strings"
	"testing"

	"mvdan.cc/sh/v3/syntax"

	"github.com/paddockhq/paddock/script"
)

// words splits a command line of literal words (quotes allowed) into argv.
func words(t testing.TB, line string) []string {
	t.Helper()
	f, err := syntax.NewParser().Parse(strings.NewReader(line), "")
	if err != nil {
		t.Fatalf("%q: %v", line, err)
	}
	var ws []*syntax.Word
	var argv []string
	switch c := f.Stmts[0].Cmd.(type) {
	case *syntax.CallExpr:
		ws = c.Args
	case *syntax.DeclClause:
		argv = []string{c.Variant.Value}
		for _, a := range c.Args {
			arg := a.Name.Value
			if a.Value != nil {
				v, _ := script.Literal(a.Value)
				arg += "=" + v
			}
			argv = append(argv, arg)
		}
	default:
		t.Fatalf("%q: not a simple command", line)
	}
	for _, w := range ws {
		s, ok := script.Literal(w)
		if !ok {
			t.Fatalf("%q: %q is not literal", line, w.Lit())
		}
		argv = append(argv, s)
	}
	return argv
}

type stepCase struct {
	cwd  string // "" is /ws
	line string
	want string
}

func runStepCases(t *testing.T, ctx *Context, cases []stepCase) {
	t.Helper()
	for _, tc := range cases {
		cwd := tc.cwd
		if cwd == "" {
			cwd = "/ws"
		}
		got := StepEffects(ctx, Step{Argv: words(t, tc.line), Cwd: cwd})
		if got.String() != tc.want {
			t.Errorf("in %s: %s: %q, want %q", cwd, tc.line, got, tc.want)
		}
	}
}

const home = "/home/u"

func TestStepWords(t *testing.T) {
	t.Parallel()
	runStepCases(t, testContext(), []stepCase{
		// Words that name a secret add secret; a read outside the workspace is only read.
		{"", "pwd", ""},
		{"", "echo hi", ""},
		{"", "echo /home/u/.ssh/id_ed25519", "secret"}, // every word counts: it can reach xargs cat
		{"", "cat src/main.go", "read"},
		{"", "cat /home/u/.ssh/id_ed25519", "read,secret"},
		{"", "cat keys/id_ed25519", "read,secret"},
		{"", "cat /etc/passwd", "read"},
		{"", "cat ../etc/passwd", "read"},
		{"", "head -n 5 /home/u/.netrc", "read,secret"},
		{"", "wc --files0-from=/home/u/.npmrc", "read,secret"},
		{"", "grep -r KEY /home/u", "read,secret"}, // holds a secret
		{"", "grep KEY src/main.go", "read"},
		{"", "stat /home/u", "read,secret"},
		{"", "tr a-z /home/u/.ssh", "read,secret"}, // a word naming a secret counts, whatever tr makes of it
		{"", "tr a-z /home/u/docs", "read"},
		// A command that writes: outside and protected words too.
		{"", "rm -rf build", "write"},
		{"", "rm -rf /tmp/x", "outside,write"},
		{"", "rm -rf .", "protected,write"},      // the root holds .git and .paddock
		{"", "rm -rf vendor", "protected,write"}, // holds vendor/lib/.git
		{"", "rm -rf src", "write"},
		{"", "rm -rf /home/u", "protected,secret,write"},
		{"", "rm -rf keys", "secret,write"},
		{"", "touch .git/hooks/pre-commit", "protected,write"},
		{"", "touch sub/.paddock/x", "protected,write"},
		{"", "mkdir /home/u/.config/paddock/x", "protected,write"},
		{"", "touch /usr/bin/x", "protected,write"},
		{"", "cp /etc/passwd src/", "outside,read,write"}, // every word of a writer counts
		{"", "cp src/main.go /home/u/.ssh/", "read,secret,write"},
		{"", "cp mytool /usr/local/bin/", "protected,read,write"},
		{"", "mv a /etc/b", "outside,write"},
		{"", "ln -s x y", "write"},
		{"", "ln -sf /ws/evil /usr/local/bin/git", "protected,write"},
		{"", "ln -s .git/hooks h", "protected,write"},
		{"", "mkdir -m 700 new", "write"},
		{"", "cp -t /tmp src/main.go", "outside,read,write"},
		{"", "cp -t/tmp src/main.go", "outside,read,write"},
		{"", "cp --target-directory=/tmp src/main.go", "outside,read,write"},
		{"", "tee /tmp/log", "outside,write"},
		{"", "chmod 600 /home/u/.ssh/id_ed25519", "secret,write"},
		{"", "rm loop", "outside,write"}, // a loop is never Inside
		// A program path, an unknown program, an assignment: exec.
		{"", "./cat x", "exec"},
		{"", "/usr/bin/rm -rf build", "exec"},
		{"", "../../usr/bin/head README.md", "exec"},
		{"", "python3 script.py", "exec"},
		{"", "python3 /home/u/.ssh/id_ed25519", "exec,secret"},
		{"", "tool --key=/home/u/.netrc", "exec,secret"},
		{"", "tool -k/home/u/.netrc", "exec,secret"},
		{"", "tool @/home/u/.netrc", "exec,secret"},
		{"", "/home/u/.ssh/run", "exec,secret"},
		{"", "export A=1", "exec"},
		{"", "export A", "exec"},
		{"", "export", ""},
		{"", "export K=/home/u/.aws", "exec,secret"},
		{"", "cd /home/u/.ssh", "secret"},
		{"", "cd /tmp", ""},
		{"", "unset A", ""},
		{"", "exit 3", ""},
		{"", "test -f /home/u/.ssh/id_ed25519", "secret"},
		{"", "'[' -d /tmp ']'", ""},
	})
}

// The working directory adds secret only to a command that reads it because it names no
// path.
func TestStepWorkingDirectory(t *testing.T) {
	t.Parallel()
	runStepCases(t, testContext(), []stepCase{
		{home, "echo hi", ""},
		{home, "pwd", ""},
		{home, "cat notes.txt", "read"},
		{home, "ls", "read,secret"},
		{home, "ls -la", "read,secret"},
		{home, "ls -I x", "read,secret"},       // -I takes the next word
		{home, "ls --ignore x", "read,secret"}, // so does --ignore
		{home, "ls --ign x", "read,secret"},    // and any prefix of it
		{home, "ls repo", "read"},
		{home, "ls .ssh", "read,secret"},
		{home, "du", "read,secret"},
		{home, "du -d 1", "read,secret"},
		{home, "du -sh repo", "read"},
		{home, "tree", "read,secret"},
		{home, "tree -L 2", "read,secret"},
		{home, "tree repo", "read"},
		{home, "find", "read,secret"},
		{home, "find -name x", "read,secret"},
		{home, "find -L -name x", "read,secret"},
		{home, "find repo -name x", "read"},
		{home, "find . -name x", "read,secret"},
		{"", "find / -name id_rsa", "read,secret"},
		{home, "rg x", "read,secret"},
		{home, "rg x repo", "read"},
		{home, "rg -e x", "read,secret"},
		{home, "rg -e x repo", "read"},
		{home, "rg --files", "read,secret"},
		{home, "rg --files repo", "read"},
		{home, "rg -f pats", "read,secret"},
		{home, "rg --regexp x repo", "read"},
		{home, "rg -g '*.go' x", "read,secret"}, // -g takes the next word
		{home, "rg -g '*.go' x repo", "read"},
		{home, "grep x notes.txt", "read"},
		{home, "grep x", "read"}, // not recursive: standard input
		{home, "grep -r x", "read,secret"},
		{home, "grep -R x", "read,secret"},
		{home, "grep -rn x", "read,secret"},
		{home, "grep -r x repo", "read"},
		{home, "grep -re x", "read,secret"},
		{home, "grep -r -e x repo", "read"},
		{home, "grep -r -f pats", "read,secret"},
		{home, "grep --recursive x", "read,secret"},
		{home, "grep --recur x", "read,secret"},
		{home, "grep -d recurse x", "read,secret"},
		{home, "grep -r -A 3 x", "read,secret"},
		{home, "git -C repo log", "read"},
		{home, "git log", "read"},
		{home, "git ls-files", "read,secret"},
		{home, "git -C repo ls-files", "read"},
		{home, "git ls-files -- src", "read"},
		{home, "git grep x", "read,secret"},
		{home, "git grep x -- src", "read"},
		{home, "git grep x --", "read,secret"},
		{home, "git grep -e x -- src", "read"},
		{home, "git -C /home/u/.ssh log", "read,secret"},
		{"/ws", "ls", "read"},
		{"/ws", "grep -r KEY", "read"},
		{"/ws/keys", "ls", "read,secret"},
		{"/home/u/.ssh", "cat id_ed25519", "read,secret"},
	})
}

func TestStepAssignments(t *testing.T) {
	t.Parallel()
	ctx := testContext()
	for _, tc := range []struct {
		assigns []string
		argv    string
		want    string
	}{
		{[]string{"X=1"}, "", "exec"},
		{[]string{"PATH=./bin"}, "stat f", "exec,read"},
		{[]string{"GIT_PAGER=sh -c id"}, "git log -p", "exec,read"},
		{[]string{"K=/home/u/.netrc"}, "", "exec,secret"},
		{[]string{"K=--file=/home/u/.netrc"}, "", "exec,secret"},
	} {
		var argv []string
		if tc.argv != "" {
			argv = words(t, tc.argv)
		}
		got := StepEffects(ctx, Step{Argv: argv, Assigns: tc.assigns, Cwd: "/ws"})
		if got.String() != tc.want {
			t.Errorf("%v %s: %s, want %s", tc.assigns, tc.argv, got, tc.want)
		}
	}
}

func TestRedirectEffects(t *testing.T) {
	t.Parallel()
	ctx := testContext()
	for _, tc := range []struct {
		r    Redirect
		want string
	}{
		{Redirect{1, ">", "out.txt"}, "write"},
		{Redirect{1, ">", "/ws/out.txt"}, "write"},
		{Redirect{1, ">>", "log"}, "write"},
		{Redirect{1, "&>", "/tmp/all"}, "outside,write"},
		{Redirect{1, ">", "/tmp/o"}, "outside,write"},
		{Redirect{1, ">", ".git/hooks/pre-commit"}, "protected,write"},
		{Redirect{1, ">", "vendor/lib/.git/config"}, "protected,write"},
		{Redirect{1, ">", ".paddock/settings.json"}, "protected,write"},
		{Redirect{1, ">", "/usr/local/bin/git"}, "protected,write"},
		{Redirect{1, ">", "/home/u/.ssh/authorized_keys"}, "secret,write"},
		{Redirect{1, ">", "keys/authorized_keys"}, "secret,write"},
		{Redirect{1, ">", "loop"}, "outside,write"},
		{Redirect{0, "<", "/home/u/.ssh/id_ed25519"}, "read,secret"},
		{Redirect{0, "<", "/etc/passwd"}, "read"},
		{Redirect{0, "<", "src/main.go"}, "read"},
		{Redirect{1, ">", "/dev/null"}, ""},
		{Redirect{2, ">", "/dev/stderr"}, ""},
		{Redirect{1, ">", "/dev/fd/3"}, ""},
		{Redirect{0, "<", "/dev/null"}, ""},
		{Redirect{2, ">&", "1"}, ""},
		{Redirect{1, ">&", "-"}, ""},
		{Redirect{1, ">&", "out"}, "write"}, // >& to a file is &>
		{Redirect{1, ">", "/dev/tcp/example.com/80"}, "net"},
		{Redirect{0, "<", "/dev/udp/example.com/53"}, "net"},
	} {
		if got := RedirectEffects(ctx, "/ws", tc.r); got.String() != tc.want {
			t.Errorf("%d%s%s: %s, want %s", tc.r.FD, tc.r.Op, tc.r.Path, got, tc.want)
		}
	}
	got := StepEffects(ctx, Step{Argv: []string{"echo", "hi"}, Cwd: "/ws", Redirects: []Redirect{{1, ">", "/tmp/x"}, {2, ">&", "1"}}})
	if got != Write|Outside {
		t.Errorf("echo hi > /tmp/x 2>&1: %s", got)
	}
}

// In an ephemeral sandbox a path under no mount belongs to the sandbox: no outside. In a
// persistent one it is outside.
func TestStepEphemeral(t *testing.T) {
	t.Parallel()
	toHost := func(p string) (string, bool) {
		if under(p, "/workspace") {
			return "/ws" + strings.TrimPrefix(p, "/workspace"), true
		}
		return "", false
	}
	for _, tc := range []struct {
		ephemeral bool
		line      string
		want      string
	}{
		{true, "rm -rf /tmp/x", "write"},
		{false, "rm -rf /tmp/x", "outside,write"},
		{true, "rm -rf /workspace/build", "write"},
		{true, "rm -rf /workspace", "protected,write"},
		{true, "cp x /usr/bin/", "protected,read,write"},
		{true, "cat /root/.ssh/id_rsa", "read,secret"},
	} {
		ctx := testContext()
		ctx.Cwd, ctx.ToHost, ctx.Ephemeral = "/workspace", toHost, tc.ephemeral
		ctx.Env = []string{"HOME=/root", "PATH=/usr/bin"}
		got := StepEffects(ctx, Step{Argv: words(t, tc.line), Cwd: "/workspace"})
		if got.String() != tc.want {
			t.Errorf("ephemeral %v: %s: %s, want %s", tc.ephemeral, tc.line, got, tc.want)
		}
	}
}

// Every word of a step counts: a word naming a secret gives the step secret whatever the
// command, so the words of echo and printf that reach xargs, sort --files0-from or file -f
// through a pipe are judged too; a word that looks like an option is judged as a path as it
// is; words naming nothing secret add nothing.
// law: secret_path_gives_secret, secret_needs_a_secret_path
func TestEveryWordCounts(t *testing.T) {
	t.Parallel()
	runStepCases(t, testContext(), []stepCase{
		{"", `printf %s\0 /home/u/.ssh/id_ed25519`, "secret"},
		{"", "echo ../home/u/.ssh/id_ed25519", "secret"}, // from /ws, ../home/u/.ssh is the key
		{"/home/u", "echo .ssh/id_ed25519", "secret"},
		{"/home/u", "printf %s .netrc", "secret"},
		{"", "xargs cat", "exec,read"},
		{"", "sort --files0-from=-", "read"},
		{"", "file -f -", "read"},
		{"", "echo --key=/home/u/.ssh/id_ed25519", "secret"},
		{"", "echo -f/home/u/.ssh/id_ed25519", "secret"},
		{"/home/u/proj", "cat -- -/../../.ssh/id_ed25519", "read,secret"},
		{"/home/u/proj", "echo -/../../.ssh", "secret"},
		{"", "echo hello world", ""},
		{"", "echo /home/u", ""}, // holds a secret, is none: a word of echo names it harmlessly
		{"", "echo /home/u/.ssh", "secret"},
		{"", "echo /home/u/docs/readme", ""},
		{"", "echo --verbose -n", ""},
	})
}
