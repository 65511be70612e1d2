package policy

import (
	"path"
	"strings"
	"sync"
)

// Context holds the facts a decision needs about one session. Build it with a composite
// literal and pass it by pointer. It is read once, at its first use — the real places of
// the entries behind the classes (credential stores, PATH, roots…) are resolved then —
// so change none of its fields afterwards: make a new one. Every path a step names is
// resolved anew at each judgment, so one Context can serve a whole session.
type Context struct {
	// Cwd is the working directory a script starts in, a sandbox path (under the local
	// transport, the host path itself).
	Cwd string
	// Home is the host's home directory, where the credential stores of other programs
	// live. Empty: HOME from Env.
	Home string
	// Env is the session environment, NAME=value (the last of a name wins). It gives the
	// expansions of paddock policy check and the entries PATH, XDG_CONFIG_HOME,
	// AWS_SHARED_CREDENTIALS_FILE, AWS_CONFIG_FILE, CLOUDSDK_CONFIG and RIPGREP_CONFIG_PATH.
	Env []string
	// HostEnv are the environments, NAME=value each, of the host and of the sessions above
	// this one: the homes, config directories, credential variables and PATHs they name are
	// guarded as well as those Env names, so an environment the sandbox chose (a spawned
	// child's) can add to the secret and protected sets but never move them. Nil: Env alone.
	HostEnv [][]string
	// Roots are the workspace roots, host paths.
	Roots []string
	// Settings are the settings files loaded, host paths: each is protected.
	Settings []string
	// ConfigDir is Paddock's own config directory on the host. Empty: $XDG_CONFIG_HOME/paddock,
	// else Home/.config/paddock.
	ConfigDir string
	// Secrets are further secret entries, host paths, beyond the credential stores this
	// package knows.
	Secrets []string
	// Own are Paddock's own places on the host, kept from every session.
	Own Own
	// Ephemeral says the sandbox is a fresh one removed at the end: a path under no mount
	// belongs to it alone and is not outside.
	Ephemeral bool
	// ToHost maps a sandbox path (absolute, not cleaned: ".." may follow a symlink) to the
	// host path the classes are judged on; underMount is false for a path under no mount.
	// Nil: the identity (the local transport).
	ToHost func(sandbox string) (host string, underMount bool)
	// FS gives the path facts, on host paths. Nil: OSFS.
	FS FS
	// Rules are the trusted shell rules Check decides with, before the auto set.
	Rules []ShellRule
	// Auto is the auto set Check decides with. Its zero value grants nothing; use
	// DefaultAutoSet() for the default.
	Auto AutoSet

	once  sync.Once
	rules *rules // set once, by compile
}

// Own names Paddock's own places on the host. They are the host's, whatever the session's
// environment says (a sandbox's XDG_CONFIG_HOME or HOME is not where they are).
type Own struct {
	// ConfigDir is its settings directory: protected, the credentials files in it secret.
	// It stands in for Context.ConfigDir's default when that is empty.
	ConfigDir string
	// Secret are the places that hold its secrets: a daemon's sessions (their kernels'
	// attach keys), the audit logs (every command, credentials in its words too).
	Secret []string
	// Sockets are the places that speak for the user: a daemon's socket or its directory
	// (whoever connects answers every question). Naming one, or a path under it, is
	// secret; a directory above one (/tmp) is protected, not secret, as a socket's content
	// cannot be copied out.
	Sockets []string
	// Protected are the places whose content the host trusts: the kernel cache (the
	// binary local sessions run), its state around the secrets.
	Protected []string
}

// Getenv returns the value of a variable of Env ("" when unset).
func (c *Context) Getenv(name string) string {
	v, _ := lookupEnv(c.Env, name)
	return v
}

func lookupEnv(env []string, name string) (string, bool) {
	for i := len(env) - 1; i >= 0; i-- {
		if k, v, ok := strings.Cut(env[i], "="); ok && k == name {
			return v, true
		}
	}
	return "", false
}

func (c *Context) fs() FS {
	if c.FS == nil {
		return OSFS{}
	}
	return c.FS
}

// home is the host home directory.
func (c *Context) home() string {
	if c.Home != "" {
		return c.Home
	}
	return c.Getenv("HOME")
}

