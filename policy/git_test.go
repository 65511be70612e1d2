package policy

import (
	"slices"
	"strings"
	"testing"
)

func TestGit(t *testing.T) {
	runStepCases(t, testContext(), []stepCase{
		// Read subcommands.
		{"", "git log", "read"},
		{"", "git log -p", "read"},
		{"", "git log --oneline -n 5 -- src", "read"},
		{"", "git show HEAD:src/main.go", "read"},
		{"", "git cat-file -p HEAD", "read"},
		{"", "git count-objects -v", "read"},
		{"", "git describe --tags", "read"},
		{"", "git for-each-ref '--format=%(refname)'", "read"},
		{"", "git ls-tree HEAD", "read"},
		{"", "git merge-base a b", "read"},
		{"", "git name-rev HEAD", "read"},
		{"", "git rev-list --count HEAD", "read"},
		{"", "git rev-parse --show-toplevel", "read"},
		{"", "git shortlog -sn", "read"},
		{"", "git show-ref", "read"},
		{"", "git version", "read"},
		{"", "git diff --cached", "read"},
		{"", "git diff --staged", "read"},
		{"", "git log --text", "read"}, // an exact option, not a prefix of --textconv
		{"", "git log --format=%H --pretty=oneline", "read"},
		{"", "git log --pretty=format:%h", "read"},
		{"", "git --no-pager -P --literal-pathspecs --glob-pathspecs --noglob-pathspecs --icase-pathspecs --no-optional-locks --no-replace-objects log", "read"},
		{"", "git -C src log", "read"},
		// …with a read subcommand's --output, a write.
		{"", "git log --output=log.txt", "read,write"},
		{"", "git log --output /tmp/log.txt", "outside,read,write"},
		{"", "git diff --cached --outp=x", "read,write"},
		// Options before the subcommand that set configuration or a program: exec.
		{"", "git -c core.pager=id log", "exec,read"},
		{"", "git --config-env=core.pager=X log", "exec,read"},
		{"", "git --exec-path=/tmp log", "exec,read"},
		{"", "git --git-dir=/tmp/x log", "exec,read"},
		{"", "git --git-dir /tmp/x log", "exec,read"},
		{"", "git -p log", "exec,read"},
		{"", "git --paginate log", "exec,read"},
		{"", "git --work-tree=/tmp log", "exec,read"},
		{"", "git", "exec"},
		// A read or write subcommand that runs a program: exec.
		{"", "git log --textconv", "exec,read"},
		{"", "git log --textc", "exec,read"},
		{"", "git diff --cached --ext-diff", "exec,read"},
		{"", "git diff --cached --ext", "exec,read"},
		{"", "git cat-file --filters HEAD:f", "exec,read"},
		{"", "git cat-file --textconv HEAD:f", "exec,read"},
		{"", "git log --show-signature", "exec,read"},
		{"", "git show --show-sig", "exec,read"},
		{"", "git log '--format=%G?'", "exec,read"},
		{"", "git log --pretty=format:%GS", "exec,read"},
		{"", "git log --pretty=mine", "exec,read"}, // a pretty.<name> alias
		{"", "git log --format mine", "exec,read"},
		{"", "git for-each-ref '--format=%(signature)'", "exec,read"},
		{"", "git describe --dirty", "exec,read"},
		{"", "git describe --broken", "exec,read"},
		{"", "git ls-files -m", "exec,read"},
		{"", "git ls-files -om", "exec,read"},
		{"", "git ls-files --modified", "exec,read"},
		{"", "git grep -O x", "exec,read"},
		{"", "git grep -Oless x", "exec,read"},
		{"", "git grep --open-files-in-pager x", "exec,read"},
		{"", "git branch --edit-description", "exec"},
		// branch and symbolic-ref that only show are read; that change refs, write.
		{"", "git branch", "read"},
		{"", "git branch -a -v", "read"},
		{"", "git branch --list feat", "read"},
		{"", "git branch --contains HEAD", "read"},
		{"", "git branch --show-current", "read"},
		{"", "git branch new", "write"},
		{"", "git branch -d old", "write"},
		{"", "git branch -m a b", "write"},
		{"", "git branch -u origin/main", "write"},
		{"", "git branch --set-upstream-to=origin/main", "write"},
		{"", "git symbolic-ref HEAD", "read"},
		{"", "git symbolic-ref --short HEAD", "read"},
		{"", "git symbolic-ref HEAD refs/heads/x", "write"},
		{"", "git symbolic-ref -d HEAD", "write"},
		{"", "git update-ref refs/heads/x HEAD", "write"},
		{"", "git init", "write"},
		{"", "git init /tmp/repo", "outside,write"},
		{"", "git init --template=/tmp/t", "exec,outside,write"},
		// Every other subcommand is exec; one that talks to a remote, net and exec.
		{"", "git status", "exec"},
		{"", "git diff", "exec"},
		{"", "git diff HEAD^", "exec"},
		{"", "git blame f", "exec"},
		{"", "git add .", "exec"},
		{"", "git commit -m x", "exec"},
		{"", "git merge x", "exec"},
		{"", "git rebase -i HEAD^^^", "exec"},
		{"", "git co main", "exec"}, // an alias
		{"", "git clone https://example.com/r.git", "exec,net"},
		{"", "git fetch", "exec,net"},
		{"", "git ls-remote origin", "exec,net"},
		{"", "git pull", "exec,net"},
		{"", "git push origin main", "exec,net"},
		{"", "git submodule update", "exec,net"},
		{"", "git clone https://example.com/r.git /home/u/.ssh/x", "exec,net,secret"},
	})
}

