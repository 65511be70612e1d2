package policy

import (
	"slices"
	"strings"
)

// git's rules.
//
// Options before the subcommand are read as git reads them (exact names, no
// abbreviation): -C DIR and options that set no configuration and no program are allowed
// (gitAllowed); --git-dir, --work-tree and --bare move the repository or its work tree
// away from where the policy judges them: protected; any other (-c, --config-env,
// --exec-path, -p, …) is exec.
//
// After the subcommand, options are read as git's parse-options reads them: any unique
// prefix of a long option, values attached or in the next word, bundled short options,
// options after operands, "--" and --end-of-options. Where a prefix could stand for
// several options it counts as each of them.
//
// What each subcommand does:
//   - read (gitRead, diff --cached, branch, tag, symbolic-ref, reflog, stash list and
//     show, config and worktree and remote that only show): read;
//   - forward-only: add objects, move the current branch forward, change the index or the
//     work tree from the repository's own content (add, commit, stash, merge, checkout,
//     switch, restore, reset of the index, rm, mv, clean, cherry-pick, revert, am, apply,
//     bisect, init, branch/tag creation, notes, remote add/set-url): write (and exec, for
//     the drivers below, where they touch the index or the work tree);
//   - destroy refs or history, or move where configuration and hooks come from: protected
//     (branch -D and -d --force, -M, -C, -f; tag -d and -f; update-ref; symbolic-ref that
//     changes; reflog expire and delete; gc, prune, repack, maintenance; filter-branch,
//     replace; reset that moves the branch; commit --amend; rebase; checkout -B, switch
//     -C; stash drop and clear; notes remove and prune; init --separate-git-dir and
//     --template; worktree; config that changes; remote add --mirror; push and fetch
//     that force or delete; pull --rebase; submodule absorbgitdirs);
//   - talk to a remote (gitRemote, remote show, prune and update): net and exec.
//
// Every local subcommand runs hardened (GitArgv): no hook, editor, pager, fsmonitor,
// credential helper, signature program or transport runs. What hardening cannot switch
// off are the drivers the configuration names and attributes select: filter drivers
// (clean when git reads a work-tree file, which every refresh of the index may do; smudge
// when it writes one out) and merge drivers. So the subcommands that touch the index or
// the work tree are exec too: add, commit (a commit of the index alone refreshes it),
// mv, rm, stash, merge, checkout, switch, restore, reset, cherry-pick, revert, rebase,
// am, apply, bisect, worktree add, status and a work-tree diff. Those that move only
// refs, names or configuration (branch, tag, update-ref, symbolic-ref, reflog, clean,
// init, config, notes, remote, gc) run no
// program. A read or write subcommand is exec too with an option that runs a program
// (gitDanger: --textconv, --ext-diff, --filters, signatures, describe --dirty/--broken,
// ls-files -m, grep -O, branch --edit-description, tag -v) or a format that checks
// signatures (%G, signature, a pretty.<name> alias); a read subcommand with --output
// writes. Any other subcommand (plumbing, an alias) runs as asked: exec.

// gitAllowed are the options allowed before the subcommand besides -C.
var gitAllowed = map[string]bool{
	"--no-pager": true, "-P": true, "--literal-pathspecs": true, "--glob-pathspecs": true,
	"--noglob-pathspecs": true, "--icase-pathspecs": true, "--no-optional-locks": true,
	"--no-replace-objects": true,
}

// gitGlobalValue are the options before the subcommand that take the next word as value.
var gitGlobalValue = map[string]bool{
	"-c": true, "--namespace": true, "--config-env": true, "--super-prefix": true, "--attr-source": true,
}

// gitRelocate are the options before the subcommand that take a directory (next word, or
// after "=") where git finds the repository or its work tree.
var gitRelocate = map[string]bool{"--git-dir": true, "--work-tree": true}

// gitLocationVars are the variables that move where git finds the repository, its work
// tree, its index, objects, configuration or templates. Set for a command, they apply to
// every git it runs: protected, whatever the command.
var gitLocationVars = map[string]bool{
	"GIT_DIR": true, "GIT_WORK_TREE": true, "GIT_COMMON_DIR": true, "GIT_INDEX_FILE": true,
	"GIT_OBJECT_DIRECTORY": true, "GIT_ALTERNATE_OBJECT_DIRECTORIES": true, "GIT_CONFIG": true,
	"GIT_CONFIG_GLOBAL": true, "GIT_CONFIG_SYSTEM": true, "GIT_TEMPLATE_DIR": true,
	"GIT_CEILING_DIRECTORIES": true, "GIT_DISCOVERY_ACROSS_FILESYSTEM": true,
}

// gitEnvEffect is what an assignment NAME=value adds: protected for a gitLocationVars.
func gitEnvEffect(assign string) Effects {
	if name, _, ok := strings.Cut(assign, "="); ok && gitLocationVars[name] {
		return Protected
	}
	return 0
}

// gitRead are the read subcommands.
var gitRead = map[string]bool{
	"cat-file": true, "count-objects": true, "describe": true, "for-each-ref": true, "grep": true,
	"log": true, "ls-files": true, "ls-tree": true, "merge-base": true, "name-rev": true,
	"rev-list": true, "rev-parse": true, "shortlog": true, "show": true, "show-ref": true,
	"version": true, "check-ignore": true, "check-attr": true,
}

