package script

import (
	"path"
	"strings"
)

// Invocation is a shell asked to read a script: sh -c SCRIPT, bash FILE, a shell reading
// standard input. The kernel interprets such a script itself, judging every command it runs,
// instead of running the shell as a program; the policy judges the invocation as what the
// kernel does, not as an opaque program. Both read it with Shell, so they agree on which
// invocations those are.
type Invocation struct {
	// Source is the script when given on the command line (-c); else File names the script's
	// file ("" with Stdin: the script is standard input).
	Source string
	File   string
	Stdin  bool
	// Params are the positional parameters, Params[0] being $0.
	Params []string
	// Options are the shell options set on the command line (errexit, nounset, xtrace,
	// noglob, noexec, allexport, pipefail), as set -o names them.
	Options []string
}

// shells are the programs read as shells: those of a Debian or Alpine base, by name, or at
// their usual paths.
var shells = map[string]bool{
	"sh": true, "bash": true, "dash": true, "ash": true,
	"/bin/sh": true, "/bin/bash": true, "/bin/dash": true, "/bin/ash": true,
	"/usr/bin/sh": true, "/usr/bin/bash": true, "/usr/bin/dash": true,
}

// shortOptions are the single-letter options an invocation may carry and still be
// interpreted: those the interpreter sets as the shell would, and those that change nothing
// a script run from a file or a string can see ("" as the name). None makes the shell read
// a file of its own (-i, -l read startup files) or the script another way (-s); an option not
// here makes the invocation an opaque program, which the policy asks about.
var shortOptions = map[byte]string{
	'a': "allexport", 'e': "errexit", 'f': "noglob", 'n': "noexec", 'u': "nounset",
	'x': "xtrace", 'h': "", 'B': "", 'H': "",
}

// longOptions are the names -o may set, as the interpreter has them.
var longOptions = map[string]bool{
	"allexport": true, "errexit": true, "noexec": true, "noglob": true, "nounset": true,
	"xtrace": true, "pipefail": true,
}

// Shell reads argv (a program's words) as a shell invocation the kernel interprets. env is
// the environment the program would run with: a bash given BASH_ENV reads that file first,
// which makes it no invocation. ok is false for any other program, and for a shell asked
// for something other than reading a script as the interpreter would: an interactive or
// login shell (startup files), restricted mode, an option it does not know.
func Shell(argv []string, env func(string) string) (inv Invocation, ok bool) {
	if len(argv) == 0 || !shells[argv[0]] {
		return Invocation{}, false
	}
	if strings.Contains(path.Base(argv[0]), "bash") && env("BASH_ENV") != "" {
		return Invocation{}, false
	}
	command := false
	i := 1
	for ; i < len(argv); i++ {
		w := argv[i]
		if w == "--" || w == "-" {
			i++
			break
		}
		if len(w) < 2 || (w[0] != '-' && w[0] != '+') {
			break
		}
		if strings.HasPrefix(w, "--") {
			switch w {
			case "--norc", "--noprofile", "--noediting":
				continue
			}
			return Invocation{}, false
		}
		for j := 1; j < len(w); j++ {
			c := w[j]
			switch {
			case c == 'c' && w[0] == '-':
				command = true
			case c == 'o':
				if j != len(w)-1 || i+1 >= len(argv) || !longOptions[argv[i+1]] {
					return Invocation{}, false
				}
				i++
				if w[0] == '-' {
					inv.Options = append(inv.Options, argv[i])
				}
			default:
				name, known := shortOptions[c]
				if !known {
					return Invocation{}, false
				}
				if name != "" && w[0] == '-' {
					inv.Options = append(inv.Options, name)
				}
			}
		}
	}
	rest := argv[i:]
	switch {
	case command:
		if len(rest) == 0 {
			return Invocation{}, false // bash: -c: option requires an argument
		}
		inv.Source = rest[0]
		inv.Params = rest[1:]
		if len(inv.Params) == 0 {
			inv.Params = []string{argv[0]}
		}
	case len(rest) > 0:
		inv.File = rest[0]
		inv.Params = rest
	default:
		inv.Stdin = true
		inv.Params = []string{argv[0]}
	}
	return inv, true
}
