package policy

import (
	"path"
	"strings"

	"mvdan.cc/sh/v3/syntax"

	"github.com/paddockhq/paddock/script"
)

// This file judges what only a shell does: a shell invocation the kernel interprets
// itself, a shell it cannot (an opaque script), and the builtins the kernel's shell runs.

// shellNames are the programs that read a shell script, by the name a step runs them under.
var shellNames = map[string]bool{
	"sh": true, "bash": true, "dash": true, "ash": true, "rbash": true, "zsh": true, "ksh": true,
	"ksh93": true, "mksh": true, "pdksh": true, "oksh": true, "yash": true, "posh": true,
	"fish": true, "csh": true, "tcsh": true, "busybox": true, "toybox": true,
}

// isShell reports whether a program name is a shell's, under any path.
func isShell(name string) bool { return shellNames[path.Base(name)] }

// shellEffects judges a step that runs a shell, when it runs it at the top of a step (the
// kernel starts it): an invocation the kernel interprets (script.Shell) has no effect of its
// own — each command of its script is judged as it runs — but the file it reads its script
// from, which it reads. Any other shell is opaque (opaqueShell). ok is false for a program
// that is no shell.
func shellEffects(u *use, argv []string, getenv func(string) string) (ok bool) {
	if !isShell(argv[0]) {
		return false
	}
	inv, interpreted := script.Shell(argv, getenv)
	if !interpreted {
		return opaqueShell(u, argv, true)
	}
	if inv.File != "" {
		u.own |= Read
		u.path(inv.File)
	}
	u.words(inv.Params[1:])
	return true
}

// opaqueShell judges a shell another program starts (env, xargs, find -exec…): the kernel
// does not interpret it, so its script runs unjudged. A script written out whole on the
// command line, of simple commands with literal words alone (sh -c 'id'), is judged here
// command by command, plus exec; any other (expansions, control flow, a script from a file
// or the input) every effect, so it always asks. cwdKnown is false when the program runs
// the shell elsewhere than the step's directory (find -execdir): then a relative path in
// the script could be anywhere, and it too gets every effect.
func opaqueShell(u *use, argv []string, cwdKnown bool) bool {
	if !isShell(argv[0]) {
		return false
	}
	u.own |= Exec
	if !staticScript(u, argv, cwdKnown) {
		u.own |= All
	}
	u.words(argv[1:])
	return true
}

// maxInner bounds how deep shells inside shells are judged on the command line.
const maxInner = 4

// staticScript judges the script of a shell invocation whose words are all literal, step by
// step; false when it has any other form.
func staticScript(u *use, argv []string, cwdKnown bool) bool {
	if u.depth >= maxInner {
		return false
	}
	inv, ok := script.Shell(argv, func(string) string { return "" })
	if !ok || inv.Source == "" {
		return false
	}
	sc, err := script.Parse(inv.Source)
	if err != nil || sc.Grammar != script.Steps {
		return false
	}
	for _, st := range sc.Steps {
		c, ok := st.Cmd.(*syntax.CallExpr)
		if !ok || len(c.Assigns) > 0 || len(st.Redirs) > 0 {
			return false
		}
		var words []string
		for _, w := range c.Args {
			lit, ok := script.Literal(w)
			if !ok {
				return false
			}
			words = append(words, lit)
		}
		if len(words) == 0 {
			continue
		}
		if !cwdKnown {
			for _, w := range words[1:] {
				if !strings.HasPrefix(w, "/") && !strings.HasPrefix(w, "-") {
					return false
				}
			}
		}
		inner := use{ctx: u.ctx, dir: u.dir, depth: u.depth + 1}
		evaluate(&inner, words)
		u.own |= inner.own
		u.paths = append(u.paths, inner.paths...)
		u.reads = append(u.reads, inner.reads...)
	}
	return true
}

// builtins gives the effects of the builtins the kernel's shell runs itself, by name. Their
// words count as any step's (a word that names a secret gives secret); what they only
// start is judged as it starts (eval's script, a trap's command, the program command runs).
var builtins map[string]rule

func init() {
	builtins = map[string]rule{
		// No effect beyond their words: text, tests of metadata, the shell's own state.
		"echo": none(0), "printf": none(0), "true": none(0), "false": none(0), ":": none(0),
		"pwd": none(0), "test": plain(0), "[": plain(0), "type": none(0), "hash": none(0),
		"help": none(0), "times": none(0), "caller": none(0), "jobs": none(0), "dirs": none(0),
		"alias": none(0), "unalias": none(0), "shift": none(0), "return": none(0),
		"break": none(0), "continue": none(0), "exit": none(0), "wait": none(0),
		"getopts": none(0), "let": none(0), "shopt": none(0), "umask": none(0), "set": none(0),
		"unset": none(0), "cd": plain(0), "pushd": plain(0), "popd": none(0),
		"read": none(0), "mapfile": none(0), "readarray": none(0), "eval": none(0), "trap": none(0),
		// The file sourced is read (its open is judged too); its commands as each runs.
		"source": plain(Read), ".": plain(Read),
		// They set the environment of the programs run next, like export.
		"export": exportRule, "declare": exportRule, "typeset": exportRule, "local": exportRule,
		"readonly": exportRule,
		// They run the builtin their operands name.
		"command": builtinWrapper, "builtin": builtinWrapper, "exec": builtinWrapper,
	}
}

// builtinWrapper judges command, builtin and exec wrapping a builtin (a program they wrap
// is judged when it starts); command -v only describes.
func builtinWrapper(u *use, args []string) {
	for len(args) > 0 && strings.HasPrefix(args[0], "-") {
		if args[0] == "-v" || args[0] == "-V" {
			u.words(args[1:])
			return
		}
		args = args[1:]
	}
	if len(args) == 0 {
		return
	}
	builtinEffects(u, args)
}

// builtinEffects judges a builtin; one the table does not know is exec.
func builtinEffects(u *use, argv []string) {
	r, ok := builtins[argv[0]]
	if !ok {
		u.own |= Exec
		u.words(argv[1:])
		return
	}
	r(u, argv[1:])
}

// tokenBreaks are where a word's tokens end when a word holds a script or a command line
// (python -c "open('/etc/x')", awk 'BEGIN{system("cat ~/.ssh/id_rsa")}').
const tokenBreaks = " \t\n\r'\"`;|&<>(){}[],=$:"

// tokens are the parts of a word that may name a path inside a script or a command line it
// holds: those with a "/" in them, or a leading "~" (which a shell in the script expands).
// A word that is itself a path is one token; a word without such a part has none.
func tokens(w, home string) []string {
	if !strings.ContainsAny(w, tokenBreaks) {
		return nil
	}
	var out []string
	for _, t := range strings.FieldsFunc(w, func(r rune) bool { return strings.ContainsRune(tokenBreaks, r) }) {
		switch {
		case t == "~" || strings.HasPrefix(t, "~/"):
			if home != "" {
				out = append(out, home+t[1:])
			}
		case strings.Contains(t, "/"):
			out = append(out, t)
		}
	}
	return out
}