// gitRemote are the subcommands that talk to a remote.
var gitRemote = map[string]bool{
	"clone": true, "fetch": true, "ls-remote": true, "pull": true, "push": true, "submodule": true,
}

// gitDanger are the long options that make a read or write subcommand run a program.
var gitDanger = map[string][]string{
	"":         {"textconv", "ext-diff", "filters", "show-signature", "verify-signatures", "gpg-sign"},
	"describe": {"dirty", "broken"},
	"ls-files": {"modified"},
	"grep":     {"open-files-in-pager"},
	"branch":   {"edit-description"},
	"tag":      {"verify", "sign", "local-user"},
}

// gitShortDanger are the short options that do.
var gitShortDanger = map[string]string{"ls-files": "m", "grep": "O", "tag": "vsu", "commit": "S", "merge": "S",
	"cherry-pick": "S", "revert": "S", "am": "S", "rebase": "S"}

// gitSpecs are the option specs of the subcommands judged by their options, made once.
var gitSpecs = func() map[string]*spec {
	m := map[string]*spec{}
	for sub := range gitRead {
		m[sub] = newGitSpec(sub)
	}
	for sub := range gitJudges {
		m[sub] = newGitSpec(sub)
	}
	for _, sub := range []string{"diff", "push", "fetch", "pull"} {
		m[sub] = newGitSpec(sub)
	}
	return m
}()

