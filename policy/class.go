package policy

import (
	"errors"
	"io/fs"
	"path"
	"strings"
	"sync/atomic"
	"syscall"
)

// PathClass is the class of a host path, judged on its real location.
type PathClass int

// The classes. When several apply, the first listed here wins: Secret, Protected, Inside,
// Outside. The zero value is Outside.
const (
	// ClassOutside: under no workspace root.
	ClassOutside PathClass = iota
	// ClassInside: under a workspace root, and no rule below covers it.
	ClassInside
	// ClassProtected: a protected rule covers it, or it is an ancestor of a protected or
	// secret entry.
	ClassProtected
	// ClassSecret: a secret entry, or under one.
	ClassSecret
)

var classNames = [...]string{"outside", "inside", "protected", "secret"}

func (c PathClass) String() string {
	if c < 0 || int(c) >= len(classNames) {
		return "unknown"
	}
	return classNames[c]
}

// MarshalText writes the class's name.
func (c PathClass) MarshalText() ([]byte, error) { return []byte(c.String()), nil }

// homeSecrets are the credential stores of other programs, relative to the home directory.
var homeSecrets = []string{
	".ssh", ".aws", ".azure", ".config/gcloud", ".config/gh", ".docker/config.json", ".kube",
	".gnupg", ".password-store", ".local/share/keyrings", ".netrc", ".git-credentials",
	".npmrc", ".pypirc", ".cargo/credentials", ".cargo/credentials.toml", ".pgpass",
	".config/git/credentials", ".vault-token", ".terraform.d/credentials.tfrc.json",
	".config/containers/auth.json",
}

// configSecrets are the stores of homeSecrets kept in the configuration directory, which
// XDG_CONFIG_HOME moves away from ~/.config.
var configSecrets = []string{"gcloud", "gh", "git/credentials", "containers/auth.json"}

// runtimeSecrets are the stores kept in XDG_RUNTIME_DIR (podman's login by default).
var runtimeSecrets = []string{"containers/auth.json"}

// envSecrets name variables whose value is a credential file or directory; KUBECONFIG is a
// list of them.
var envSecrets = []string{
	"AWS_SHARED_CREDENTIALS_FILE", "AWS_CONFIG_FILE", "CLOUDSDK_CONFIG", "PGPASSFILE",
	"REGISTRY_AUTH_FILE", "GOOGLE_APPLICATION_CREDENTIALS", "TF_CLI_CONFIG_FILE", "GNUPGHOME",
	"PASSWORD_STORE_DIR", "AZURE_CONFIG_DIR", "KUBECONFIG",
}

// envSecretFiles name variables whose value is a directory holding a credential file.
var envSecretFiles = map[string]string{"DOCKER_CONFIG": "config.json"}

// envSockets name variables whose value is a socket that speaks for the user: whoever
// connects to an ssh agent signs with its keys.
var envSockets = []string{"SSH_AUTH_SOCK"}

// paddockSecrets are Paddock's own credential files, in its config directory.
var paddockSecrets = []string{"credentials", "credentials.json", "credentials.toml", "credentials.yaml", "credentials.yml"}

// projectDirs are the directory names protected wherever they lie below a workspace root.
var projectDirs = []string{".git", ".paddock"}

// defaultPath is the search path of a shell whose PATH is unset.
const defaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// maxWalk bounds the entries read to learn whether a directory holds a .git or .paddock
// directory; a bigger tree is taken to hold one.
const maxWalk = 100_000

// rules are the entries of one context: for host paths, and (when the sandbox has its own
// paths) for sandbox paths under no mount, judged lexically against the sandbox's HOME and
// PATH.
type rules struct {
	host, sandbox *ruleSet
}

// ruleSet is one set of entries, each a clean absolute path.
type ruleSet struct {
	secrets   []string
	sockets   []string // secret, and under protected too: their ancestors are only protected
	protected []string // each covers itself and everything under it
	roots     []string
	resolve   bool // judge real paths (host); else lexical (sandbox)
	// proc: /proc shows processes that are not the step's own — the host's, or a lasting
	// sandbox's; a fresh container's /proc shows only its own, which hold nothing of anyone's.
	proc bool
	// seen[i] is set once secrets[i] was found to exist: it is taken to exist from then on.
	seen []atomic.Bool
}

