package policy

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/paddockhq/paddock/script"
)

// Pools for random steps over testFS. A clean word names no path that is or holds a secret
// however a command reads it (as a path, an option's value, a "@file"); a secret one names
// a path that is or holds a secret.
var (
	cleanPaths = []string{"src/main.go", "build", "/tmp/x", "/etc/passwd", "docs/main.go", ".git/config", "/usr/bin/x", "vendor", "new/file", "loop", "/ws/src", ".paddock/x",
		"/proc/1/status", "/proc/cpuinfo", "/ws/.env.example", "/home/u/.config/git/config", "/home/u/repo"}
	secretPaths = []string{"/home/u/.ssh/id_ed25519", "keys", "keys/x", "/home/u", "/", "/home/u/.netrc", "/srv/aws/creds", "up", "/home/u/.config/paddock/credentials", "/home/u/.ssh",
		"/proc/1/environ", "/proc/self/cmdline", "/proc/7/task/7/mem", "/ws/.env", "/ws/src/.env.local", "/home/u/.pgpass", "/home/u/.vault-token"}
	cleanWords = []string{"-n", "5", "-la", "--color=auto", "x", "KEY", "s/a/b/", "p", "https://example.com", "-r", "-o", "-e", "--", "-exec", ";", "-delete", "+G", "HEAD", "--output"}
	cleanCwds  = []string{"/ws", "/ws/src", "/tmp"}
	secretCwds = []string{"/home/u", "/home/u/.ssh", "/ws/keys"}
	// pathCommands take paths as their last operands.
	pathCommands = [][]string{{"cat"}, {"head"}, {"tail", "-n", "3"}, {"wc"}, {"ls"}, {"rm", "-rf"}, {"cp"}, {"mv"}, {"touch"},
		{"mkdir", "-p"}, {"stat"}, {"du"}, {"tree"}, {"diff"}, {"python3"}, {"./x"}, {"grep", "-r", "x"}, {"rg", "x"},
		{"find"}, {"sed", "-n", "p"}, {"sort"}, {"less"}, {"file"}, {"git", "log", "--"}, {"xxd"}, {"chmod", "600"},
		{"curl", "-T"}, {"wget", "--post-file"}, {"ssh", "-i"}, {"tee"}, {"nohup", "cat"}, {"env", "cat"}, {"jq", "."},
		{"cd"}, {"uniq"}, {"ln", "-s"}}
	// cwdReaders read their working directory when they name no path.
	cwdReaders = [][]string{{"ls"}, {"ls", "-la"}, {"du"}, {"du", "-d", "1"}, {"tree"}, {"find"}, {"find", "-name", "x"},
		{"rg", "x"}, {"rg", "--files"}, {"grep", "-r", "x"}, {"grep", "-R", "-e", "x"}, {"git", "ls-files"}, {"git", "grep", "x"}}
)

func pick[T any](r *rand.Rand, list []T) T { return list[r.IntN(len(list))] }

// commandNames are every command of the table and a few it lacks.
func commandNames() []string {
	names := []string{"python3", "./x", "/usr/bin/rm", "awk", "npx"}
	for n := range table {
		names = append(names, n)
	}
	return names
}

var redirectOps = []string{"<", ">", ">>", "&>", ">&"}

// randomStep draws a step whose words come from the given pools.
func randomStep(r *rand.Rand, names []string, paths []string) Step {
	s := Step{Argv: []string{pick(r, names)}, Cwd: pick(r, cleanCwds)}
	for i := r.IntN(5); i > 0; i-- {
		switch r.IntN(4) {
		case 0:
			s.Argv = append(s.Argv, pick(r, cleanWords))
		case 1:
			s.Argv = append(s.Argv, "--file="+pick(r, paths))
		default:
			s.Argv = append(s.Argv, pick(r, paths))
		}
	}
	for i := r.IntN(3); i > 0; i-- {
		rd := Redirect{FD: r.IntN(3), Op: pick(r, redirectOps), Path: pick(r, paths)}
		if rd.Op == ">&" {
			rd.Path = pick(r, []string{"1", "2"})
		}
		s.Redirects = append(s.Redirects, rd)
	}
	if r.IntN(4) == 0 {
		s.Assigns = append(s.Assigns, "V="+pick(r, paths))
	}
	return s
}

