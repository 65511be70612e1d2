package policy

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/paddockhq/paddock/policy/policytest"
	"github.com/paddockhq/paddock/script"
)

func fuzzContext(m *MapFS) *Context {
	return &Context{Cwd: "/ws", Home: "/home/u", Env: []string{"HOME=/home/u", "PATH=/usr/bin:/bin"}, Roots: []string{"/ws"}, FS: m, Auto: DefaultAutoSet()}
}

// FuzzClass: any tree and any path, never a panic; the same input gives the same class,
// from the same context and from a fresh one; the real path has no symlink prefix unless
// it looped.
func FuzzClass(f *testing.F) {
	f.Add("/ws/a -> ..\n/ws/b/\n/home/u/.ssh/x", "/ws/a/home/u/.ssh")
	f.Add("/ws/l -> l\n/ws/.git/", "/ws/l/x")
	f.Add("/ws/d -> /home/u\n/home/u/.ssh/", "d/../ws/d/.ssh/id")
	f.Add(strings.Join(testFS().Entries(), "\n"), "/ws/up/ws/keys")
	f.Fuzz(func(t *testing.T, tree, p string) {
		m := NewMapFS(strings.Split(tree, "\n")...)
		ctx := fuzzContext(m)
		c := Class(ctx, p)
		if again := Class(ctx, p); again != c {
			t.Fatalf("Class(%q) = %s, then %s", p, c, again)
		}
		if fresh := Class(fuzzContext(m), p); fresh != c {
			t.Fatalf("Class(%q) = %s, from a fresh context %s", p, c, fresh)
		}
		if real, loop := Real(m, abs("/ws", p)); !loop {
			if l := hasLinkPrefix(m, real); l != "" {
				t.Fatalf("Real(%q) = %q: %s is a symlink", p, real, l)
			}
		}
	})
}

// FuzzStepEffects: any words, and any commands beside them (the kernel's shell sends those:
// they are the sandbox's), never a panic, the same effects twice; the commands beside a step
// add at most secret to what it has alone, and Renames judges any words.
func FuzzStepEffects(f *testing.F) {
	for _, s := range []string{"cat\x00/home/u/.ssh/id", "git\x00-C\x00x\x00grep\x00-O", "sed\x00-i\x00s/a/b/w x\x00f",
		"xargs\x00env\x00nohup\x00rm\x00-rf\x00/", "curl\x00-sSLo\x00/tmp/x", "find\x00-D\x00", "xxd\x00-c"} {
		f.Add(s, "/ws", "")
	}
	f.Add("cat\x00k", "/ws", "mv\x00a\x00k\x01sleep\x005")
	f.Add("mv\x00a\x00b", "/ws", "cat\x00k\x01\x01./tool")
	ctx := fuzzContext(testFS())
	f.Fuzz(func(t *testing.T, words, cwd, beside string) {
		s := Step{Argv: strings.Split(words, "\x00"), Cwd: cwd}
		alone := StepEffects(ctx, s)
		if beside != "" {
			for _, m := range strings.Split(beside, "\x01") {
				var argv []string
				if m != "" {
					argv = strings.Split(m, "\x00")
				}
				s.Beside = append(s.Beside, argv)
				Renames(argv)
			}
		}
		e := StepEffects(ctx, s)
		if e != StepEffects(ctx, s) {
			t.Fatalf("%q beside %q: not stable", words, beside)
		}
		if e&^Secret != alone&^Secret || !e.Has(alone) {
			t.Fatalf("%q: %v alone, %v beside %q", words, alone, e, beside)
		}
	})
}

// FuzzCheck: any script that parses, never a panic; the same analysis twice; the script's
// effects hold every step's.
func FuzzCheck(f *testing.F) {
	rows, err := policytest.ReadCorpus("testdata/commands.tsv")
	if err != nil {
		f.Fatal(err)
	}
	for _, r := range rows {
		f.Add(r.Command)
	}
	ctx := fuzzContext(testFS())
	f.Fuzz(func(t *testing.T, src string) {
		sc, err := script.Parse(src)
		if err != nil {
			return
		}
		a := Check(ctx, sc)
		if b := Check(ctx, sc); a.Effects != b.Effects || len(a.Steps) != len(b.Steps) {
			t.Fatalf("%q: %s, then %s", src, a.Effects, b.Effects)
		}
		for _, s := range a.Steps {
			if !a.Effects.Has(s.Effects) {
				t.Fatalf("%q: %s lacks step %q's %s", src, a.Effects, s.Command, s.Effects)
			}
		}
	})
}

// FuzzSedSafe: any script, never a panic, the same answer twice.
func FuzzSedSafe(f *testing.F) {
	for _, s := range []string{"p", "s/a/b/g", "1,/x/{p;d}", "s/a/b/w f", "y/ab/cd/", "0,/re/d", "#n\np", "s\x00a\x00b\x00"} {
		f.Add(s)
	}
	sed, err := exec.LookPath("sed")
	if err != nil || exec.Command(sed, "--sandbox", "-n", "p").Run() != nil {
		f.Skip("no GNU sed with --sandbox to judge against")
	}
	// SedSafe's promise is that a safe script reads and writes no file and runs no program:
	// GNU sed's own --sandbox refuses exactly the commands that do (e, r, R, w, W, the e and w
	// flags), at parse time. A script SedSafe calls safe is never one the sandbox refuses.
	// (The converse need not hold: SedSafe errs toward unsafe.)
	f.Fuzz(func(t *testing.T, s string) {
		if !SedSafe(s) || strings.ContainsRune(s, 0) {
			return
		}
		cmd := exec.Command(sed, "--sandbox", "-n", "-e", s)
		cmd.Stdin = strings.NewReader("")
		out, _ := cmd.CombinedOutput()
		if strings.Contains(string(out), "disabled in sandbox mode") {
			t.Fatalf("SedSafe(%q), but sed's sandbox refuses it: %s", s, out)
		}
	})
}

// FuzzQuote: any words without NUL read back unchanged.
func FuzzQuote(f *testing.F) {
	f.Add("echo", "a\u202eb")
	f.Add("if", "it's $x")
	f.Fuzz(func(t *testing.T, a, b string) {
		if strings.ContainsRune(a+b, 0) {
			return
		}
		argv := []string{a, b}
		q := Quote(argv)
		back, ok := unquote(t, q)
		if !ok || !equalStrings(back, argv) {
			t.Fatalf("Quote(%q) = %s, read back as %q", argv, q, back)
		}
	})
}