// compile resolves the entries of c.
func compile(c *Context) *rules {
	fsys := c.fs()
	hostCwd := c.Cwd
	if c.ToHost != nil {
		if h, ok := c.ToHost(abs("/", c.Cwd)); ok {
			hostCwd = h
		}
	}
	host := &ruleSet{resolve: true, proc: true}
	sandbox := &ruleSet{proc: !c.Ephemeral}
	add := func(rs *ruleSet, list *[]string, base, p string) {
		if p == "" {
			return
		}
		p = path.Clean(abs(base, p))
		*list = append(*list, p)
		if rs.resolve {
			if r, loop := Real(fsys, p); !loop && r != p {
				*list = append(*list, r)
			}
		}
	}
	addSecrets := func(rs *ruleSet, base, home, configDir string, env []string) {
		if home != "" {
			for _, s := range homeSecrets {
				add(rs, &rs.secrets, base, path.Join(home, s))
			}
		}
		for _, dir := range []struct {
			name    string
			entries []string
		}{{"XDG_CONFIG_HOME", configSecrets}, {"XDG_RUNTIME_DIR", runtimeSecrets}} {
			if d, _ := lookupEnv(env, dir.name); strings.HasPrefix(d, "/") {
				for _, s := range dir.entries {
					add(rs, &rs.secrets, base, path.Join(d, s))
				}
			}
		}
		for _, v := range envSecrets {
			val, _ := lookupEnv(env, v)
			for _, p := range strings.Split(val, ":") {
				add(rs, &rs.secrets, base, p)
			}
		}
		for v, file := range envSecretFiles {
			if val, _ := lookupEnv(env, v); val != "" {
				add(rs, &rs.secrets, base, path.Join(val, file))
			}
		}
		for _, v := range envSockets {
			val, _ := lookupEnv(env, v)
			add(rs, &rs.sockets, base, val)
			add(rs, &rs.protected, base, val)
		}
		if configDir != "" {
			for _, s := range paddockSecrets {
				add(rs, &rs.secrets, base, path.Join(configDir, s))
			}
		}
	}

	configDir := c.ConfigDir
	if configDir == "" {
		configDir = c.Own.ConfigDir
	}
	if configDir == "" {
		configDir = defaultConfigDir(c.Getenv("XDG_CONFIG_HOME"), c.home())
	}
	addSecrets(host, hostCwd, c.home(), configDir, c.Env)
	// The host's own locations, whatever the session's environment says: an environment a
	// sandbox chose (a spawned child's) can add to the guarded set, never move it. Each of
	// the host's environments counts (a child's are its ancestors').
	for _, env := range c.HostEnv {
		hostHome, _ := lookupEnv(env, "HOME")
		hostXDG, _ := lookupEnv(env, "XDG_CONFIG_HOME")
		hostConfig := defaultConfigDir(hostXDG, hostHome)
		addSecrets(host, hostCwd, hostHome, hostConfig, env)
		add(host, &host.protected, hostCwd, hostConfig)
		hostPath, ok := lookupEnv(env, "PATH")
		if !ok {
			hostPath = defaultPath
		}
		for _, dir := range strings.Split(hostPath, ":") {
			if strings.HasPrefix(dir, "/") { // a relative entry names no fixed host place
				add(host, &host.protected, hostCwd, dir)
			}
		}
	}
	for _, s := range c.Secrets {
		add(host, &host.secrets, hostCwd, s)
	}
	for _, s := range c.Own.Secret {
		add(host, &host.secrets, hostCwd, s)
	}
	for _, s := range c.Own.Sockets {
		add(host, &host.sockets, hostCwd, s)
		add(host, &host.protected, hostCwd, s)
	}
	add(host, &host.protected, hostCwd, configDir)
	for _, p := range c.Own.Protected {
		add(host, &host.protected, hostCwd, p)
	}
	for _, s := range c.Settings {
		add(host, &host.protected, hostCwd, s)
	}
	for _, r := range c.Roots {
		add(host, &host.roots, hostCwd, r)
		for _, g := range gitDirs(fsys, path.Clean(abs(hostCwd, r))) {
			add(host, &host.protected, hostCwd, g)
		}
	}
	// The git directory the session's git commands use, wherever the environment moves it.
	for _, env := range append([][]string{c.Env}, c.HostEnv...) {
		for _, v := range []string{"GIT_DIR", "GIT_COMMON_DIR"} {
			val, _ := lookupEnv(env, v)
			add(host, &host.protected, hostCwd, val)
		}
	}
	pathVar, ok := lookupEnv(c.Env, "PATH")
	if !ok {
		pathVar = defaultPath // what a shell searches when PATH is unset
	}
	for _, dir := range strings.Split(pathVar, ":") {
		if dir == "" {
			dir = "." // an empty PATH entry is the working directory
		}
		sp := abs(c.Cwd, dir)
		if c.ToHost == nil {
			add(host, &host.protected, hostCwd, sp)
			continue
		}
		if h, ok := c.ToHost(sp); ok {
			add(host, &host.protected, hostCwd, h)
		}
		add(sandbox, &sandbox.protected, c.Cwd, sp)
	}
	if c.ToHost != nil {
		home := c.Getenv("HOME")
		addSecrets(sandbox, c.Cwd, home, defaultConfigDir(c.Getenv("XDG_CONFIG_HOME"), home), c.Env)
		add(sandbox, &sandbox.protected, c.Cwd, defaultConfigDir(c.Getenv("XDG_CONFIG_HOME"), home))
	}
	for _, rs := range []*ruleSet{host, sandbox} {
		rs.seen = make([]atomic.Bool, len(rs.secrets))
	}
	return &rules{host: host, sandbox: sandbox}
}