// compiled returns the rules, resolving them at the first call.
func (c *Context) compiled() *rules {
	c.once.Do(func() { c.rules = compile(c) })
	return c.rules
}

// abs makes a path absolute against dir. It does not clean it: ".." must step up from the
// real directory, which only Real knows.
func abs(dir, p string) string {
	if strings.HasPrefix(p, "/") {
		return p
	}
	if dir == "" {
		dir = "/"
	}
	return dir + "/" + p
}

// facts are what the effects of a step need to know of one path.
type facts struct {
	class PathClass
	// holds: the path is a secret or an ancestor of a secret entry.
	holds bool
	// local: a path under no mount of an ephemeral sandbox, which changes nothing outside.
	local bool
}

// secretish reports whether naming the path adds secret.
func (f facts) secretish() bool { return f.class == ClassSecret || f.holds }

// hasDotDot reports whether a path has a ".." component.
func hasDotDot(p string) bool {
	for p != "" {
		var c string
		c, p, _ = strings.Cut(p, "/")
		if c == ".." {
			return true
		}
	}
	return false
}

// paths judges the paths one step names. Within one judgment the disk is taken not to
// change, so the step's working directory is resolved once, and a relative path goes on
// from its real place (as the kernel goes on from a process's working directory).
type paths struct {
	ctx      *Context
	cwd      string // sandbox path
	resolved bool
	real     string // the real working directory, under the identity map
	loop     bool
	seen     []judged // the paths judged so far, each judged once
}

// judged is one path's facts, remembered for the rest of the judgment.
type judged struct {
	p    string
	full bool
	f    facts
}

func (c *Context) paths(cwd string) *paths { return &paths{ctx: c, cwd: cwd} }

// facts judges the sandbox path p (absolute or relative to the working directory). full
// asks for the whole class; without it only whether the path is or holds a secret is
// sure, which is all a step that does not write needs.
func (ps *paths) facts(p string, full bool) facts {
	for _, j := range ps.seen {
		if j.p == p && (j.full || !full) {
			return j.f
		}
	}
	f := ps.judge(p, full)
	ps.seen = append(ps.seen, judged{p, full, f})
	return f
}

func (ps *paths) judge(p string, full bool) facts {
	c, r := ps.ctx, ps.ctx.compiled()
	switch {
	case c.ToHost != nil:
		sp := abs(ps.cwd, p)
		if host, ok := c.ToHost(sp); ok {
			return r.host.judge(c.fs(), host, full)
		}
		f := r.sandbox.judge(nil, sp, full)
		if c.Ephemeral && f.class == ClassOutside {
			f.local = true
		}
		return f
	case strings.HasPrefix(p, "/"):
		return r.host.judge(c.fs(), p, full)
	}
	real, loop := ps.realOf(p)
	return r.host.judgeReal(c.fs(), real, loop, full)
}

// realOf resolves a relative path from the working directory, as Real would resolve the
// two joined, with fewer calls to the disk.
func (ps *paths) realOf(p string) (real string, loop bool) {
	fsys := ps.ctx.fs()
	dotdot, tried := hasDotDot(p), false
	if !ps.resolved {
		// Most often neither the working directory nor the path holds a symlink: one call
		// judges both.
		if cwd := abs("/", ps.cwd); !dotdot && !hasDotDot(cwd) {
			if whole := path.Clean(join(cwd, p)); linkFree(fsys, whole) {
				// No prefix of whole is a symlink, so neither is the working directory.
				ps.real, ps.resolved = path.Clean(cwd), true
				return whole, false
			}
			tried = true
		}
		ps.real, ps.loop = Real(fsys, abs("/", ps.cwd))
		ps.resolved = true
	}
	if ps.loop {
		return Real(fsys, abs(ps.cwd, p))
	}
	// From the real directory the path may still need no more than one call (unless that
	// call was just made on the same path).
	if !dotdot && !(tried && ps.real == path.Clean(abs("/", ps.cwd))) {
		if isName(p) {
			// The real directory has no symlink: a name in it needs one call, missing or not.
			if whole := join(ps.real, p); childLinkFree(fsys, whole) {
				return whole, false
			}
		} else if whole := path.Clean(join(ps.real, p)); linkFree(fsys, whole) {
			return whole, false
		}
	}
	real, _, loop = resolve(fsys, ps.real, components(p), 0)
	return real, loop
}
