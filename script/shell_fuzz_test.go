package script

import (
	"slices"
	"strings"
	"testing"
)

// FuzzShell reads random command lines as shell invocations. When Shell takes one as a
// script the kernel interprets, it must be a shell, read the script one way only, carry only
// options the interpreter sets, and have no option before the script that makes a shell read
// a file of its own or change how it reads the script (-i, -l, -s, -r, --rcfile, -O).
func FuzzShell(f *testing.F) {
	for _, s := range []string{
		"sh\x00-c\x00echo hi", "bash\x00-ec\x00ls\x00zero\x00one", "bash\x00-o\x00pipefail\x00f.sh",
		"dash\x00-\x00x", "bash\x00--norc\x00-i", "sh\x00-l\x00-c\x00x", "bash\x00+o\x00xtrace\x00-c\x00x",
		"/bin/sh\x00-cs\x00x", "bash\x00-O\x00extglob\x00-c\x00x", "bash\x00--rcfile\x00f", "sh",
	} {
		f.Add(s, false)
	}
	f.Add("bash\x00-c\x00x", true)
	f.Fuzz(func(t *testing.T, line string, bashEnv bool) {
		argv := strings.Split(line, "\x00")
		env := func(name string) string {
			if name == "BASH_ENV" && bashEnv {
				return "/tmp/env"
			}
			return ""
		}
		inv, ok := Shell(argv, env)
		again, ok2 := Shell(slices.Clone(argv), env)
		if ok != ok2 || !slices.Equal(inv.Params, again.Params) || inv.Source != again.Source {
			t.Fatalf("Shell(%q) is not a function of its words", argv)
		}
		if !ok {
			return
		}
		if !shells[argv[0]] {
			t.Fatalf("Shell(%q) took %q for a shell", argv, argv[0])
		}
		if bashEnv && strings.Contains(argv[0], "bash") {
			t.Fatalf("Shell(%q) interprets a bash that reads BASH_ENV first", argv)
		}
		modes := 0
		if inv.Stdin {
			modes++
		}
		if inv.File != "" {
			modes++
		}
		if slices.ContainsFunc(argv[1:], func(w string) bool {
			return strings.HasPrefix(w, "-") && strings.Contains(w, "c") && !strings.HasPrefix(w, "--")
		}) && !inv.Stdin && inv.File == "" {
			modes++ // -c: the script is the word after the options
		}
		if modes != 1 && !(inv.File == "" && !inv.Stdin && modes == 0) {
			t.Fatalf("Shell(%q) = %+v: reads its script %d ways", argv, inv, modes)
		}
		if len(inv.Params) == 0 {
			t.Fatalf("Shell(%q) has no $0", argv)
		}
		for _, o := range inv.Options {
			if !longOptions[o] {
				t.Fatalf("Shell(%q) sets %q, which the interpreter does not", argv, o)
			}
		}
		// The options end where the script's words begin: none before may be one that reads
		// startup files or changes how the script is read.
		for _, w := range argv[1:] {
			if w == "--" || w == "-" || len(w) < 2 || (w[0] != '-' && w[0] != '+') {
				break
			}
			if strings.HasPrefix(w, "--") {
				if w != "--norc" && w != "--noprofile" && w != "--noediting" {
					t.Fatalf("Shell(%q) interprets a shell given %q", argv, w)
				}
				continue
			}
			if strings.ContainsAny(w[1:], "ilsrOvDkmpPtT") {
				t.Fatalf("Shell(%q) interprets a shell given %q", argv, w)
			}
			if strings.HasSuffix(w, "o") {
				break // its value follows; Shell checked it against the long names
			}
		}
	})
}
