package policy

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

func TestGit(t *testing.T) {
	t.Parallel()
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
		{"", "git --exec-path=/tmp log", "exec,read"},
		{"", "git -p log", "exec,read"},
		{"", "git --paginate log", "exec,read"},

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
		{"", "git init", "write"},
		{"", "git init /tmp/repo", "outside,write"},
		// The work tree shown through filter drivers: exec; an alias or plumbing: exec; one
		// that talks to a remote, net and exec.
		{"", "git status", "exec"},
		{"", "git diff", "exec"},
		{"", "git diff HEAD^", "exec"},
		{"", "git blame f", "exec"},
		{"", "git co main", "exec"}, // an alias
		{"", "git hash-object -w x", "exec"},
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
	t.Parallel()
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
		// Every local subcommand: hooks, editors and signing programs off.
		{"git commit -m x", "commit", []string{"-m", "x"}},
		{"git add -A", "add", []string{"-A"}},
		{"git merge --no-edit topic", "merge", []string{"--no-edit", "topic"}},
		{"git checkout main", "checkout", []string{"main"}},
		{"git switch -c new", "switch", []string{"-c", "new"}},
		{"git stash", "stash", nil},
		{"git stash show -p", "stash", []string{"show", "--no-ext-diff", "--no-textconv", "-p"}},
		{"git rebase main", "rebase", []string{"main"}},
		{"git tag v1", "tag", []string{"v1"}},
		{"git config user.name", "config", []string{"user.name"}},
		{"git worktree add ../x", "worktree", []string{"add", "../x"}},
		{"git remote add origin u", "remote", []string{"add", "origin", "u"}},
		{"git gc", "gc", nil},
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
	for _, in := range []string{"ls -l", "git co main", "git push", "git fetch", "git pull --rebase",
		"git clone x", "git remote show origin", "git remote update", "git submodule update", "git hash-object x",
		"git -c a=b", "git"} {
		if got, ok := GitArgv(strings.Fields(in)); ok || !slices.Equal(got, strings.Fields(in)) {
			t.Errorf("%s: hardened to %q", in, got)
		}
	}
}

// The environment of a hardened git allows no transport, whatever a repository's
// configuration allows.
func TestGitEnv(t *testing.T) {
	t.Parallel()
	for _, want := range []string{"GIT_TERMINAL_PROMPT=0", "GIT_ALLOW_PROTOCOL=", "GIT_NO_LAZY_FETCH=1"} {
		if !slices.Contains(GitEnv, want) {
			t.Errorf("GitEnv %q lacks %s", GitEnv, want)
		}
	}
}