// newGitSpec returns the option spec of a subcommand: enough to find its operands, its
// formats, its --output and the options that change what it does (any prefix of theirs
// counts).
func newGitSpec(sub string) *spec {
	s := &spec{
		long:    []string{"format", "output"},
		longOpt: []string{"pretty", "abbrev", "color", "filter"},
		flags:   []string{"text", "no-textconv", "no-ext-diff", "cached", "staged"},
	}
	s.flags = append(s.flags, gitDanger[""]...)
	s.flags = append(s.flags, gitDanger[sub]...)
	switch sub {
	case "ls-files":
		s.short = "xX"
		s.long = append(s.long, "exclude", "exclude-from", "exclude-per-directory", "with-tree")
	case "grep":
		s.short, s.shortOpt = "efABCm", "O"
		s.long = append(s.long, "max-count", "after-context", "before-context", "context", "threads", "max-depth")
		s.longOpt = append(s.longOpt, "open-files-in-pager")
	case "branch":
		s.short = "u"
		s.long = append(s.long, "contains", "no-contains", "merged", "no-merged", "points-at", "sort", "set-upstream-to")
		s.longOpt = append(s.longOpt, "column", "track")
		s.flags = append(s.flags, "delete", "force", "move", "copy", "list", "all", "remotes",
			"verbose", "quiet", "show-current", "ignore-case", "omit-empty", "create-reflog",
			"unset-upstream", "recurse-submodules", "no-color", "no-column", "no-abbrev", "no-track")
	case "tag":
		s.short, s.shortOpt = "mFu", "n"
		s.long = append(s.long, "message", "file", "local-user", "sort", "contains", "no-contains",
			"merged", "no-merged", "points-at", "cleanup", "trailer")
		s.longOpt = append(s.longOpt, "column")
		s.flags = append(s.flags, "annotate", "delete", "list", "force", "create-reflog",
			"ignore-case", "omit-empty", "edit", "no-sign")
	case "symbolic-ref", "update-ref":
		s.short = "m"
		s.flags = append(s.flags, "delete", "quiet", "short", "recurse", "no-recurse", "stdin", "no-deref", "create-reflog")
	case "init":
		s.short = "b"
		s.long = append(s.long, "initial-branch", "separate-git-dir", "object-format", "ref-format", "template")
		s.longOpt = append(s.longOpt, "shared")
		s.flags = append(s.flags, "bare", "quiet")
	case "log", "show", "shortlog", "rev-list", "reflog":
		s.short = "n"
		s.long = append(s.long, "author", "committer", "grep", "since", "until", "after", "before", "skip", "max-count")
		if sub == "reflog" {
			s.long = append(s.long, "expire", "expire-unreachable")
		}
	case "commit":
		s.short, s.shortOpt = "mFCct", "uS"
		s.long = append(s.long, "message", "file", "reuse-message", "reedit-message", "template",
			"author", "date", "cleanup", "fixup", "squash", "trailer", "pathspec-from-file")
		s.longOpt = append(s.longOpt, "untracked-files", "gpg-sign")
		s.flags = append(s.flags, "all", "include", "only", "interactive", "patch", "amend",
			"no-verify", "verify", "allow-empty", "allow-empty-message", "edit", "no-edit",
			"signoff", "no-signoff", "dry-run", "short", "branch", "porcelain", "long", "null",
			"verbose", "quiet", "status", "no-status", "reset-author", "no-post-rewrite",
			"pathspec-file-nul", "ahead-behind", "no-ahead-behind")
	case "add":
		s.long = append(s.long, "chmod", "pathspec-from-file")
		s.flags = append(s.flags, "all", "update", "intent-to-add", "force", "dry-run", "verbose",
			"interactive", "patch", "edit", "ignore-errors", "ignore-missing", "ignore-removal",
			"no-all", "no-ignore-removal", "refresh", "renormalize", "sparse", "pathspec-file-nul")
	case "rm", "mv":
		s.long = append(s.long, "pathspec-from-file")
		s.flags = append(s.flags, "force", "dry-run", "quiet", "ignore-unmatch", "sparse", "verbose",
			"pathspec-file-nul")
	case "clean":
		s.short = "e"
		s.long = append(s.long, "exclude")
		s.flags = append(s.flags, "force", "dry-run", "quiet", "interactive")
	case "restore":
		s.short = "s"
		s.long = append(s.long, "source", "pathspec-from-file", "conflict")
		s.longOpt = append(s.longOpt, "recurse-submodules")
		s.flags = append(s.flags, "worktree", "ours", "theirs", "merge", "patch", "quiet",
			"progress", "overlay", "no-overlay", "ignore-unmerged", "ignore-skip-worktree-bits",
			"pathspec-file-nul")
	case "checkout":
		s.short = "bB"
		s.long = append(s.long, "orphan", "conflict", "pathspec-from-file")
		s.longOpt = append(s.longOpt, "track", "recurse-submodules")
		s.flags = append(s.flags, "quiet", "progress", "force", "ours", "theirs", "merge", "detach",
			"ignore-skip-worktree-bits", "ignore-other-worktrees", "overwrite-ignore", "patch",
			"overlay", "no-overlay", "guess", "no-guess", "pathspec-file-nul")
	case "switch":
		s.short = "cC"
		s.long = append(s.long, "create", "force-create", "orphan", "conflict")
		s.longOpt = append(s.longOpt, "track", "recurse-submodules")
		s.flags = append(s.flags, "detach", "guess", "no-guess", "force", "discard-changes",
			"merge", "quiet", "progress", "ignore-other-worktrees")
	case "reset":
		s.long = append(s.long, "pathspec-from-file")
		s.longOpt = append(s.longOpt, "recurse-submodules")
		s.flags = append(s.flags, "soft", "mixed", "hard", "merge", "keep", "quiet", "patch",
			"intent-to-add", "no-refresh", "refresh", "pathspec-file-nul")
	case "stash":
		s.short = "m"
		s.long = append(s.long, "message", "pathspec-from-file")
		s.flags = append(s.flags, "patch", "keep-index", "no-keep-index", "include-untracked",
			"all", "quiet", "index", "pathspec-file-nul")
	case "merge", "cherry-pick", "revert", "rebase", "pull":
		s.short, s.shortOpt = "mFsX", "S"
		s.long = append(s.long, "message", "file", "strategy", "strategy-option", "into-name",
			"cleanup", "mainline", "onto", "exec", "whitespace", "empty", "depth", "deepen",
			"shallow-since", "shallow-exclude", "upload-pack", "jobs", "server-option", "negotiation-tip")
		s.longOpt = append(s.longOpt, "gpg-sign", "log", "rebase", "recurse-submodules")
		s.flags = append(s.flags, "commit", "no-commit", "edit", "no-edit", "ff", "no-ff",
			"ff-only", "squash", "no-squash", "stat", "no-stat", "verify", "no-verify", "abort",
			"quit", "continue", "skip", "allow-unrelated-histories", "signoff", "autostash",
			"quiet", "verbose", "progress", "root", "interactive", "force", "no-rebase", "all")
		if sub == "rebase" {
			s.short = "sXx" // rebase's -x is --exec; -m is --merge, no message
		}
		if sub == "pull" {
			s.short = "sXj"
		}
	case "am", "apply":
		s.short, s.shortOpt = "pC", "S"
		s.long = append(s.long, "directory", "exclude", "include", "patch-format", "resolvemsg",
			"quoted-cr", "empty", "whitespace", "build-fake-ancestor")
		s.longOpt = append(s.longOpt, "gpg-sign")
		s.flags = append(s.flags, "stat", "numstat", "summary", "check", "index", "intent-to-add",
			"3way", "apply", "reject", "reverse", "unidiff-zero", "no-add", "allow-empty",
			"recount", "inaccurate-eof", "verbose", "quiet", "unsafe-paths", "binary")
	case "config":
		s.short = "f"
		s.long = append(s.long, "file", "blob", "type", "default", "comment", "value")
		s.flags = append(s.flags, "get", "get-all", "get-regexp", "get-urlmatch", "get-color",
			"get-colorbool", "replace-all", "add", "unset", "unset-all", "rename-section",
			"remove-section", "list", "edit", "show-origin", "show-scope", "name-only", "global",
			"system", "local", "worktree", "includes", "no-includes", "null", "bool", "int",
			"bool-or-int", "path", "expiry-date", "fixed-value")
	case "push":
		s.short = "o"
		s.long = append(s.long, "repo", "receive-pack", "exec", "push-option")
		s.longOpt = append(s.longOpt, "force-with-lease", "signed", "recurse-submodules")
		s.flags = append(s.flags, "all", "branches", "mirror", "delete", "tags", "dry-run",
			"porcelain", "force", "force-if-includes", "prune", "verbose", "quiet", "progress",
			"set-upstream", "atomic", "no-verify", "follow-tags", "thin", "ipv4", "ipv6")
	case "fetch":
		s.short = "jo"
		s.long = append(s.long, "depth", "deepen", "shallow-since", "shallow-exclude",
			"upload-pack", "jobs", "refmap", "server-option", "negotiation-tip")
		s.longOpt = append(s.longOpt, "recurse-submodules")
		s.flags = append(s.flags, "all", "append", "atomic", "force", "keep", "multiple", "prune",
			"prune-tags", "tags", "no-tags", "dry-run", "write-fetch-head", "update-head-ok",
			"quiet", "verbose", "progress", "unshallow", "update-shallow", "set-upstream")
	case "remote", "worktree", "notes":
		s.long = append(s.long, "ref", "reason", "expire", "branch", "message", "file",
			"reuse-message", "reedit-message")
		s.short = "mFCcbB"
		if sub == "remote" {
			s.short = "mt" // remote add -t BRANCH -m MASTER
		}
		s.longOpt = append(s.longOpt, "mirror", "lock", "track")
	}
	return s
}

