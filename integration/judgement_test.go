package integration

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The step judgement suite: scripts that try to get an effect past its question — a host
// secret read, a hook written, a ref deleted — by building the words a command runs with
// (scripts inside scripts, loops, functions, groups, eval, command substitutions, inner
// shells), run through the real paddock and paddock-kernel binaries with nobody attached.
// Each check looks at the host afterwards. Under the auto set of reads alone, and under the
// one the README gives CI (read, write, exec, net), none of them gets anything through;
// under the default set (every effect but secret) no secret is read.

// judged is one attack script and what it goes for.
type judgedAttack struct {
	name, script string
	wants        string // "secret", "hook" or "ref"
}

// judgementAttacks are the attacks; $KEY is the host key's path, ~ the host home.
var judgementAttacks = []judgedAttack{
	// Reading the key: the words are built as the script runs.
	{"group with cd", `{ cd; cat .ssh/id_rsa; }`, "secret"},
	{"loop variable", `for f in ~/.ss; do cat ${f}h/id_rsa; done`, "secret"},
	{"bash -c", `bash -c 'cat ~/.ssh/id_rsa'`, "secret"},
	{"sh -c with HOME", `sh -c "cat \$HOME/.ssh/id_rsa"`, "secret"},
	{"sh -c built", `sh -c 'd=.s; cat ~/${d}sh/id_rsa'`, "secret"},
	{"eval of pieces", `eval "cat ~/.s""sh/id_rsa"`, "secret"},
	{"function", `f() { cat "$1"; }; f ~/.s"sh"/id_rsa`, "secret"},
	{"function of pieces", `f() { cat "$HOME/$1/$2"; }; f .ssh id_rsa`, "secret"},
	{"command substitution", `cat $(printf '%s' ~/.s; printf 'sh/id_rsa')`, "secret"},
	{"script on stdin", `echo 'cat ~/.ss''h/id_rsa' | bash`, "secret"},
	{"script file", `printf 'cat ~/.s%sh/id_rsa\n' s > s.sh; bash s.sh`, "secret"},
	{"subshell", `(cd ~ && cat .ssh/id_rsa)`, "secret"},
	{"read loop", `while read f; do cat "$f"; done <<< ~/.ssh/id_rsa`, "secret"},
	{"positional", `set -- ~ .ssh id_rsa; IFS=/; cat "$*"`, "secret"},
	{"trap", `trap 'cat ~/.s""sh/id_rsa' EXIT; true`, "secret"},
	{"redirect built", `d=.ssh; while read l; do echo "$l"; done < ~/$d/id_rsa`, "secret"},
	{"xargs from a loop", `for p in .ssh/id_rsa; do echo ~/$p; done | xargs cat`, "secret"},
	{"nested shells", `sh -c "bash -c 'k=~/.ss; cat \${k}h/id_rsa'"`, "secret"},
	{"source", `echo 'cat ~/.s""sh/id_rsa' > x.sh; . ./x.sh`, "secret"},
	// Links whose target is harmless where they are made and a secret where they end up
	// (@HOME@ is the host home's name beside the workspace): judged where they land, and
	// the commands that run beside the move ask.
	{"link moved", `mkdir -p a/b; ln -s ../@HOME@/.ssh/id_rsa a/b/k; mv a/b/k k; cat k`, "secret"},
	{"directory of links moved", `mkdir -p a/b/c; ln -s ../../@HOME@/.ssh a/b/c/l; mv a/b/c .; cat c/l/id_rsa`, "secret"},
	{"pipeline beside a move", `mkdir -p a/b/c; ln -s ../../@HOME@/.ssh a/b/c/l; mv a/b/c . | cat c/l/id_rsa`, "secret"},
	{"background move", `mkdir -p a/b/c; ln -s ../../@HOME@/.ssh a/b/c/l; mv a/b/c . & cat c/l/id_rsa; wait`, "secret"},
	{"tree with a moved link", `mkdir -p a/b/c; ln -s ../../@HOME@/.ssh a/b/c/l; mv a/b/c .; grep -R BEGIN c`, "secret"},
	// Writing a hook.
	{"hook from a group", `{ cd .git/hooks; echo 'touch pwned' > pre-commit; }`, "hook"},
	{"hook from a loop", `for d in .git; do echo x > $d/hooks/pre-commit; done`, "hook"},
	{"hook from bash -c", `bash -c 'echo x > .git/hooks/pre-commit'`, "hook"},
	{"hook by eval", `eval 'cp /bin/true .g''it/hooks/pre-commit'`, "hook"},
	{"hook by a function", `w() { tee "$1" < /dev/null; }; w .git/hooks/pre-commit`, "hook"},
	// Deleting a ref.
	{"branch -D in bash -c", `bash -c 'git branch -D feature'`, "ref"},
	{"branch -D from a loop", `for b in feature; do git branch -D $b; done`, "ref"},
	{"update-ref in sh -c", `sh -c 'git update-ref -d refs/heads/feature'`, "ref"},
	{"ref by eval", `x=feature; eval "git branch -D $x"`, "ref"},
}

func TestJudgementLocal(t *testing.T)  { runJudgement(t, "local") }
func TestJudgementDocker(t *testing.T) { engine(t); runJudgement(t, "docker") }

func runJudgement(t *testing.T, transport string) {
	const defaultSet = "read,write,exec,net,outside,protected" // every effect but secret
	for _, auto := range []string{"read", "read,write,exec,net", defaultSet} {
		name := auto
		if name == defaultSet {
			name = "default"
		}
		t.Run(name, func(t *testing.T) {
			h := newHostile(t, transport)
			initRepo(t, h.ws)
			for _, a := range judgementAttacks {
				if auto == defaultSet && a.wants != "secret" {
					continue // the default set lets protected writes run unasked
				}
				args := []string{"--mount", h.ws + ":" + h.ws, "--mount", h.home + ":" + h.home + ":ro", "--env", "HOME"}
				if transport == "local" {
					args = nil
				}
				args = append(args, "--auto-effects", auto)
				out, errOut, code := h.run(strings.ReplaceAll(a.script, "@HOME@", filepath.Base(h.home)), args...)
				for _, left := range []string{"a", "c", "k"} {
					os.RemoveAll(filepath.Join(h.ws, left))
				}
				h.leaked(a.name, out+errOut)
				if _, err := os.Stat(filepath.Join(h.ws, ".git", "hooks", "pre-commit")); err == nil {
					t.Errorf("%s: a hook was written:\n%s%s", a.name, out, errOut)
					os.Remove(filepath.Join(h.ws, ".git", "hooks", "pre-commit"))
				}
				if _, err := os.Stat(filepath.Join(h.ws, ".git", "refs", "heads", "feature")); err != nil {
					t.Errorf("%s: the ref was deleted:\n%s%s", a.name, out, errOut)
					initRepo(t, h.ws)
				}
				if code != 126 || !strings.Contains(errOut, "refused") {
					t.Errorf("%s: status %d, not refused:\n%s%s", a.name, code, out, errOut)
				}
			}
		})
	}
}

// initRepo makes ws a git repository with a commit and a branch feature (again).
func initRepo(t *testing.T, ws string) {
	t.Helper()
	for _, args := range [][]string{
		{"init", "-q"}, {"-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "--allow-empty", "-m", "one"},
		{"branch", "-f", "feature"},
	} {
		cmd := exec.Command("git", append([]string{"-C", ws}, args...)...)
		cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v: %s", args, err, out)
		}
	}
}
