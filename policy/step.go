package policy

import (
	"path"
	"strings"
)

// Step is one step as it will run, after expansion: its words, its assignments, its
// redirections and the directory it starts in, all in sandbox terms.
type Step struct {
	Argv      []string   `json:"argv"`
	Assigns   []string   `json:"assigns,omitempty"` // NAME=value, before the command
	Redirects []Redirect `json:"redirects,omitempty"`
	Cwd       string     `json:"cwd"`
}

// Redirect is one redirection of a step. Op is one of <, >, >>, >& and &>; for >& to a
// descriptor ("2>&1") Path holds the descriptor.
type Redirect struct {
	FD   int    `json:"fd"`
	Op   string `json:"op"`
	Path string `json:"path"`
}

// StepEffects returns the effects of one step as it will run:
//   - the command's own effects, from the table (commands.go); a name with "/" or not in
//     the table is exec;
//   - an assignment makes the step exec; one that moves where git finds a repository,
//     its configuration or its templates (GIT_DIR, GIT_CONFIG_GLOBAL…) protected;
//   - every word that names a path that is or holds a secret adds secret; for a command
//     that writes, a word outside the workspace adds outside and a protected one protected;
//   - the working directory adds secret, when it is or holds one, to a command that reads
//     it because it names no path (ls, du, find, rg, grep -r, tree, git ls-files, git grep);
//   - each redirection adds the effects of its target (RedirectEffects).
//
// Laws: the step has every effect of every part (step_holds_every_part); secret only when a
// part names a path that is or holds a secret (secret_needs_a_secret_path), and always then
// (secret_path_gives_secret).
func StepEffects(ctx *Context, s Step) Effects {
	var e Effects
	ps := ctx.paths(s.Cwd)
	for _, a := range s.Assigns {
		e |= Exec | gitEnvEffect(a)
		_, v, _ := strings.Cut(a, "=")
		u := use{}
		u.word(v)
		e |= ps.named(&u, false)
	}
	if len(s.Argv) > 0 {
		u := use{ctx: ctx, dir: "."}
		evaluate(&u, s.Argv)
		e |= u.own | ps.named(&u, u.own.Has(Write))
	}
	for _, r := range s.Redirects {
		e |= ps.redirect(r)
	}
	return e
}

// named returns the effects of the paths a command names: secret for one that is or holds a
// secret; when the command writes, outside and protected by class.
func (ps *paths) named(u *use, writes bool) Effects {
	var e Effects
	for _, p := range u.paths {
		f := ps.facts(p, writes)
		if f.secretish() {
			e |= Secret
		}
		if writes && !f.local {
			e |= classEffect(f.class)
		}
	}
	for _, d := range u.reads {
		if ps.facts(d, false).secretish() {
			e |= Secret
		}
	}
	return e
}

// classEffect is what writing a path of a class adds beyond write (secret aside).
func classEffect(c PathClass) Effects {
	switch c {
	case ClassOutside:
		return Outside
	case ClassProtected:
		return Protected
	}
	return 0
}

// streams are the step's own descriptors: a redirection to one changes no file.
var streams = map[string]bool{"/dev/null": true, "/dev/stdin": true, "/dev/stdout": true, "/dev/stderr": true}

// RedirectEffects returns the effects of one redirection, whose target is a sandbox path
// (absolute or relative to cwd): reading adds read, writing write; to or from a secret
// adds secret; a write outside the workspace adds outside, to a protected path protected.
// The step's own streams (/dev/null, /dev/stdout, /dev/fd/N, a descriptor for >&) add
// nothing; /dev/tcp/… and /dev/udp/… add net.
func RedirectEffects(ctx *Context, cwd string, r Redirect) Effects {
	return ctx.paths(cwd).redirect(r)
}

func (ps *paths) redirect(r Redirect) Effects {
	if r.Op == ">&" && (r.Path == "-" || isDigits(r.Path)) {
		return 0
	}
	p := path.Clean(abs(ps.cwd, r.Path)) // the streams are known by name
	switch {
	case streams[p], strings.HasPrefix(p, "/dev/fd/") && isDigits(p[len("/dev/fd/"):]):
		return 0
	case strings.HasPrefix(p, "/dev/tcp/"), strings.HasPrefix(p, "/dev/udp/"):
		return Net
	}
	write := r.Op != "<"
	e := Read
	if write {
		e = Write
	}
	f := ps.facts(r.Path, write)
	if f.secretish() {
		e |= Secret
	}
	if write && !f.local {
		e |= classEffect(f.class)
	}
	return e
}

func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}