// gitLine is a git command line split at its subcommand.
type gitLine struct {
	dirs      []string // the -C values, in order
	unsafe    bool     // an option before the subcommand that is not allowed
	relocated bool     // --git-dir, --work-tree or --bare
	places    []string // the --git-dir and --work-tree values
	sub       int      // index of the subcommand in the arguments; -1: none
}

func splitGit(args []string) gitLine {
	g := gitLine{sub: -1}
	for i := 0; i < len(args); i++ {
		a := args[i]
		name, value, eq := strings.Cut(a, "=")
		switch {
		case a == "-C":
			if i+1 < len(args) {
				i++
				g.dirs = append(g.dirs, args[i])
			}
		case gitAllowed[a]:
		case a == "--bare":
			g.relocated = true
		case gitRelocate[name]:
			g.relocated = true
			if !eq && i+1 < len(args) {
				i++
				value = args[i]
			}
			g.places = append(g.places, value)
		case gitGlobalValue[a]:
			g.unsafe = true
			i++
		case strings.HasPrefix(a, "-"):
			g.unsafe = true
		default:
			g.sub = i
			return g
		}
	}
	return g
}

// gitRule judges a git command line.
func gitRule(u *use, args []string) {
	g := splitGit(args)
	if g.unsafe {
		u.own |= Exec
	}
	for _, d := range g.dirs {
		u.look(d) // where it runs, not what it writes: the operands say that
		u.dir = cleanRel(u.dir, d)
	}
	if g.relocated {
		u.own |= Protected
	}
	for _, p := range g.places {
		u.path(p)
	}
	if g.sub < 0 {
		u.own |= Exec
		return
	}
	gitSub(u, args[g.sub], args[g.sub+1:])
}

// parseGit splits a subcommand's words by its spec, reading --end-of-options as
// parse-options does: no option after it, and the words after it left to the subcommand,
// which still takes a later "--" for the end of its revisions.
func parseGit(s *spec, words []string) args {
	for i, w := range words {
		switch w {
		case "--":
			return s.parse(words)
		case "--end-of-options":
			a := s.parse(words[:i])
			for _, op := range words[i+1:] {
				if op == "--" && a.dashdash < 0 {
					a.dashdash = len(a.operands)
					continue
				}
				a.operands = append(a.operands, op)
			}
			return a
		}
	}
	return s.parse(words)
}

// gitSub judges one subcommand and its arguments.
func gitSub(u *use, sub string, rest []string) {
	switch {
	case gitRemote[sub]:
		gitRemoteRule(u, sub, rest)
		return
	case gitRead[sub], sub == "diff":
	case gitJudges[sub] != nil:
	default:
		u.own |= Exec
		u.words(rest)
		return
	}
	a := parseGit(gitSpecs[sub], rest)
	if j := gitJudges[sub]; j != nil {
		j(u, &a, rest)
	} else if sub == "diff" && !a.hasExact("cached", "staged") {
		u.own |= Exec
	} else {
		u.own |= Read
	}
	if gitRunsProgram(sub, &a) {
		u.own |= Exec
	}
	if gitRead[sub] || sub == "diff" {
		gitReadPaths(u, sub, &a)
	}
}

// gitReadPaths adds the paths a read subcommand names.
func gitReadPaths(u *use, sub string, a *args) {
	if out := a.values("--output"); len(out) > 0 {
		u.own |= Write
		for _, o := range out {
			u.path(o)
		}
	}
	for _, v := range a.values("-X", "--exclude-from", "-f") {
		u.path(v)
	}
	ops := a.operands
	if sub == "grep" && !a.has("-e", "-f") && len(ops) > 0 {
		if a.dashdash != 0 {
			ops = ops[1:] // the pattern
		}
	}
	for _, o := range ops {
		u.path(o)
	}
	if (sub == "ls-files" || sub == "grep") && (a.dashdash < 0 || a.dashdash == len(a.operands)) {
		u.readsDir()
	}
}

// gitJudge judges a subcommand by its parsed arguments and its words as written.
type gitJudge func(u *use, a *args, words []string)