// A git step that reads, writes refs or shows the work tree runs with every program a
// repository's configuration can name switched off; any other runs as asked.
// law: host_git_hardened
func TestGitArgv(t *testing.T) {
	for _, tc := range []struct {
		in, sub string
		after   []string
	}{
		{"git log -p", "log", []string{"--no-ext-diff", "--no-textconv", "-p"}},
		{"git -C repo show HEAD", "show", []string{"--no-ext-diff", "--no-textconv", "HEAD"}},
		{"git diff --cached", "diff", []string{"--no-ext-diff", "--no-textconv", "--cached"}},
		{"git diff", "diff", []string{"--no-ext-diff", "--no-textconv"}},
		{"git grep x", "grep", []string{"--no-textconv", "x"}},
		{"git blame f", "blame", []string{"--no-textconv", "f"}},
		{"git status --short", "status", []string{"--short"}},
		{"git ls-files", "ls-files", nil},
		{"git branch new", "branch", []string{"new"}},
		{"git -c core.pager=less log", "log", []string{"--no-ext-diff", "--no-textconv"}},
	} {
		in := strings.Fields(tc.in)
		got, ok := GitArgv(in)
		i := slices.Index(got, tc.sub)
		if !ok || i < 0 || got[0] != "git" || !slices.Equal(got[i+1:], tc.after) {
			t.Errorf("%s: %q", tc.in, got)
			continue
		}
		before := strings.Join(got[:i], " ")
		for _, want := range []string{"--no-pager", "--no-optional-locks", "core.fsmonitor=false",
			"core.hooksPath=/dev/null", "core.editor=false", "sequence.editor=false", "core.askPass=",
			"credential.helper=", "log.showSignature=false", "gpg.program=false", "protocol.allow=never",
			"protocol.ext.allow=never", "protocol.file.allow=never", "protocol.ssh.allow=never"} {
			if !strings.Contains(before, want) {
				t.Errorf("%s: %q lacks %s before the subcommand", tc.in, got, want)
			}
		}
		// The step's own options come after the hardening: given on purpose, they win.
		if strings.Contains(tc.in, "-C repo") && !strings.HasSuffix(before, "-C repo") {
			t.Errorf("%s: -C not last before the subcommand: %q", tc.in, got)
		}
		if strings.Contains(tc.in, "core.pager=less") && !strings.HasSuffix(before, "-c core.pager=less") {
			t.Errorf("%s: the step's -c not last: %q", tc.in, got)
		}
		// The hardened line is judged as the original was.
		ctx := testContext()
		if a, b := StepEffects(ctx, Step{Argv: in, Cwd: "/ws"}), StepEffects(ctx, Step{Argv: got, Cwd: "/ws"}); a&^Exec != b&^Exec {
			t.Errorf("%s: %s, hardened %s", tc.in, a, b)
		}
	}
	for _, in := range []string{"ls -l", "git commit -m x", "git co main", "git push", "git -c a=b", "git"} {
		if got, ok := GitArgv(strings.Fields(in)); ok || !slices.Equal(got, strings.Fields(in)) {
			t.Errorf("%s: hardened to %q", in, got)
		}
	}
}

// The environment of a hardened git allows no transport, whatever a repository's
// configuration allows.
func TestGitEnv(t *testing.T) {
	for _, want := range []string{"GIT_TERMINAL_PROMPT=0", "GIT_ALLOW_PROTOCOL=", "GIT_NO_LAZY_FETCH=1"} {
		if !slices.Contains(GitEnv, want) {
			t.Errorf("GitEnv %q lacks %s", GitEnv, want)
		}
	}
}