// law: step_holds_every_part — a step has every effect of its command, of each
// redirection and of each assignment, each judged alone.
func TestStepHoldsEveryPart(t *testing.T) {
	t.Parallel()
	ctx := testContext()
	r := rand.New(rand.NewPCG(11, 12))
	names := commandNames()
	all := append(append([]string{}, cleanPaths...), secretPaths...)
	for i := 0; i < 20000; i++ {
		s := randomStep(r, names, all)
		got := StepEffects(ctx, s)
		parts := StepEffects(ctx, Step{Argv: s.Argv, Cwd: s.Cwd})
		for _, rd := range s.Redirects {
			parts |= RedirectEffects(ctx, s.Cwd, rd)
		}
		for _, a := range s.Assigns {
			parts |= StepEffects(ctx, Step{Assigns: []string{a}, Cwd: s.Cwd})
		}
		if got != parts {
			t.Fatalf("%s in %s: %s; its parts have %s", s, s.Cwd, got, parts)
		}
		// …and an auto set runs it unasked only if it holds every part's effects.
		a := randomAutoSet(r)
		if a.Decide(got) == Run && !a.Effects().Has(parts) {
			t.Fatalf("%s runs under %s with parts %s", s, a, parts)
		}
	}
}

// law: secret_needs_a_secret_path — a step whose words, redirections, assignments and
// working directory name no path that is or holds a secret has no secret.
func TestSecretNeedsASecretPath(t *testing.T) {
	t.Parallel()
	ctx := testContext()
	r := rand.New(rand.NewPCG(13, 14))
	names := commandNames()
	for i := 0; i < 20000; i++ {
		s := randomStep(r, names, cleanPaths)
		if e := StepEffects(ctx, s); e.Has(Secret) {
			t.Fatalf("%s in %s: %s, yet it names no secret", s, s.Cwd, e)
		}
	}
}

// law: secret_path_gives_secret — a path that is or holds a secret, named as an operand,
// a redirection's target, an assignment's value, or read as the working directory, gives
// its step secret, whatever else the step holds.
func TestSecretPathGivesSecret(t *testing.T) {
	t.Parallel()
	ctx := testContext()
	r := rand.New(rand.NewPCG(15, 16))
	for i := 0; i < 20000; i++ {
		secret := pick(r, secretPaths)
		var s Step
		switch r.IntN(4) {
		case 0: // an operand
			cmd := pick(r, pathCommands)
			s = Step{Argv: append(append([]string{}, cmd...), pick(r, cleanPaths), secret), Cwd: pick(r, cleanCwds)}
		case 1: // a redirection
			s = randomStep(r, commandNames(), cleanPaths)
			s.Redirects = append(s.Redirects, Redirect{FD: 1, Op: pick(r, []string{"<", ">", ">>", "&>"}), Path: secret})
		case 2: // an assignment
			s = randomStep(r, commandNames(), cleanPaths)
			s.Assigns = append(s.Assigns, "V="+secret)
		default: // the working directory, read because no path is named
			s = Step{Argv: append([]string{}, pick(r, cwdReaders)...), Cwd: pick(r, secretCwds)}
			secret = s.Cwd
		}
		if !strings.HasPrefix(secret, "/") {
			s.Cwd = "/ws" // where the relative secrets (keys, up) lie
		}
		if e := StepEffects(ctx, s); !e.Has(Secret) {
			t.Fatalf("%s in %s: %s, yet it names %s", s, s.Cwd, e, secret)
		}
	}
}

// law: composed_needs_every_part — a script's effects hold every effect of every step, and
// the same steps inside control flow (one exec step) hold them all too.
func TestComposedNeedsEveryPart(t *testing.T) {
	t.Parallel()
	ctx := testContext()
	r := rand.New(rand.NewPCG(17, 18))
	names := commandNames()
	all := append(append([]string{}, cleanPaths...), secretPaths...)
	var skip = map[string]bool{"cd": true, "export": true, "unset": true, "exit": true, "exec": true, "command": true, "time": true}
	for i := 0; i < 3000; i++ {
		var lines []string
		var want Effects
		for j := 1 + r.IntN(3); j > 0; j-- {
			s := randomStep(r, names, all)
			if skip[s.Argv[0]] || strings.Contains(s.Argv[0], "/") {
				continue
			}
			s.Cwd = "/ws"
			s.Assigns = nil
			line := s.String()
			lines = append(lines, line)
			want |= StepEffects(ctx, s)
		}
		if len(lines) == 0 {
			continue
		}
		src := strings.Join(lines, " && ")
		sc, err := script.Parse(src)
		if err != nil {
			t.Fatalf("%q: %v", src, err)
		}
		a := Check(ctx, sc)
		if sc.Grammar != script.Steps {
			t.Fatalf("%q: %s (%s)", src, sc.Grammar, sc.Reason)
		}
		if !a.Effects.Has(want) {
			t.Fatalf("%q: %s, its steps %s", src, a.Effects, want)
		}
		ex, err := script.Parse("if true; then " + src + "; fi")
		if err != nil {
			t.Fatal(err)
		}
		if e := Check(ctx, ex).Effects; !e.Has(want | Exec) {
			t.Fatalf("if true; then %s; fi: %s, its steps %s", src, e, want)
		}
	}
}