// gitJudges judge the subcommands that are not plain reads.
var gitJudges = map[string]gitJudge{
	"branch":        gitBranch,
	"tag":           gitTag,
	"symbolic-ref":  gitSymbolicRef,
	"update-ref":    gitDestroys(0), // sets any ref to any value, or deletes it
	"reflog":        gitReflog,
	"gc":            gitDestroys(0), // prunes unreachable objects, expires reflogs
	"prune":         gitDestroys(0),
	"repack":        gitDestroys(0), // -a -d drops unreachable objects
	"replace":       gitDestroys(0), // every later command sees other objects
	"maintenance":   gitDestroys(Exec),
	"filter-branch": gitDestroys(Exec),
	// rebase is judged exec alone, as the shared corpus rules (`git rebase -i` runs the
	// sequence editor, off under the hardened argv): it rewrites the current branch, whose
	// old commits stay in its reflog.
	"rebase":       gitForward(Exec),
	"worktree":     gitWorktree,
	"config":       gitConfig,
	"init":         gitInit,
	"commit":       gitCommit,
	"add":          gitForward(Write | Exec),
	"rm":           gitRm,
	"mv":           gitMv,
	"clean":        gitClean,
	"restore":      gitForward(Write | Exec),
	"checkout":     gitCheckout,
	"switch":       gitCheckout,
	"reset":        gitReset,
	"stash":        gitStash,
	"merge":        gitForward(Write | Exec),
	"cherry-pick":  gitForward(Write | Exec),
	"revert":       gitForward(Write | Exec),
	"am":           gitForward(Write | Exec),
	"apply":        gitApply,
	"bisect":       gitForward(Write | Exec),
	"notes":        gitNotes,
	"pack-refs":    gitForward(Write),
	"prune-packed": gitForward(Write),
	"remote":       gitRemoteConfig,
}

// gitForward: a subcommand that adds to the repository or writes the work tree from it,
// its operands and files only read.
func gitForward(e Effects) gitJudge {
	return func(u *use, a *args, _ []string) {
		u.own |= e
		gitLooks(u, a)
	}
}

// gitDestroys: a subcommand that destroys refs or history: protected.
func gitDestroys(e Effects) gitJudge { return gitForward(Write | Protected | e) }

// gitLooks adds the operands and the file values of a subcommand that writes only the
// repository: each is read, none written.
func gitLooks(u *use, a *args) {
	for _, v := range a.values("-F", "--file", "--template", "--pathspec-from-file") {
		u.look(v)
	}
	for _, o := range a.operands {
		u.look(o)
	}
}

// hasExact reports whether a long option is given by its exact name.
func (a *args) hasExact(names ...string) bool {
	for _, o := range a.opts {
		if len(o.names) == 1 && slices.Contains(names, o.names[0]) {
			return true
		}
	}
	return false
}

// gitBranch judges branch: it only shows with no operand, or with --list (or an option
// that implies it) and only showing options; it deletes by force (-D, -d with -f),
// renames or copies over another branch (-M, -C, -m or -c with -f) or resets one (-f):
// protected; --edit-description starts an editor.
func gitBranch(u *use, a *args, _ []string) {
	gitLooks(u, a)
	if a.has("--edit-description") {
		u.own |= Exec
		return
	}
	if a.has("-D", "-M", "-C") || (a.has("-f", "--force") && len(a.operands) > 0) {
		u.own |= Write | Protected
		return
	}
	if gitOnlyShows(a, "larvqi", map[string]bool{"list": true, "all": true, "remotes": true,
		"verbose": true, "quiet": true, "show-current": true, "contains": true, "no-contains": true,
		"merged": true, "no-merged": true, "points-at": true, "sort": true, "format": true,
		"color": true, "no-color": true, "column": true, "no-column": true, "abbrev": true,
		"no-abbrev": true, "ignore-case": true, "omit-empty": true},
		"l", "--list", "--contains", "--no-contains", "--merged", "--no-merged", "--points-at") {
		u.own |= Read
		return
	}
	u.own |= Write
}

// gitOnlyShows reports whether every option is a showing one (a short letter of short, a
// long name in long) and there is no operand unless a listing option (a short letter of
// listShort, a long one of list) makes the operands patterns.
func gitOnlyShows(a *args, short string, long map[string]bool, listShort string, list ...string) bool {
	listing := false
	for _, o := range a.opts {
		switch {
		case o.short != 0:
			if !strings.ContainsRune(short, rune(o.short)) {
				return false
			}
			listing = listing || strings.ContainsRune(listShort, rune(o.short))
		default:
			for _, n := range o.names {
				if !long[n] {
					return false
				}
			}
			listing = listing || o.is(list...)
		}
	}
	return len(a.operands) == 0 || listing
}

// gitTag judges tag: it lists with no operand or with a listing option; it deletes (-d)
// or replaces (-f) a tag: protected; it verifies (-v) or signs (-s, -u): exec; else it
// creates one: write.
func gitTag(u *use, a *args, _ []string) {
	gitLooks(u, a)
	switch {
	case a.has("-d", "--delete", "-f", "--force"):
		u.own |= Write | Protected
	case a.has("-v", "--verify"):
		u.own |= Read
	case gitOnlyShows(a, "lni", map[string]bool{"list": true, "sort": true, "format": true,
		"contains": true, "no-contains": true, "merged": true, "no-merged": true, "points-at": true,
		"color": true, "column": true, "no-column": true, "ignore-case": true, "omit-empty": true},
		"ln", "--list", "--contains", "--no-contains", "--merged", "--no-merged", "--points-at"):
		u.own |= Read
	default:
		u.own |= Write
	}
}