// Git's own metadata: a subcommand that destroys refs or history, or moves where a
// repository's configuration and hooks come from, is protected; one that only adds
// objects and moves the current branch forward is write (exec too where it reads or
// writes work-tree content, through filter drivers). Options are read as git reads them:
// attached values, abbreviations, bundles, options after operands, "--".
func TestGitMetadata(t *testing.T) {
	t.Parallel()
	runStepCases(t, testContext(), []stepCase{
		// branch: deleting by force, renaming or copying over, resetting: protected.
		{"", "git branch -D x", "protected,write"},
		{"", "git branch -d --force x", "protected,write"},
		{"", "git branch --delete --force x", "protected,write"},
		{"", "git branch --del --forc x", "protected,write"}, // abbreviations
		{"", "git branch -df x", "protected,write"},
		{"", "git branch -fd x", "protected,write"},
		{"", "git branch x -D", "protected,write"}, // an option after the operand
		{"", "git branch -M a b", "protected,write"},
		{"", "git branch -m -f a b", "protected,write"},
		{"", "git branch -C a b", "protected,write"},
		{"", "git branch -f main 'HEAD~3'", "protected,write"},
		{"", "git branch --force main 'HEAD~3'", "protected,write"},
		{"", "git branch -d merged", "write"}, // refuses an unmerged branch
		{"", "git branch -m a b", "write"},
		{"", "git branch -- -D", "write"}, // a branch named -D
		// update-ref, symbolic-ref that changes, tag -d and -f, reflog expire and delete.
		{"", "git update-ref -d refs/heads/x", "protected,write"},
		{"", "git update-ref --stdin", "protected,write"},
		{"", "git update-ref refs/heads/main 'HEAD~3'", "protected,write"},
		{"", "git update-ref refs/heads/x HEAD", "protected,write"},
		{"", "git symbolic-ref HEAD refs/heads/x", "protected,write"},
		{"", "git symbolic-ref -d HEAD", "protected,write"},
		{"", "git symbolic-ref --delete HEAD", "protected,write"},
		{"", "git symbolic-ref -m why HEAD refs/heads/x", "protected,write"},
		{"", "git symbolic-ref HEAD", "read"},
		{"", "git tag -d v1", "protected,write"},
		{"", "git tag --delete v1", "protected,write"},
		{"", "git tag --del v1", "protected,write"},
		{"", "git tag -f v1", "protected,write"},
		{"", "git tag v1 -f", "protected,write"},
		{"", "git tag v1", "write"},
		{"", "git tag -a v1 -m release", "write"},
		{"", "git tag", "read"},
		{"", "git tag -l 'v*'", "read"},
		{"", "git tag --list 'v*'", "read"},
		{"", "git tag -n5", "read"},
		{"", "git tag --contains HEAD", "read"},
		{"", "git tag -v v1", "exec,read"},
		{"", "git tag -s v1 -m x", "exec,write"},
		{"", "git reflog expire --expire=now --all", "protected,write"},
		{"", "git reflog expire --all --expire now", "protected,write"},
		{"", "git reflog delete HEAD@{1}", "protected,write"},
		{"", "git reflog", "read"},
		{"", "git reflog show main", "read"},
		{"", "git reflog exists main", "read"},
		{"", "git reflog -- expire", "read"}, // a ref named expire
		// Pruning, repacking, replacing, rewriting.
		{"", "git gc --prune=now", "protected,write"},
		{"", "git gc", "protected,write"}, // prunes what is two weeks old
		{"", "git gc --aggressive", "protected,write"},
		{"", "git prune", "protected,write"},
		{"", "git repack -a -d", "protected,write"},
		{"", "git replace HEAD 'HEAD~1'", "protected,write"},
		{"", "git maintenance run", "exec,protected,write"},
		{"", "git filter-branch --tree-filter 'rm -f x' HEAD", "exec,protected,write"},
		{"", "git rebase main", "exec"},
		{"", "git rebase -i 'HEAD~3'", "exec"},
		{"", "git commit --amend -m x", "exec,protected,write"},
		{"", "git commit --am --no-edit", "exec,protected,write"},
		{"", "git checkout -B main origin/main", "exec,protected,write"},
		{"", "git switch -C main", "exec,protected,write"},
		{"", "git switch --force-create main", "exec,protected,write"},
		{"", "git switch --force-c main", "exec,protected,write"},
		// reset: one that moves the branch elsewhere is protected; one of the index is not.
		{"", "git reset --hard 'HEAD~3'", "exec,protected,write"},
		{"", "git reset --soft HEAD^", "exec,protected,write"},
		{"", "git reset 'HEAD~1'", "exec,protected,write"},
		{"", "git reset --keep origin/main", "exec,protected,write"},
		{"", "git reset origin/main --", "exec,protected,write"},
		{"", "git reset", "exec,write"},
		{"", "git reset --hard", "exec,write"},
		{"", "git reset HEAD", "exec,write"},
		{"", "git reset -q @", "exec,write"},
		{"", "git reset -- a.txt", "exec,write"},
		{"", "git reset HEAD a.txt", "exec,write"},
		{"", "git reset main -- a.txt", "exec,write"}, // the index of a.txt from main
		{"", "git reset -p 'HEAD~1'", "exec,write"},
		// stash: drop and clear destroy stashes.
		{"", "git stash drop", "protected,write"},
		{"", "git stash clear", "protected,write"},
		{"", "git stash", "exec,write"},
		{"", "git stash -- src", "exec,write"},
		{"", "git stash push -m wip", "exec,write"},
		{"", "git stash -m clear", "exec,write"}, // a message, not the subcommand
		{"", "git stash pop", "exec,write"},
		{"", "git stash apply", "exec,write"},
		{"", "git stash list", "read"},
		{"", "git stash show -p", "read"},
		// notes.
		{"", "git notes remove HEAD", "protected,write"},
		{"", "git notes prune", "protected,write"},
		{"", "git notes add -m x HEAD", "write"},
		{"", "git notes", "read"},
		{"", "git notes show HEAD", "read"},
		// Remote history: a push that forces or deletes; a fetch or pull that overwrites
		// a local branch; pull --rebase rewrites the current one.
		{"", "git push --force", "exec,net,protected"},
		{"", "git push -f origin main", "exec,net,protected"},
		{"", "git push --forc origin main", "exec,net,protected"},
		{"", "git push origin +main", "exec,net,protected"},
		{"", "git push origin :old", "exec,net,protected"},
		{"", "git push --delete origin old", "exec,net,protected"},
		{"", "git push -d origin old", "exec,net,protected"},
		{"", "git push --force-with-lease", "exec,net,protected"},
		{"", "git push --force-with-lease=main:abc", "exec,net,protected"},
		{"", "git push --mirror", "exec,net,protected"},
		{"", "git push origin main", "exec,net"},
		{"", "git push -u origin feature", "exec,net"},
		{"", "git fetch origin +main:main", "exec,net,protected"},
		{"", "git fetch -f origin main:main", "exec,net,protected"},
		{"", "git fetch --prune", "exec,net"},
		{"", "git fetch origin main", "exec,net"},
		{"", "git pull --rebase", "exec,net"},
		{"", "git pull -r", "exec,net"},
		{"", "git pull --rebase=merges", "exec,net"},
		{"", "git pull --rebase=false", "exec,net"},
		{"", "git pull", "exec,net"},
		{"", "git pull --ff-only", "exec,net"},
		{"", "git submodule absorbgitdirs", "exec,net,protected"},
		// Moving where configuration and hooks come from.
		{"", "git init --separate-git-dir=/tmp/g", "outside,protected,write"},
		{"", "git init --separate-git-dir /tmp/g", "outside,protected,write"},
		{"", "git init --sep=/tmp/g", "outside,protected,write"},
		{"", "git init --template=/tmp/t", "outside,protected,write"},
		{"", "git init --template /tmp/t", "outside,protected,write"},
		{"", "git init --templ=t", "protected,write"},
		{"", "git init --bare /tmp/r.git", "outside,write"},
		{"", "git worktree add ../x", "exec,outside,protected,write"},
		{"", "git worktree add wt", "exec,protected,write"},
		{"", "git worktree remove wt", "exec,protected,write"},
		{"", "git worktree prune", "exec,protected,write"},
		{"", "git worktree list", "read"},
		{"", "git config core.hooksPath hooks", "protected,write"},
		{"", "git config --global core.editor vim", "protected,write"},
		{"", "git config --unset core.fsmonitor", "protected,write"},
		{"", "git config --add alias.x '!sh'", "protected,write"},
		{"", "git config -e", "protected,write"},
		{"", "git config --file .git/config core.fsmonitor x", "protected,write"},
		{"", "git config set core.pager x", "protected,write"},
		{"", "git config user.name", "read"},
		{"", "git config user.name bot", "write"}, // the identity a commit records
		{"", "git config --local user.email bot@example.com", "write"},
		{"", "git config User.Email bot@example.com", "write"},
		{"", "git config --global user.name bot", "protected,write"},
		{"", "git config --unset user.name", "protected,write"},
		{"", "git config user.name.x bot", "protected,write"},
		{"", "git reset --end-of-options 'HEAD~1'", "exec,protected,write"}, // a revision still
		{"", "git reset --end-of-options main -- a.txt", "exec,write"},
		{"", "git branch --end-of-options -D", "write"}, // a branch named -D
		{"", "git tag --end-of-options -d", "write"},
		{"", "git config --get user.name", "read"},
		{"", "git config --list", "read"},
		{"", "git config -l --show-origin", "read"},
		{"", "git config --get-regexp '^alias'", "read"},
		{"", "git config get user.name", "read"},
		{"", "git --git-dir=.git log", "protected,read"},
		{"", "git --git-dir /tmp/x log", "protected,read"},
		{"", "git --work-tree=/tmp checkout .", "exec,outside,protected,write"},
		{"", "git --bare log", "protected,read"},
		{"", "git remote add --mirror=fetch origin u", "protected,write"},
		{"", "git remote add origin https://example.com/r.git", "write"},
		{"", "git remote set-url origin u", "write"},
		{"", "git remote", "read"},
		{"", "git remote -v", "read"},
		{"", "git remote get-url origin", "read"},
		{"", "git remote show origin", "exec,net,read"},
		{"", "git remote show -n origin", "read"},
		// Forward only: write; exec where filter or merge drivers may run.
		{"", "git add .", "exec,write"},
		{"", "git add -A", "exec,write"},
		{"", "git commit -m x", "exec,write"}, // the index refresh may run filter drivers
		{"", "git commit -qm x", "exec,write"},
		{"", "git commit -F msg.txt", "exec,write"},
		{"", "git commit -am x", "exec,write"},
		{"", "git commit -m x src/main.go", "exec,write"},
		{"", "git merge x", "exec,write"},
		{"", "git merge --ff-only origin/main", "exec,write"},
		{"", "git checkout main", "exec,write"},
		{"", "git checkout -b new", "exec,write"},
		{"", "git checkout -- src/main.go", "exec,write"},
		{"", "git switch main", "exec,write"},
		{"", "git switch -c new", "exec,write"},
		{"", "git restore --staged src/main.go", "exec,write"},
		{"", "git cherry-pick abc", "exec,write"},
		{"", "git revert --no-edit HEAD", "exec,write"},
		{"", "git am 0001.patch", "exec,write"},
		{"", "git apply x.patch", "exec,write"},
		{"", "git apply --check x.patch", "read"},
		{"", "git apply --stat x.patch", "read"},
		{"", "git apply --directory=.paddock x.patch", "exec,protected,write"},
		{"", "git apply --unsafe-paths x.patch", "exec,outside,protected,write"},
		{"", "git mv src/main.go src/app.go", "exec,write"},
		{"", "git mv src/main.go .paddock/settings.json", "exec,protected,write"},
		{"", "git rm src/main.go", "exec,write"},
		{"", "git rm -r --cached .", "exec,write"},
		{"", "git rm -r .paddock", "exec,protected,write"},
		{"", "git clean -n", "read"},
		{"", "git clean -f build", "write"},
		{"", "git clean -fdx", "protected,write"}, // the root: .paddock, untracked, goes too
		{"", "git bisect start", "exec,write"},
		{"", "git pack-refs --all", "write"},
		// Every word still counts.
		{"", "git commit -F /home/u/.ssh/id_ed25519", "exec,secret,write"},
		{"", "git add /home/u/.netrc", "exec,secret,write"},
	})
}

