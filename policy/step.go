package policy

import (
	"io/fs"
	"path"
	"slices"
	"strings"

	"github.com/paddockhq/paddock/script"
)

// Step is one step as it will run, after expansion: its words, its assignments, its
// redirections and the directory it starts in, all in sandbox terms.
type Step struct {
	Argv      []string   `json:"argv"`
	Assigns   []string   `json:"assigns,omitempty"` // NAME=value, before the command
	Redirects []Redirect `json:"redirects,omitempty"`
	Cwd       string     `json:"cwd"`
	// Builtin: the command is a builtin the kernel's shell runs itself (echo, cd, read,
	// export…), judged by what the builtin does, not by a program of that name.
	Builtin bool `json:"builtin,omitempty"`
	// Beside are the words of the commands that run at the same time as this one (the other
	// members of its pipeline): one that changes names (mv, ln, rm, mkdir…) may change what
	// this step's paths are by the time it opens them.
	Beside [][]string `json:"beside,omitempty"`
}

// renamers are the commands of the table that move, make or remove names, links among
// them. Any other command of the table changes no name (one may write a regular file: that
// makes no path lead elsewhere).
var renamers = map[string]bool{
	"mv": true, "ln": true, "rm": true, "rmdir": true, "mkdir": true, "cp": true, "rsync": true,
	"scp": true,
}

// gitReaders are git subcommands that change no name in the work tree.
var gitReaders = map[string]bool{
	"log": true, "diff": true, "status": true, "show": true, "grep": true, "blame": true,
	"ls-files": true, "ls-tree": true, "rev-parse": true, "rev-list": true, "cat-file": true,
	"describe": true, "shortlog": true, "whatchanged": true, "reflog": true, "help": true,
	"version": true, "for-each-ref": true, "name-rev": true, "merge-base": true,
}

// renames reports whether a command that runs beside others may move, make or remove names
// as it runs, its words judged as they are: one of renamers, a git that may write the work
// tree, a find that deletes, or one whose words are not known (none).
//
// A command judged exec does not count (a program the table does not know, a launcher such
// as xargs, a shell, sed with e): it runs only where exec was granted, by the auto set or by
// a person, and what it may do beside another command it may do of itself, opening the
// secret that command's path would lead to among it. Counting it would make every pipeline
// of a build or a test (make | tail, go test | tee log) ask, for no wall it keeps.
func renames(ctx *Context, argv []string) bool {
	if len(argv) == 0 {
		return true
	}
	return !ownEffects(ctx, argv).Has(Exec) && renamesByName(argv)
}

// renamesByName is renames for a command already known not to be judged exec.
func renamesByName(argv []string) bool {
	switch argv[0] {
	case "git":
		for _, w := range argv[1:] {
			if !strings.HasPrefix(w, "-") {
				return !gitReaders[w]
			}
		}
		return true // options only, or a -C/-c whose value was taken for the subcommand
	case "find":
		return slices.Contains(argv[1:], "-delete")
	}
	return renamers[argv[0]]
}

// Renames reports whether a program may move, make or remove names as it runs, judged as
// in a pipeline (renames): a program of the kernel's shell that does holds the shell until
// it ends, so that no later step is judged while it runs in the background.
func Renames(argv []string) bool { return renames(&Context{}, argv) }

// quiet are the commands that open no path and change none.
var quiet = map[string]bool{
	"echo": true, "printf": true, "pwd": true, "true": true, "false": true, "sleep": true,
	"seq": true, "yes": true, "basename": true, "dirname": true, "expr": true, "test": true,
	"[": true, ":": true, "wait": true,
}

// opens reports whether a command beside a renaming one may open a path the renaming changes
// after it was judged: any but a quiet one, or one judged exec (see renames).
func opens(ctx *Context, argv []string) bool {
	if len(argv) == 0 {
		return true
	}
	return !quiet[argv[0]] && !ownEffects(ctx, argv).Has(Exec)
}

// ownEffects are a command's own effects by the table, its paths not looked at.
func ownEffects(ctx *Context, argv []string) Effects {
	u := use{ctx: ctx, dir: "."}
	evaluate(&u, argv)
	return u.own
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
//   - a path the command's rule takes from its words that is or holds a secret adds secret,
//     and so does any word that names a secret whatever the command (anyWordSecret: echo ~
//     names a directory that holds one, not a secret, and stays harmless); for a command that
//     writes, a path outside the workspace adds outside and a protected one protected;
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
		words := s.Argv[1:]
		getenv := func(name string) string {
			if v, ok := lookupEnv(s.Assigns, name); ok {
				return v
			}
			return ctx.Getenv(name)
		}
		switch {
		case s.Builtin:
			builtinEffects(&u, s.Argv)
		case shellEffects(&u, s.Argv, getenv):
			if inv, ok := script.Shell(s.Argv, getenv); ok && inv.Source != "" {
				// The script is judged command by command as it runs, not as one word.
				words = slices.DeleteFunc(slices.Clone(words), func(w string) bool { return w == inv.Source })
			}
		default:
			evaluate(&u, s.Argv)
		}
		e |= u.own | ps.named(&u, u.own.Has(Write)) | ps.movedLinks(&u, u.own.Has(Write))
		if !e.Has(Secret) && slices.ContainsFunc(u.follows, ps.linksToSecret) {
			e |= Secret
		}
		if !e.Has(Secret) && ps.anyWordSecret(words, u.paths, ctx.home()) {
			e |= Secret
		}
	}
	for _, r := range s.Redirects {
		e |= ps.redirect(r)
	}
	switch {
	case e == 0 || e.Has(Exec) || len(s.Beside) == 0:
		// Alone; or judged exec, which may do of itself what a command beside it could make
		// it do.
	case slices.ContainsFunc(s.Beside, func(m []string) bool { return renames(ctx, m) }):
		// Its paths are judged before the commands beside it run; one of them may make any
		// of its paths a link to a secret first. It asks.
		e |= Secret
	case len(s.Argv) > 0 && renamesByName(s.Argv) && slices.ContainsFunc(s.Beside, func(m []string) bool { return opens(ctx, m) }):
		// The same race from the other side: a command beside it was judged before this
		// one started, and this one may change what that command's paths are (the kernel's
		// shell judges a background job's commands and the next ones in the order they
		// start, so either may come first). Not exec (above): its name says.
		e |= Secret
	}
	return e
}