// gitSymbolicRef judges symbolic-ref: showing a ref is read; pointing one elsewhere or
// deleting it, protected.
func gitSymbolicRef(u *use, a *args, _ []string) {
	gitLooks(u, a)
	if a.has("-d", "--delete", "-m") || len(a.operands) > 1 {
		u.own |= Write | Protected
		return
	}
	u.own |= Read
}

// gitReflog judges reflog: expire and delete destroy history: protected; show (the
// default), exists and list read.
func gitReflog(u *use, a *args, _ []string) {
	gitLooks(u, a)
	if len(a.operands) > 0 && (a.operands[0] == "expire" || a.operands[0] == "delete") && a.dashdash != 0 {
		u.own |= Write | Protected
		return
	}
	u.own |= Read
}

// gitWorktree judges worktree: list reads; every other subcommand makes, moves, locks or
// removes a linked work tree and its git directory: protected (and add checks out).
func gitWorktree(u *use, a *args, _ []string) {
	if len(a.operands) == 0 || a.operands[0] == "list" {
		u.own |= Read
		gitLooks(u, a)
		return
	}
	u.own |= Write | Protected | Exec
	for _, o := range a.operands[1:] {
		u.path(o)
	}
}

// gitIdentity are the configuration keys that name no program and move nothing: the
// identity a commit records, which an agent in CI sets before it commits.
var gitIdentity = map[string]bool{"user.name": true, "user.email": true}

// gitConfig judges config: getting and listing read; every change (an action option, a
// set, unset, rename or edit subcommand, a name with a value) rewrites a configuration,
// where hooks, drivers and programs are named: protected. Setting the identity
// (gitIdentity) in the repository's own configuration is write.
func gitConfig(u *use, a *args, _ []string) {
	read := a.has("--get", "--get-all", "--get-regexp", "--get-urlmatch", "--get-color",
		"--get-colorbool", "--list", "-l")
	change := a.has("--add", "--replace-all", "--unset", "--unset-all", "--rename-section",
		"--remove-section", "--edit", "-e")
	ops := a.operands
	if len(ops) > 0 && a.dashdash != 0 {
		switch ops[0] {
		case "list", "get":
			read = true
		case "set", "unset", "rename-section", "remove-section", "edit":
			change = true
		}
	}
	if !change && (read || len(ops) <= 1) {
		u.own |= Read
		for _, f := range a.values("-f", "--file") {
			u.look(f)
		}
		return
	}
	if ops := slices.DeleteFunc(slices.Clone(ops), func(o string) bool { return o == "set" }); !change || len(ops) == 2 {
		if len(ops) == 2 && gitIdentity[strings.ToLower(ops[0])] && !a.has("--unset", "--unset-all",
			"--rename-section", "--remove-section", "--edit", "-e", "--global", "--system", "--file",
			"-f", "--blob", "--worktree") {
			u.own |= Write
			return
		}
	}
	u.own |= Write | Protected
	for _, f := range a.values("-f", "--file") {
		u.path(f)
	}
}

// gitInit judges init: it makes a repository, or re-initialises one: write; with
// --separate-git-dir it moves the git directory, with --template it copies hooks into
// it: protected.
func gitInit(u *use, a *args, _ []string) {
	u.own |= Write
	if a.has("--separate-git-dir", "--template") {
		u.own |= Protected
	}
	for _, v := range a.values("--separate-git-dir", "--template") {
		u.path(v)
	}
	for _, o := range a.operands {
		u.path(o)
	}
}

// gitCommit judges commit: write and exec (refreshing the index reads work-tree files
// through filter drivers, even for a commit of the index alone); --amend replaces the
// last commit: protected.
func gitCommit(u *use, a *args, _ []string) {
	u.own |= Write | Exec
	gitLooks(u, a)
	if a.has("--amend") {
		u.own |= Protected
	}
}

// gitRm judges rm: it removes the work-tree files it names (with --cached or a dry run,
// only index entries), after comparing them with the index through filter drivers: exec.
func gitRm(u *use, a *args, _ []string) {
	u.own |= Write | Exec
	if a.has("--cached", "-n", "--dry-run") {
		gitLooks(u, a)
		return
	}
	for _, o := range a.operands {
		u.path(o)
	}
	for _, v := range a.values("--pathspec-from-file") {
		u.look(v)
	}
}

// gitMv judges mv: it moves the work-tree files it names (a dry run only reads), after
// refreshing the index through filter drivers: exec.
func gitMv(u *use, a *args, _ []string) {
	u.own |= Exec
	if a.has("-n", "--dry-run") {
		u.own |= Read
		gitLooks(u, a)
		return
	}
	u.own |= Write
	for _, o := range a.operands {
		u.path(o)
	}
}

// gitClean judges clean: it removes untracked (with -x ignored) files below its pathspecs,
// or its directory: each is written; a dry run only reads.
func gitClean(u *use, a *args, _ []string) {
	ops := a.operands
	if len(ops) == 0 {
		ops = []string{"."}
	}
	if a.has("-n", "--dry-run") {
		u.own |= Read
		for _, o := range ops {
			u.look(o)
		}
		return
	}
	u.own |= Write
	for _, o := range ops {
		u.path(o)
	}
}

// gitCheckout judges checkout and switch: they write the work tree from the repository:
// write and exec (smudge filters); -B and -C (--force-create) reset an existing branch:
// protected.
func gitCheckout(u *use, a *args, _ []string) {
	u.own |= Write | Exec
	gitLooks(u, a)
	if a.has("-B", "-C", "--force-create") {
		u.own |= Protected
	}
}