// A variable that moves where git finds a repository, its configuration or its templates
// is protected whoever it is set for; other variables are exec, as before.
func TestGitLocationVariables(t *testing.T) {
	t.Parallel()
	ctx := testContext()
	for _, tc := range []struct{ src, want string }{
		{"GIT_DIR=/tmp/x git log", "exec,protected,read"},
		{"GIT_WORK_TREE=/tmp git checkout .", "exec,protected,write"},
		{"GIT_CONFIG_GLOBAL=cfg git commit -m x", "exec,protected,write"},
		{"GIT_TEMPLATE_DIR=t git init", "exec,protected,write"},
		{"GIT_INDEX_FILE=i make", "exec,protected"},
		{"export GIT_DIR=/tmp/x", "exec,protected"},
		{"GIT_DIR=/tmp/x", "exec,protected"},
		{"env GIT_COMMON_DIR=/tmp/x git log", "exec,protected,read"},
		{"declare -x GIT_CONFIG=/tmp/c", "exec,protected"},
		{"GIT_AUTHOR_NAME=bot git commit -m x", "exec,write"},
		{"export GIT_AUTHOR_NAME=bot", "exec"},
	} {
		if got := check(t, ctx, tc.src).Effects.String(); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.src, got, tc.want)
		}
	}
}

