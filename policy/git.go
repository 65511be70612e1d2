package policy

import (
	"slices"
	"strings"
)

// git's rules.
//
// Before the subcommand only -C DIR and options that set no configuration and no program
// are allowed (gitAllowed); any other (-c, --config-env, --exec-path, --git-dir, -p, …) is
// exec. Read subcommands (gitRead, diff --cached, branch and symbolic-ref that only show)
// are read; branch, symbolic-ref, update-ref and init that change refs are write. Each of
// them is exec with an option that runs a program (gitDanger: --textconv, --ext-diff,
// --filters, signatures, describe --dirty/--broken, ls-files -m, grep -O,
// branch --edit-description) or a format that checks signatures (%G, signature, a
// pretty.<name> alias); a read subcommand with --output also writes. Subcommands that talk
// to a remote (gitRemote) are net and exec; every other one is exec (status, work-tree diff,
// blame, add, commit, merge, aliases…). The read and write ones, status, diff and blame run
// hardened (GitArgv).

// gitAllowed are the options allowed before the subcommand besides -C.
var gitAllowed = map[string]bool{
	"--no-pager": true, "-P": true, "--literal-pathspecs": true, "--glob-pathspecs": true,
	"--noglob-pathspecs": true, "--icase-pathspecs": true, "--no-optional-locks": true,
	"--no-replace-objects": true,
}

// gitGlobalValue are the options before the subcommand that take the next word as value.
var gitGlobalValue = map[string]bool{
	"-c": true, "--git-dir": true, "--work-tree": true, "--namespace": true,
	"--config-env": true, "--super-prefix": true,
}

// gitRead are the read subcommands.
var gitRead = map[string]bool{
	"cat-file": true, "count-objects": true, "describe": true, "for-each-ref": true, "grep": true,
	"log": true, "ls-files": true, "ls-tree": true, "merge-base": true, "name-rev": true,
	"rev-list": true, "rev-parse": true, "shortlog": true, "show": true, "show-ref": true,
	"version": true,
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
}

// gitShortDanger are the short options that do.
var gitShortDanger = map[string]string{"ls-files": "m", "grep": "O"}

// gitSpecs are the option specs of the read and write subcommands, made once.
var gitSpecs = func() map[string]*spec {
	m := map[string]*spec{}
	for sub := range gitRead {
		m[sub] = newGitSpec(sub)
	}
	for _, sub := range []string{"diff", "branch", "symbolic-ref", "update-ref", "init"} {
		m[sub] = newGitSpec(sub)
	}
	return m
}()

// newGitSpec returns the option spec of a subcommand: enough to find its operands, its
// formats, its --output and its dangerous options (any prefix of theirs counts).
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
	case "symbolic-ref":
		s.short = "m"
	case "init":
		s.short = "b"
		s.long = append(s.long, "initial-branch", "separate-git-dir", "object-format", "ref-format")
		s.longOpt = append(s.longOpt, "template", "shared")
	case "log", "show", "shortlog", "rev-list":
		s.short = "n"
		s.long = append(s.long, "author", "committer", "grep", "since", "until", "after", "before", "skip", "max-count")
	}
	return s
}

// gitLine is a git command line split at its subcommand.
type gitLine struct {
	dirs   []string // the -C values, in order
	unsafe bool     // an option before the subcommand that is not allowed
	sub    int      // index of the subcommand in the arguments; -1: none
}