// gitReset judges reset: with a commit other than HEAD and no pathspec it moves the
// current branch there, dropping what follows from it: protected. Without "--", git takes
// the first operand for a commit when it names one: so does the rule. Any reset refreshes
// the index through filter drivers: write and exec.
func gitReset(u *use, a *args, _ []string) {
	u.own |= Write | Exec
	gitLooks(u, a)
	ops := a.operands
	var commit string
	var paths []string
	switch {
	case a.dashdash >= 0:
		if a.dashdash > 0 {
			commit = ops[0]
		}
		paths = ops[a.dashdash:]
	case len(ops) > 0:
		commit, paths = ops[0], ops[1:]
	}
	if commit != "" && commit != "HEAD" && commit != "@" && len(paths) == 0 &&
		!a.has("-p", "--patch", "--pathspec-from-file") {
		u.own |= Protected
	}
}

// gitStash judges stash: list and show read; drop and clear destroy stashes: protected;
// every other subcommand (push, the default) reads and writes the work tree: write and
// exec.
func gitStash(u *use, a *args, words []string) {
	gitLooks(u, a)
	sub := ""
	if len(words) > 0 && !strings.HasPrefix(words[0], "-") {
		sub = words[0] // a first word that is an option is push's
	}
	switch sub {
	case "list", "show":
		u.own |= Read
	case "drop", "clear":
		u.own |= Write | Protected
	default:
		u.own |= Write | Exec
	}
}

// gitApply judges apply: with --stat, --numstat, --summary or --check (and no --apply) it
// only reads; else it writes the files its patches name, below --directory, anywhere with
// --unsafe-paths: outside and protected.
func gitApply(u *use, a *args, _ []string) {
	gitLooks(u, a)
	if a.has("--stat", "--numstat", "--summary", "--check") && !a.has("--apply") {
		u.own |= Read
		return
	}
	u.own |= Write | Exec
	if a.has("--unsafe-paths") {
		u.own |= Outside | Protected
	}
	for _, d := range a.values("--directory", "--build-fake-ancestor") {
		u.path(d)
	}
}

// gitNotes judges notes: list and show read; remove and prune destroy notes: protected;
// every other subcommand adds or edits notes: write.
func gitNotes(u *use, a *args, _ []string) {
	gitLooks(u, a)
	sub := "list"
	if len(a.operands) > 0 {
		sub = a.operands[0]
	}
	switch sub {
	case "list", "show", "get-ref":
		u.own |= Read
	case "remove", "prune":
		u.own |= Write | Protected
	default:
		u.own |= Write
	}
}

// gitRemoteConfig judges remote: listing and get-url read; show queries the remote (not
// with -n); prune and update fetch; add, rename, remove, set-url, set-branches and
// set-head change the configuration of remotes: write; add --mirror makes every later
// fetch overwrite local branches: protected.
func gitRemoteConfig(u *use, a *args, _ []string) {
	gitLooks(u, a)
	sub := ""
	if len(a.operands) > 0 {
		sub = a.operands[0]
	}
	switch sub {
	case "", "get-url":
		u.own |= Read
	case "show":
		u.own |= Read
		if !a.has("-n") {
			u.own |= Net | Exec
		}
	case "prune", "update":
		u.own |= Write | Net | Exec
	default:
		u.own |= Write
		if a.has("--mirror") {
			u.own |= Protected
		}
		if (sub == "add" && a.has("-f", "--fetch")) || (sub == "set-head" && a.has("-a", "--auto")) {
			u.own |= Net | Exec
		}
	}
}

// gitRemoteRule judges the subcommands that talk to a remote: net and exec; push that
// forces or deletes destroys the remote's history, fetch and pull that force overwrite
// local branches, submodule absorbgitdirs moves git directories: protected. (pull --rebase
// rewrites the current branch as rebase does: not protected, as rebase is not.)
func gitRemoteRule(u *use, sub string, rest []string) {
	u.own |= Net | Exec
	u.words(rest)
	s, ok := gitSpecs[sub]
	if !ok {
		if sub == "submodule" && slices.Contains(rest, "absorbgitdirs") {
			u.own |= Protected
		}
		return
	}
	a := parseGit(s, rest)
	forced := false
	for i, o := range a.operands {
		src, dst, hasDst := strings.Cut(o, ":")
		switch {
		case sub == "push" && i > 0 && (strings.HasPrefix(src, "+") || (hasDst && src == "")):
			forced = true
		case sub != "push" && strings.HasPrefix(src, "+") && hasDst && dst != "":
			forced = true
		}
	}
	switch sub {
	case "push":
		forced = forced || a.has("-f", "--force", "--force-with-lease", "--force-if-includes",
			"-d", "--delete", "--mirror", "--prune")
	case "fetch":
		forced = forced || a.has("-f", "--force")
	case "pull":
		forced = forced || a.has("-f", "--force")
	}
	if forced {
		u.own |= Protected
	}
}

// gitPretty are the built-in formats of --pretty/--format; any other name without "%" is
// a pretty.<name> alias from the configuration, which may check signatures.
var gitPretty = map[string]bool{"oneline": true, "short": true, "medium": true, "full": true,
	"fuller": true, "reference": true, "email": true, "mboxrd": true, "raw": true}