// defaultConfigDir is $XDG_CONFIG_HOME/paddock, else ~/.config/paddock, else "".
func defaultConfigDir(xdg, home string) string {
	switch {
	case strings.HasPrefix(xdg, "/"):
		return path.Join(xdg, "paddock")
	case home != "":
		return path.Join(home, ".config", "paddock")
	}
	return ""
}

// Class returns the class of a host path (absolute, or relative to the host directory of
// ctx.Cwd), judged on its real location.
//
// Laws: a path under a secret entry is Secret (path_secret_wins); Inside only when the path
// does not loop, no secret or protected rule covers it, it is no ancestor of an entry and a
// root holds it (path_inside_is_safe); an ancestor of a protected or secret entry is
// Protected or Secret (path_ancestor_guarded).
func Class(ctx *Context, hostPath string) PathClass {
	base := ctx.Cwd
	if ctx.ToHost != nil {
		if h, ok := ctx.ToHost(abs("/", ctx.Cwd)); ok {
			base = h
		}
	}
	return ctx.compiled().host.judge(ctx.fs(), abs(base, hostPath), true).class
}

// judge classifies p. Without full, only whether p is or holds a secret is sure.
func (rs *ruleSet) judge(fsys FS, p string, full bool) facts {
	if !rs.resolve {
		return rs.judgeReal(fsys, path.Clean(p), false, full)
	}
	real, loop := Real(fsys, p)
	return rs.judgeReal(fsys, real, loop, full)
}

// judgeReal classifies a real path (as far as resolved, when it loops).
//
// A directory holds a secret when a secret entry exists below it (a dangling symlink
// counts: a write through it lands there), and is Protected whether one exists or not: a
// step may make one there. On sandbox paths, whose disk the host does not see, every
// entry is taken to exist.
func (rs *ruleSet) judgeReal(fsys FS, real string, loop, full bool) facts {
	for _, s := range rs.sockets {
		if under(real, s) {
			return facts{class: ClassSecret, holds: true}
		}
	}
	if rs.proc && procSecret(real) {
		return facts{class: ClassSecret, holds: true}
	}
	var f facts
	for i, s := range rs.secrets {
		if under(real, s) {
			return facts{class: ClassSecret, holds: true}
		}
		if under(s, real) {
			f.class = ClassProtected
			f.holds = f.holds || rs.present(fsys, i)
		}
	}
	if rs.dotenv(fsys, real) {
		return facts{class: ClassSecret, holds: true}
	}
	if rep, ok := procHolder(real); ok && rs.proc {
		f.class = ClassProtected
		f.holds = f.holds || fsys == nil || exists(fsys, rep) || exists(fsys, "/proc/1/environ")
	}
	if f.class == ClassProtected || !full {
		return f
	}
	for _, p := range rs.protected {
		if under(real, p) || under(p, real) {
			return facts{class: ClassProtected}
		}
	}
	inside := false
	for _, r := range rs.roots {
		if under(r, real) {
			// The root itself and its ancestors hold the root's .paddock directory.
			return facts{class: ClassProtected}
		}
		if under(real, r) {
			if hasProjectDir(real[len(r):]) || (rs.resolve && inGitDir(fsys, r, real)) {
				return facts{class: ClassProtected}
			}
			inside = true
		}
	}
	if inside && !loop && rs.resolve && rs.holdsProjectDir(fsys, real) {
		return facts{class: ClassProtected}
	}
	if inside && !loop {
		return facts{class: ClassInside}
	}
	return facts{class: ClassOutside}
}

// hasProjectDir reports whether a path relative to a root ("/a/.git/x") has a .git or
// .paddock component.
func hasProjectDir(rel string) bool {
	for rel != "" {
		rel = strings.TrimPrefix(rel, "/")
		c, rest, _ := strings.Cut(rel, "/")
		for _, d := range projectDirs {
			if c == d {
				return true
			}
		}
		rel = rest
	}
	return false
}