// gitForms are git command lines of one class, each as words to keep in order; random
// harmless words are put around them.
var (
	// gitDestroys destroy refs or history, or move where configuration and hooks come
	// from; each spelling git accepts.
	gitDestroyForms = [][]string{
		{"branch", "-D", "x"}, {"branch", "-d", "--force", "x"}, {"branch", "--delete", "--force", "x"},
		{"branch", "--del", "--forc", "x"}, {"branch", "-df", "x"}, {"branch", "-fd", "x"}, {"branch", "-M", "a", "b"},
		{"branch", "-C", "a", "b"}, {"branch", "-f", "x", "y"}, {"branch", "-mf", "a", "b"},
		{"update-ref", "-d", "refs/heads/x"}, {"update-ref", "refs/heads/x", "y"}, {"update-ref", "--stdin"},
		{"symbolic-ref", "HEAD", "refs/heads/x"}, {"symbolic-ref", "-d", "HEAD"}, {"symbolic-ref", "--delete", "HEAD"},
		{"tag", "-d", "v1"}, {"tag", "--delete", "v1"}, {"tag", "--del", "v1"}, {"tag", "-f", "v1"}, {"tag", "--force", "v1"},
		{"reflog", "expire", "--all"}, {"reflog", "delete", "HEAD@{1}"},
		{"gc"}, {"gc", "--prune=now"}, {"gc", "--prune", "now"}, {"prune"}, {"repack", "-ad"}, {"replace", "a", "b"},
		{"maintenance", "run"}, {"filter-branch", "x"}, {"commit", "--amend"}, {"commit", "--amen"},
		{"checkout", "-B", "x"}, {"switch", "-C", "x"}, {"switch", "--force-create", "x"}, {"switch", "--force-c=x"},
		{"reset", "--hard", "origin/main"}, {"reset", "--soft", "HEAD~1"}, {"reset", "HEAD~1"},
		{"stash", "drop"}, {"stash", "clear"}, {"notes", "remove"}, {"notes", "prune"},
		{"init", "--separate-git-dir=g"}, {"init", "--separate-git-dir", "g"}, {"init", "--sep=g"},
		{"init", "--template=t"}, {"init", "--template", "t"}, {"init", "--templ=t"},
		{"worktree", "add", "w"}, {"worktree", "remove", "w"}, {"worktree", "move", "a", "b"}, {"worktree", "prune"},
		{"config", "core.hooksPath", "h"}, {"config", "--unset", "core.fsmonitor"}, {"config", "--add", "a.b", "c"},
		{"config", "--replace-all", "a.b", "c"}, {"config", "-e"}, {"config", "--edit"}, {"config", "--rename-section", "a", "b"},
		{"config", "set", "a.b", "c"}, {"remote", "add", "--mirror=fetch", "o", "u"},
		{"push", "--force"}, {"push", "-f"}, {"push", "--delete", "o", "b"}, {"push", "o", "+main"}, {"push", "o", ":b"},
		{"push", "--mirror"}, {"push", "--force-with-lease"}, {"fetch", "o", "+a:b"}, {"fetch", "--force", "o", "a:b"},
	}
	// gitForwardForms add objects and move the current branch forward.
	gitForwardForms = [][]string{
		{"add", "src/main.go"}, {"add", "-A"}, {"commit", "-m", "x"}, {"commit", "-am", "x"}, {"commit", "--message=x"},
		{"stash"}, {"stash", "push"}, {"stash", "pop"}, {"stash", "apply"}, {"merge", "topic"}, {"merge", "--no-ff", "topic"},
		{"checkout", "main"}, {"checkout", "-b", "new"}, {"switch", "main"}, {"switch", "-c", "new"},
		{"restore", "src/main.go"}, {"cherry-pick", "abc"}, {"revert", "abc"}, {"branch", "new"}, {"tag", "v1"},
		{"config", "user.email", "bot@example.com"}, {"config", "user.name", "bot"},
	}
	// gitFillers are words git takes without changing the class: quiet, verbose, names.
	gitFillers  = []string{"-q", "--quiet", "src", "x", "src/main.go"}
	gitGlobals  = [][]string{{"-C", "."}, {"--no-pager"}, {"-P"}, {"--literal-pathspecs"}, {"--no-optional-locks"}}
	ciAutoSet   = AutoSet{Read | Write | Exec | Net}
	gitLocators = []string{"GIT_DIR", "GIT_WORK_TREE", "GIT_COMMON_DIR", "GIT_INDEX_FILE", "GIT_CONFIG_GLOBAL",
		"GIT_CONFIG_SYSTEM", "GIT_TEMPLATE_DIR", "GIT_OBJECT_DIRECTORY", "GIT_CONFIG"}
)