// gitRunsProgram reports whether a subcommand's options make it run a program: a
// dangerous option, or a format that checks signatures.
func gitRunsProgram(sub string, a *args) bool {
	for _, d := range [][]string{gitDanger[""], gitDanger[sub]} {
		for _, n := range d {
			if a.has("--" + n) {
				return true
			}
		}
	}
	for _, c := range gitShortDanger[sub] {
		if a.has("-" + string(c)) {
			return true
		}
	}
	for _, o := range a.opts {
		if !o.hasValue || !o.is("--format", "--pretty") {
			continue
		}
		v := o.value
		name, _, _ := strings.Cut(v, ":")
		switch {
		case strings.Contains(v, "%G"), strings.Contains(strings.ToLower(v), "signature"):
			return true
		case v == "", gitPretty[v], strings.Contains(v, "%"), name == "format" || name == "tformat":
		default:
			return true
		}
	}
	return false
}

// GitEnv are the environment entries a hardened git runs with: no lazy fetch of missing
// objects, no terminal prompt, and no transport at all. GIT_ALLOW_PROTOCOL, even empty,
// overrides every protocol.*.allow a repository's configuration sets (a repository that
// allows ext:: names a command in a promisor remote's URL, which a lazy fetch in
// `git log -p` would run).
var GitEnv = []string{"GIT_NO_LAZY_FETCH=1", "GIT_TERMINAL_PROMPT=0", "GIT_ALLOW_PROTOCOL="}

// gitHarden are the options put before the subcommand. A setting on the command line wins
// over the same setting in any configuration file (and in what those include), so each
// program a repository's configuration can name is switched off here: the fsmonitor, the
// hooks, the pager, the editors, the askpass and credential helpers, the signature
// programs, every transport (and so the ssh command and any remote helper), automatic
// maintenance. What the command line cannot switch off is left to the caller: filter
// drivers (filter.<name>.clean/smudge/process, named by attributes) run when git reads a
// work-tree file's content or writes one out, and merge drivers when it merges, which is
// why the subcommands that do are exec; diff drivers and textconv are switched off by
// --no-ext-diff and --no-textconv after the subcommand; aliases never replace a built-in
// subcommand.
var gitHarden = []string{
	"--no-pager", "--no-optional-locks",
	"-c", "core.fsmonitor=false",
	"-c", "core.hooksPath=/dev/null",
	"-c", "core.editor=false", "-c", "sequence.editor=false",
	"-c", "core.askPass=", "-c", "credential.helper=",
	"-c", "core.sshCommand=false",
	"-c", "log.showSignature=false",
	"-c", "gpg.program=false", "-c", "gpg.openpgp.program=false",
	"-c", "gpg.ssh.program=false", "-c", "gpg.x509.program=false",
	"-c", "protocol.allow=never",
	"-c", "protocol.ext.allow=never", "-c", "protocol.file.allow=never",
	"-c", "protocol.ssh.allow=never", "-c", "protocol.git.allow=never",
	"-c", "protocol.http.allow=never", "-c", "protocol.https.allow=never",
	"-c", "gc.auto=0", "-c", "maintenance.auto=false",
}

// GitOptions returns the options that go before a git subcommand so that it runs none of
// the programs a repository's configuration names (see gitHarden). Run it with GitEnv.
func GitOptions() []string { return slices.Clone(gitHarden) }

// gitLocal are the subcommands besides gitRead and gitJudges that run hardened: they only
// show the work tree, judged exec for the filter drivers they may still run.
var gitLocal = map[string]bool{"diff": true, "status": true, "blame": true}

// gitHardens reports whether a git step runs hardened: every subcommand the rules know
// that does not talk to a remote. Any other (an alias, plumbing, a remote one) runs as the
// user asked, judged exec.
func gitHardens(sub string, rest []string) bool {
	if !gitRead[sub] && !gitLocal[sub] && gitJudges[sub] == nil {
		return false
	}
	u := use{dir: "."}
	gitSub(&u, sub, rest)
	return u.own&Net == 0
}

// GitArgv returns the argv a git step runs with and whether it is hardened (gitHardens):
// GitOptions before the subcommand and, for diff, log, show and stash show, --no-ext-diff
// and --no-textconv after it (--no-textconv alone for grep and blame). Options of the
// step's own come after these and win. Run a hardened step with GitEnv. Any other argv is
// returned unchanged.
func GitArgv(argv []string) ([]string, bool) {
	if len(argv) == 0 || argv[0] != "git" {
		return argv, false
	}
	g := splitGit(argv[1:])
	if g.sub < 0 {
		return argv, false
	}
	sub := 1 + g.sub
	rest := argv[sub+1:]
	if !gitHardens(argv[sub], rest) {
		return argv, false
	}
	out := append([]string{"git"}, gitHarden...)
	out = append(out, argv[1:sub+1]...)
	switch argv[sub] {
	case "diff", "log", "show":
		out = append(out, "--no-ext-diff", "--no-textconv")
	case "grep", "blame":
		out = append(out, "--no-textconv")
	case "stash":
		if len(rest) > 0 && rest[0] == "show" {
			out = append(out, "show", "--no-ext-diff", "--no-textconv")
			rest = rest[1:]
		}
	}
	return append(out, rest...), true
}