// anyWordSecret reports whether a word of a command names a path that is a secret (or lies
// under one), whatever the command makes of it: the words of echo and printf reach xargs, sort
// --files0-from and file -f through a pipe, and a program's own rule may take a word for an
// option's value or pass over it. Each word counts as every path it may name (use.word),
// one that looks like an option also as it is, a path relative to the working directory
// (cat -- -/../.ssh/id_rsa after mkdir -- -), and a word that holds a script or a command
// line also by each path-like token in it (python3 -c "open('/root/.aws/credentials')").
// judged are the paths the command's rule already named, which need no second look.
func (ps *paths) anyWordSecret(words, judged []string, home string) bool {
	u := use{dir: "."}
	for _, w := range words {
		u.word(w)
		if len(w) > 1 && w[0] == '-' && w != "--" && strings.ContainsRune(w, '/') {
			u.path(w)
		}
		for _, t := range tokens(w, home) {
			u.word(t)
		}
	}
	for _, p := range u.paths {
		if !slices.Contains(judged, p) && ps.facts(p, false).class == ClassSecret {
			return true
		}
	}
	return false
}

// named returns the effects of the paths a command names: secret for one that is or holds a
// secret; when the command writes, outside and protected by class.
func (ps *paths) named(u *use, writes bool) Effects {
	var e Effects
	for i, p := range u.paths {
		if slices.Contains(u.paths[:i], p) {
			continue // judged once
		}
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

// movedLinks returns the effects of the symlinks a command moves or copies (mv, cp -P, a
// hard link of a link): a relative target is read from the directory the link lands in, so
// each is judged from each directory it may land in, as ln -s judges its targets.
func (ps *paths) movedLinks(u *use, writes bool) Effects {
	var e Effects
	for _, m := range u.moves {
		target, ok := ps.linkTarget(m.name)
		if !ok || strings.HasPrefix(target, "/") {
			continue // not a link, or one that points where it pointed (its real path is judged)
		}
		for _, d := range m.dirs {
			f := ps.facts(u.rel(d)+"/"+target, writes)
			if f.secretish() {
				e |= Secret
			}
			if writes && !f.local {
				e |= classEffect(f.class)
			}
		}
	}
	return e
}

// linksToSecret reports whether a tree a command reads following links holds a symlink
// whose real path is or holds a secret, or more entries than one judgment reads (maxWalk):
// then it cannot tell, and says so. Links to directories are followed into as the reader
// would, each real directory read once.
func (ps *paths) linksToSecret(tree string) bool {
	root, ok := ps.hostReal(tree)
	if !ok {
		return false // not on the host: the kernel's side has no host secret
	}
	fsys, r := ps.ctx.fs(), ps.ctx.compiled()
	seen, read := 0, map[string]bool{}
	stack := []string{root}
	for len(stack) > 0 {
		d := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if read[d] {
			continue
		}
		read[d] = true
		entries, err := fsys.ReadDir(d)
		if err != nil {
			continue
		}
		for _, e := range entries {
			if seen++; seen > maxWalk {
				return true
			}
			p := join(d, e.Name())
			switch {
			case e.Type()&fs.ModeSymlink != 0:
				real, loop := Real(fsys, p)
				if r.host.judgeReal(fsys, real, loop, false).secretish() {
					return true
				}
				if fi, err := fsys.Lstat(real); err == nil && fi.IsDir() {
					stack = append(stack, real)
				}
			case e.IsDir():
				stack = append(stack, p)
			}
		}
	}
	return false
}

// hostReal returns the real host path of the sandbox path p (absolute, or relative to the
// working directory), every symlink followed; ok is false for a path the host cannot see.
func (ps *paths) hostReal(p string) (real string, ok bool) {
	c := ps.ctx
	switch {
	case c.ToHost != nil:
		host, ok := c.ToHost(path.Clean(abs(ps.cwd, p)))
		if !ok {
			return "", false
		}
		real, _ = Real(c.fs(), host)
	case strings.HasPrefix(p, "/"):
		real, _ = Real(c.fs(), path.Clean(p))
	default:
		real, _ = ps.realOf(strings.TrimSuffix(p, "/"))
	}
	return real, true
}

// linkTarget returns the target of the symlink the sandbox path p names (its directory
// resolved, its last component not followed).
func (ps *paths) linkTarget(p string) (string, bool) {
	if p == "" || strings.HasSuffix(p, "/") {
		return "", false
	}
	dir, name := path.Split(p)
	if dir == "" {
		dir = "."
	}
	real, ok := ps.hostReal(dir)
	if !ok {
		return "", false // a sandbox path the host cannot see
	}
	fsys := ps.ctx.fs()
	fi, err := fsys.Lstat(join(real, name))
	if err != nil || fi.Mode()&fs.ModeSymlink == 0 {
		return "", false
	}
	target, err := fsys.Readlink(join(real, name))
	return target, err == nil
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