// holdsProjectDir reports whether the real directory dir holds a .git or .paddock entry, a
// bare repository or a dotenv file at any depth (dir itself included), symlinks not
// followed. It is not remembered: a later step may make one.
func (rs *ruleSet) holdsProjectDir(fsys FS, dir string) bool {
	fi, err := fsys.Lstat(dir)
	if err != nil || !fi.IsDir() {
		return false
	}
	return walkForProjectDir(fsys, dir)
}

func walkForProjectDir(fsys FS, dir string) bool {
	seen := 0
	stack := []string{dir}
	for len(stack) > 0 {
		d := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		entries, err := fsys.ReadDir(d)
		if err != nil {
			continue
		}
		if isGitDirListing(entries) {
			return true // a bare repository
		}
		for _, e := range entries {
			if seen++; seen > maxWalk {
				return true
			}
			for _, name := range projectDirs {
				if e.Name() == name {
					return true
				}
			}
			isDir := e.Type()&fs.ModeType == fs.ModeDir
			if !isDir && isDotenv(e.Name()) {
				return true // a secret below it
			}
			if isDir {
				stack = append(stack, join(d, e.Name()))
			}
		}
	}
	return false
}

// present reports whether the secret entry i exists, or may: on sandbox paths (no fsys),
// after an error other than a missing component, and once it was seen.
func (rs *ruleSet) present(fsys FS, i int) bool {
	if fsys == nil || i >= len(rs.seen) || rs.seen[i].Load() {
		return true
	}
	if exists(fsys, rs.secrets[i]) {
		rs.seen[i].Store(true)
		return true
	}
	return false
}

// exists reports whether p exists (as itself: a dangling symlink exists), or may: only a
// missing component says it does not.
func exists(fsys FS, p string) bool {
	_, err := fsys.Lstat(p)
	return err == nil || !(errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR))
}

// procFiles are the files of a process that show its environment, its arguments or its
// memory: another process's (a host's, on the local transport) hold its credentials.
var procFiles = map[string]bool{
	"environ": true, "cmdline": true, "mem": true, "maps": true, "smaps": true,
	"smaps_rollup": true, "numa_maps": true, "pagemap": true, "auxv": true,
}

// isProcID reports whether a component of /proc names a process: its id, or self and
// thread-self, which are the judging process until the step runs and then whichever
// process opens the path (the kernel's, for a redirection): never sure to be the step's.
func isProcID(c string) bool { return isDigits(c) || c == "self" || c == "thread-self" }

// procSecret reports whether p is or is under /proc/ID/F or /proc/ID/task/TID/F, F one
// of procFiles.
func procSecret(p string) bool {
	rest, ok := strings.CutPrefix(p, "/proc/")
	if !ok {
		return false
	}
	id, rest, _ := strings.Cut(rest, "/")
	if !isProcID(id) {
		return false
	}
	name, rest, _ := strings.Cut(rest, "/")
	if name == "task" {
		var tid string
		tid, rest, _ = strings.Cut(rest, "/")
		if !isDigits(tid) {
			return false
		}
		name, _, _ = strings.Cut(rest, "/")
	}
	return procFiles[name]
}

// procHolder reports whether p is an ancestor of procSecret's files, and names one of
// them that exists when p holds any: /, /proc, /proc/ID, /proc/ID/task[/TID].
func procHolder(p string) (file string, ok bool) {
	if p == "/" || p == "/proc" {
		return "/proc/self/environ", true
	}
	rest, ok := strings.CutPrefix(p, "/proc/")
	if !ok {
		return "", false
	}
	parts := strings.Split(rest, "/")
	switch {
	case !isProcID(parts[0]), len(parts) > 3:
		return "", false
	case len(parts) == 1:
		return p + "/environ", true
	case parts[1] != "task":
		return "", false
	case len(parts) == 2:
		return p, true
	case isDigits(parts[2]):
		return p + "/environ", true
	}
	return "", false
}

// dotenvTemplates are the suffixes of dotenv files that are templates, kept in
// repositories without values (.env.example).
var dotenvTemplates = map[string]bool{"example": true, "sample": true, "template": true, "dist": true, "tmpl": true, "tpl": true}

// isDotenv reports whether a name is a dotenv file's: .env or .env.NAME, no template.
// direnv's .envrc is none: a program kept in the repository, not a store of values.
func isDotenv(name string) bool {
	if name == ".env" {
		return true
	}
	suffix, ok := strings.CutPrefix(name, ".env.")
	return ok && suffix != "" && !dotenvTemplates[suffix]
}