func splitGit(args []string) gitLine {
	g := gitLine{sub: -1}
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "-C":
			if i+1 < len(args) {
				i++
				g.dirs = append(g.dirs, args[i])
			}
		case gitAllowed[a]:
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
		u.path(d)
		u.dir = cleanRel(u.dir, d)
	}
	if g.sub < 0 {
		u.own |= Exec
		return
	}
	sub, rest := args[g.sub], args[g.sub+1:]
	switch {
	case gitRemote[sub]:
		u.own |= Net | Exec
		u.words(rest)
		return
	case gitRead[sub], sub == "diff", sub == "branch", sub == "symbolic-ref", sub == "update-ref", sub == "init":
	default:
		u.own |= Exec
		u.words(rest)
		return
	}
	a := gitSpecs[sub].parse(rest)
	switch sub {
	case "diff":
		if a.hasExact("cached", "staged") {
			u.own |= Read
		} else {
			u.own |= Exec
		}
	case "branch":
		u.own |= gitBranch(&a)
	case "symbolic-ref":
		if a.has("-d", "--delete", "-m") || len(a.operands) > 1 {
			u.own |= Write
		} else {
			u.own |= Read
		}
	case "update-ref", "init":
		u.own |= Write
		if a.has("--template") {
			u.own |= Exec // it copies hooks, programs later git commands run
		}
	default:
		u.own |= Read
	}
	if gitRunsProgram(sub, &a) {
		u.own |= Exec
	}
	if out := a.values("--output"); len(out) > 0 {
		u.own |= Write
		for _, o := range out {
			u.path(o)
		}
	}
	for _, v := range a.values("--separate-git-dir", "--template", "-X", "--exclude-from", "-f") {
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
// that implies it) and only showing options; --edit-description starts an editor.
func gitBranch(a *args) Effects {
	if a.has("--edit-description") {
		return Exec
	}
	show := map[string]bool{"list": true, "all": true, "remotes": true, "verbose": true,
		"quiet": true, "show-current": true, "contains": true, "no-contains": true,
		"merged": true, "no-merged": true, "points-at": true, "sort": true, "format": true,
		"color": true, "no-color": true, "column": true, "no-column": true, "abbrev": true,
		"no-abbrev": true, "ignore-case": true, "omit-empty": true}
	list := false
	for _, o := range a.opts {
		switch {
		case o.short != 0:
			if !strings.ContainsRune("larvqi", rune(o.short)) {
				return Write
			}
			list = list || o.short == 'l'
		default:
			for _, n := range o.names {
				if !show[n] {
					return Write
				}
			}
			list = list || o.is("--list", "--contains", "--no-contains", "--merged", "--no-merged", "--points-at")
		}
	}
	if len(a.operands) > 0 && !list {
		return Write
	}
	return Read
}

// gitPretty are the built-in formats of --pretty/--format; any other name without "%" is
// a pretty.<name> alias from the configuration, which may check signatures.
var gitPretty = map[string]bool{"oneline": true, "short": true, "medium": true, "full": true,
	"fuller": true, "reference": true, "email": true, "mboxrd": true, "raw": true}

// gitRunsProgram reports whether a read or write subcommand's options make it run a
// program: a dangerous option, or a format that checks signatures.
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
// work-tree file's content, which is why status and a work-tree diff stay exec; diff
// drivers and textconv are switched off by --no-ext-diff and --no-textconv after the
// subcommand; aliases never replace a built-in subcommand.
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

// gitHardened are the subcommands a git step runs hardened: the read and write ones, and
// the ones that only show the work tree (status, diff, blame), judged exec for the filter
// drivers they may still run. Any other subcommand (commit, merge, an alias…) runs as the
// user asked, judged exec.
var gitHardened = map[string]bool{
	"diff": true, "status": true, "blame": true,
	"branch": true, "symbolic-ref": true, "update-ref": true, "init": true,
}

// GitArgv returns the argv a git step runs with and whether it is hardened: for a
// subcommand of gitRead or gitHardened, GitOptions before the subcommand and, for diff,
// log and show, --no-ext-diff and --no-textconv after it (--no-textconv alone for grep and
// blame). Options of the step's own come after these and win. Run a hardened step with
// GitEnv. Any other argv is returned unchanged.
func GitArgv(argv []string) ([]string, bool) {
	if len(argv) == 0 || argv[0] != "git" {
		return argv, false
	}
	g := splitGit(argv[1:])
	if g.sub < 0 {
		return argv, false
	}
	sub := 1 + g.sub
	if !gitRead[argv[sub]] && !gitHardened[argv[sub]] {
		return argv, false
	}
	out := append([]string{"git"}, gitHarden...)
	out = append(out, argv[1:sub+1]...)
	switch argv[sub] {
	case "diff", "log", "show":
		out = append(out, "--no-ext-diff", "--no-textconv")
	case "grep", "blame":
		out = append(out, "--no-textconv")
	}
	return append(out, argv[sub+1:]...), true
}