// randomGit builds a git step of form: global options, the subcommand, the form's words
// with fillers before, between and after them. Fillers after the last word may follow
// "--" (then they are pathspecs); none goes before a word of the form's that is an option
// to keep it one.
func randomGit(r *rand.Rand, form []string) []string {
	argv := []string{"git"}
	for i := r.IntN(3); i > 0; i-- {
		argv = append(argv, pick(r, gitGlobals)...)
	}
	argv = append(argv, form[0])
	fillers := gitFillers
	if form[0] == "reset" {
		fillers = gitFillers[:2] // an operand more is a pathspec: reset moves no branch then
	}
	for _, w := range form[1:] {
		if r.IntN(3) == 0 && !(w[0] != '-' && gitHasSub[form[0]]) {
			argv = append(argv, pick(r, fillers)) // not before a subcommand's own subcommand
		}
		argv = append(argv, w)
	}
	if r.IntN(2) == 0 {
		argv = append(argv, "-q")
	}
	if r.IntN(3) == 0 && form[0] != "reset" && form[0] != "config" {
		argv = append(argv, "--", pick(r, gitFillers))
	}
	return argv
}

// gitHasSub are the subcommands that take a subcommand of their own.
var gitHasSub = map[string]bool{"stash": true, "reflog": true, "notes": true, "worktree": true, "config": true, "remote": true}