// dotenv reports whether the real path p is or is under a dotenv file below a root; a
// directory so named (a virtual environment) is none.
func (rs *ruleSet) dotenv(fsys FS, p string) bool {
	for _, r := range rs.roots {
		if !under(p, r) || p == r {
			continue
		}
		rel := p[len(r):]
		if r == "/" {
			rel = p
		}
		for i := 1; i < len(rel); {
			j := strings.IndexByte(rel[i:], '/')
			if j < 0 {
				j = len(rel) - i
			}
			if isDotenv(rel[i : i+j]) {
				entry := p[:len(p)-len(rel)+i+j]
				if fsys == nil {
					return true
				}
				if fi, err := fsys.Lstat(entry); err != nil || !fi.IsDir() {
					return true
				}
			}
			i += j + 1
		}
	}
	return false
}

// gitDirs returns the git directories a repository at or above root uses, as far as the
// disk tells at once: root/.git and what a .git file names (gitdir:, and the commondir of
// a linked work tree's), the .git of a work tree root lies below, or root itself, or the
// directory above it, when it is a bare repository. Discovery stops at the first found,
// as git's does.
func gitDirs(fsys FS, root string) []string {
	var out []string
	for d := root; ; d = path.Dir(d) {
		g := join(d, ".git")
		if fi, err := fsys.Lstat(g); err == nil {
			out = append(out, g)
			if fi.Mode().IsRegular() {
				if dir, ok := gitdirLine(fsys, g); ok {
					dir = path.Clean(abs(d, dir))
					out = append(out, dir)
					if c, ok := firstLine(fsys, join(dir, "commondir")); ok {
						out = append(out, path.Clean(abs(dir, c)))
					}
				}
			}
			return out
		}
		if isGitDir(fsys, d) {
			return append(out, d)
		}
		if d == "/" {
			return out
		}
	}
}

// gitdirLine reads the directory a .git file names ("gitdir: DIR").
func gitdirLine(fsys FS, name string) (string, bool) {
	line, ok := firstLine(fsys, name)
	dir, found := strings.CutPrefix(line, "gitdir:")
	dir = strings.TrimSpace(dir)
	return dir, ok && found && dir != ""
}

// firstLine reads the first line of a small file, when the FS can read files.
func firstLine(fsys FS, name string) (string, bool) {
	fr, ok := fsys.(fileReader)
	if !ok {
		return "", false
	}
	b, err := fr.ReadFile(name)
	if err != nil {
		return "", false
	}
	line, _, _ := strings.Cut(string(b), "\n")
	line = strings.TrimSpace(line)
	return line, line != ""
}

// gitDirEntries are the names of the entries of a git directory whose content git trusts:
// where it finds refs, objects, configuration and hooks.
var gitDirEntries = map[string]bool{
	"HEAD": true, "config": true, "hooks": true, "objects": true, "refs": true, "info": true,
	"packed-refs": true, "index": true, "logs": true, "worktrees": true, "modules": true,
	"commondir": true, "gitdir": true, "shallow": true, "description": true, "branches": true,
	"FETCH_HEAD": true, "ORIG_HEAD": true,
}

// inGitDir reports whether the real path p, below root, lies in a git directory that is
// not named .git (a bare repository): below a directory that holds HEAD, objects/ and
// refs/, through one of gitDirEntries. Only a path with such a component costs a look.
func inGitDir(fsys FS, root, p string) bool {
	for d := p; under(d, root) && d != root; d = path.Dir(d) {
		if gitDirEntries[path.Base(d)] && isGitDir(fsys, path.Dir(d)) {
			return true
		}
	}
	return false
}

// isGitDir reports whether dir is a git directory: it holds HEAD, objects/ and refs/.
func isGitDir(fsys FS, dir string) bool {
	if _, err := fsys.Lstat(join(dir, "HEAD")); err != nil {
		return false
	}
	for _, sub := range []string{"objects", "refs"} {
		if fi, err := fsys.Lstat(join(dir, sub)); err != nil || !fi.IsDir() {
			return false
		}
	}
	return true
}

// isGitDirListing reports whether a directory's entries make it a git directory.
func isGitDirListing(entries []fs.DirEntry) bool {
	var head, objects, refs bool
	for _, e := range entries {
		switch e.Name() {
		case "HEAD":
			head = true
		case "objects":
			objects = e.IsDir()
		case "refs":
			refs = e.IsDir()
		}
	}
	return head && objects && refs
}