// Every git invocation in the destroy-or-relocate set, every one that relocates the
// repository (--git-dir, --work-tree, --bare, a GIT_DIR-like assignment) and every one
// that writes a path under .git is at least protected, whatever harmless words surround
// it; so a CI auto set (read,write,exec,net) never runs it unasked. Every forward-only
// one is never protected and runs unasked under that set.
// law: auto_needs_every_effect
func TestGitProtectedProperty(t *testing.T) {
	t.Parallel()
	ctx := testContext()
	r := rand.New(rand.NewPCG(21, 22))
	for i := 0; i < 5000; i++ {
		var s Step
		switch r.IntN(4) {
		case 0:
			s = Step{Argv: randomGit(r, pick(r, gitDestroyForms)), Cwd: "/ws"}
		case 1:
			form := pick(r, append(gitDestroyForms, gitForwardForms...))
			argv := randomGit(r, form)
			reloc := pick(r, [][]string{{"--git-dir=g"}, {"--git-dir", "g"}, {"--work-tree=w"}, {"--work-tree", "w"}, {"--bare"}})
			s = Step{Argv: slices.Concat(argv[:1], reloc, argv[1:]), Cwd: "/ws"}
		case 2:
			s = Step{Argv: randomGit(r, pick(r, append(gitDestroyForms, gitForwardForms...))), Cwd: "/ws",
				Assigns: []string{pick(r, gitLocators) + "=" + pick(r, []string{"/tmp/g", "g", ""})}}
		default:
			p := pick(r, []string{".git/hooks/pre-commit", ".git/config", "vendor/lib/.git/x", ".git", "src/../.git/x", "/ws/.git/info"})
			form := pick(r, [][]string{{"rm", p}, {"rm", "-r", p}, {"mv", "x", p}, {"clean", "-f", p}, {"init", p},
				{"apply", "--directory=" + p}, {"config", "--file=" + p, "a.b", "c"}, {"worktree", "add", p}})
			s = Step{Argv: randomGit(r, form), Cwd: "/ws"}
		}
		e := StepEffects(ctx, s)
		if !e.Has(Protected) {
			t.Fatalf("%s: %s, not protected", s, e)
		}
		if ciAutoSet.Decide(e) == Run {
			t.Fatalf("%s: %s runs unasked under %s", s, e, ciAutoSet)
		}
	}
	for i := 0; i < 2000; i++ {
		s := Step{Argv: randomGit(r, pick(r, gitForwardForms)), Cwd: "/ws"}
		e := StepEffects(ctx, s)
		if e.Has(Protected) || ciAutoSet.Decide(e) != Run {
			t.Fatalf("%s: %s: a forward-only step asks under %s", s, e, ciAutoSet)
		}
	}
}
