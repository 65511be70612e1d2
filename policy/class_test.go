package policy

import (
	"path"
	"slices"
	"strings"
	"testing"
)

// testFS is the tree most table tests judge: a workspace with git, a home with credential
// stores, PATH directories and symlinks between them.
func testFS() *MapFS {
	return NewMapFS(
		"/ws/.git/config",
		"/ws/src/main.go",
		"/ws/docs -> src",
		"/ws/keys -> /home/u/.ssh",
		"/ws/up -> ..",
		"/ws/vendor/lib/.git/",
		"/ws/vendor/lib/x.go",
		"/ws/build/out.o",
		"/ws/sub/.paddock/settings.json",
		"/ws/.paddock/settings.json",
		"/ws/loop -> loop",
		"/ws/bin-link -> /usr/local/bin",
		"/home/u/.ssh/id_ed25519",
		"/home/u/.config/paddock/settings.json",
		"/home/u/.config/gh/hosts.yml",
		"/home/u/.docker/config.json",
		"/home/u/.docker/run/",
		"/home/u/repo/.git/",
		"/home/u/notes.txt",
		"/usr/bin/cat",
		"/usr/local/bin/",
		"/bin -> usr/bin",
		"/etc/passwd",
		"/srv/aws/creds",
	)
}

func testContext() *Context {
	return &Context{
		Cwd:      "/ws",
		Home:     "/home/u",
		Env:      []string{"HOME=/home/u", "PATH=/usr/local/bin:/usr/bin:/bin", "AWS_SHARED_CREDENTIALS_FILE=/srv/aws/creds"},
		Roots:    []string{"/ws"},
		Settings: []string{"/etc/paddock.yaml"},
		FS:       testFS(),
		Auto:     DefaultAutoSet(),
	}
}

func TestClass(t *testing.T) {
	t.Parallel()
	ctx := testContext()
	for _, tc := range []struct {
		path string
		want PathClass
	}{
		// Secret: the credential stores of other programs, and under them.
		{"/home/u/.ssh", ClassSecret},
		{"/home/u/.ssh/id_ed25519", ClassSecret},
		{"/home/u/.ssh/new-file", ClassSecret},
		{"/home/u/.config/gh/hosts.yml", ClassSecret},
		{"/home/u/.docker/config.json", ClassSecret},
		{"/home/u/.netrc", ClassSecret},
		{"/home/u/.cargo/credentials.toml", ClassSecret},
		{"/srv/aws/creds", ClassSecret},                      // AWS_SHARED_CREDENTIALS_FILE
		{"/home/u/.config/paddock/credentials", ClassSecret}, // Paddock's own
		{"/ws/keys/id_ed25519", ClassSecret},                 // through a symlink
		{"keys", ClassSecret},                                // relative to the working directory
		// Protected: Paddock's config, settings files, .git and .paddock, PATH directories.
		{"/home/u/.config/paddock", ClassProtected},
		{"/home/u/.config/paddock/settings.json", ClassProtected},
		{"/etc/paddock.yaml", ClassProtected},
		{"/ws/.git", ClassProtected},
		{"/ws/.git/hooks/pre-commit", ClassProtected},
		{"/ws/.paddock/settings.json", ClassProtected},
		{"/ws/sub/.paddock/x", ClassProtected},
		{"/ws/vendor/lib/.git/config", ClassProtected},
		{"/usr/local/bin/git", ClassProtected},
		{"/ws/bin-link/git", ClassProtected},
		{"/bin/sh", ClassProtected},
		{"/usr/bin", ClassProtected},
		// …and the ancestors of every entry.
		{"/", ClassProtected},
		{"/home", ClassProtected},
		{"/home/u", ClassProtected},
		{"/home/u/.docker", ClassProtected},
		{"/home/u/.config", ClassProtected},
		{"/usr", ClassProtected},
		{"/ws", ClassProtected},        // holds .git and .paddock
		{"/ws/vendor", ClassProtected}, // holds vendor/lib/.git
		{"/ws/vendor/lib", ClassProtected},
		{"/ws/sub", ClassProtected},
		{"/ws/up", ClassProtected}, // up -> .. is /
		// Inside: under a root, no rule covers it.
		{"/ws/src", ClassInside},
		{"/ws/src/main.go", ClassInside},
		{"/ws/docs/main.go", ClassInside},
		{"/ws/build", ClassInside},
		{"/ws/new/dir/file", ClassInside},
		{"/ws/.gitignore", ClassInside},
		{"/ws/src/../src/x", ClassInside},
		// Outside.
		{"/etc/passwd", ClassOutside},
		{"/home/u/notes.txt", ClassOutside},
		{"/home/u/.docker/run", ClassOutside},
		{"/home/u/repo/.git/config", ClassOutside}, // .git is protected below a root only
		{"/ws-old/notes.txt", ClassOutside},        // a prefix of a root's name is no root
		{"/ws/loop", ClassOutside},                 // a loop is never Inside
		{"/ws/up/etc/passwd", ClassOutside},
	} {
		if got := Class(ctx, tc.path); got != tc.want {
			t.Errorf("Class(%q) = %s, want %s", tc.path, got, tc.want)
		}
	}
}

func TestClassEntriesFromEnvironment(t *testing.T) {
	t.Parallel()
	ctx := &Context{
		Cwd: "/ws",
		Env: []string{"HOME=/h", "XDG_CONFIG_HOME=/xdg", "AWS_CONFIG_FILE=/a/config",
			"CLOUDSDK_CONFIG=/gcloud", "PATH=/opt/bin::rel"},
		Roots: []string{"/ws"},
		FS:    NewMapFS("/ws/", "/h/"),
	}
	for _, tc := range []struct {
		path string
		want PathClass
	}{
		{"/h/.ssh/x", ClassSecret}, // Home from HOME
		{"/a/config", ClassSecret},
		{"/gcloud/creds.db", ClassSecret},
		{"/xdg/paddock/x", ClassProtected},
		{"/xdg/paddock/credentials", ClassSecret},
		{"/h/.config/paddock/x", ClassOutside}, // XDG_CONFIG_HOME moved it
		{"/opt/bin/tool", ClassProtected},
		{"/ws/rel/tool", ClassProtected}, // a relative PATH entry
		{"/ws/x", ClassProtected},        // an empty PATH entry: the working directory
	} {
		if got := Class(ctx, tc.path); got != tc.want {
			t.Errorf("Class(%q) = %s, want %s", tc.path, got, tc.want)
		}
	}
}

// With no PATH in the environment the shell's default search path is protected, not the
// working directory; an empty PATH is the working directory.
func TestClassUnsetPath(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		env  []string
		path string
		want PathClass
	}{
		{nil, "/ws/x", ClassInside},
		{nil, "/usr/sbin/x", ClassProtected},
		{[]string{"PATH="}, "/ws/x", ClassProtected},
	} {
		ctx := &Context{Cwd: "/ws", Env: tc.env, Roots: []string{"/ws"}, FS: NewMapFS("/ws/")}
		if got := Class(ctx, tc.path); got != tc.want {
			t.Errorf("env %q: %s: %s, want %s", tc.env, tc.path, got, tc.want)
		}
	}
}

// A sandbox with its own paths: the classes are judged on the host path a mount maps to;
// a path under no mount is outside, unless the sandbox is ephemeral.
func TestPathFactsThroughMounts(t *testing.T) {
	t.Parallel()
	toHost := func(p string) (string, bool) {
		if under(p, "/workspace") {
			return "/ws" + strings.TrimPrefix(p, "/workspace"), true
		}
		return "", false
	}
	for _, eph := range []bool{false, true} {
		ctx := testContext()
		ctx.Cwd, ctx.ToHost, ctx.Ephemeral = "/workspace", toHost, eph
		ctx.Env = []string{"HOME=/root", "PATH=/usr/bin:/workspace/bin"}
		for _, tc := range []struct {
			path      string
			class     PathClass
			secretish bool
			local     bool
		}{
			{"/workspace/src/main.go", ClassInside, false, false},
			{"src/main.go", ClassInside, false, false},
			{"/workspace/.git/config", ClassProtected, false, false},
			{"/workspace/keys/id_ed25519", ClassSecret, true, false}, // the host's symlink
			{"/tmp/x", ClassOutside, false, eph},
			{"/root/.ssh/id_rsa", ClassSecret, true, false}, // the sandbox's own home
			{"/usr/bin/x", ClassProtected, false, false},    // the sandbox's PATH
			{"/workspace/bin/x", ClassProtected, false, false},
			{"/root", ClassProtected, true, false},
		} {
			f := ctx.paths(ctx.Cwd).facts(tc.path, true)
			if f.class != tc.class || f.secretish() != tc.secretish || f.local != tc.local {
				t.Errorf("ephemeral %v: %q: %+v, want class %s secret %v local %v", eph, tc.path, f, tc.class, tc.secretish, tc.local)
			}
		}
	}
}

// oracle lists the entries of a context the way the rules state them, each in its lexical
// and real form, and the .git and .paddock entries found in the tree under a root.
type oracle struct {
	secrets, protected, project []string
	roots                       []string
	// dotenv are the dotenv files below a root: secret by name, found by no walk on a read
	// of a directory above them (which needs no walk), only on a write.
	dotenv []string
}

func newOracle(ctx *Context, m *MapFS) oracle {
	var o oracle
	both := func(list *[]string, p string) {
		*list = append(*list, p)
		if r, loop := Real(m, p); !loop {
			*list = append(*list, r)
		}
	}
	for _, s := range homeSecrets {
		both(&o.secrets, path.Join(ctx.Home, s))
	}
	for _, s := range paddockSecrets {
		both(&o.secrets, path.Join(ctx.Home, ".config/paddock", s))
	}
	both(&o.protected, path.Join(ctx.Home, ".config/paddock"))
	for _, d := range strings.Split(ctx.Getenv("PATH"), ":") {
		both(&o.protected, d)
	}
	for _, r := range ctx.Roots {
		both(&o.roots, r)
	}
	for _, e := range m.Entries() {
		name, _, _ := strings.Cut(e, " -> ")
		isDir := strings.HasSuffix(name, "/")
		name = strings.TrimSuffix(name, "/")
		base := path.Base(name)
		if isDotenv(base) && !isDir {
			if r, loop := Real(m, path.Dir(name)); !loop && r == path.Dir(name) && anyUnder(name, o.roots) {
				o.dotenv = append(o.dotenv, name)
			}
			continue
		}
		if base != ".git" && base != ".paddock" {
			continue
		}
		if r, loop := Real(m, path.Dir(name)); loop || r != path.Dir(name) {
			continue // not reachable at this path
		}
		for _, root := range o.roots {
			if under(name, root) && name != root {
				o.project = append(o.project, name)
			}
		}
	}
	for _, root := range o.roots {
		o.project = append(o.project, root+"/.paddock")
	}
	return o
}

func anyUnder(p string, dirs []string) bool {
	for _, d := range dirs {
		if under(p, d) {
			return true
		}
	}
	return false
}

func anyHeld(p string, entries []string) bool {
	for _, e := range entries {
		if under(e, p) {
			return true
		}
	}
	return false
}

// law: path_secret_wins, path_inside_is_safe, path_ancestor_guarded
func TestClassLaws(t *testing.T) {
	t.Parallel()
	checked := map[PathClass]int{}
	for seed := uint64(0); seed < 300; seed++ {
		g := newTreeGen(seed)
		m := g.tree(40)
		ctx := &Context{Cwd: "/ws", Home: "/home/u", Env: []string{"PATH=/usr/bin"}, Roots: []string{"/ws"}, FS: m}
		o := newOracle(ctx, m)
		fail := func(format string, args ...any) {
			t.Helper()
			t.Fatalf("seed %d: "+format+"\n%s", append([]any{seed}, append(args, strings.Join(m.Entries(), "\n"))...)...)
		}
		for i := 0; i < 40; i++ {
			p := g.path(6)
			c := Class(ctx, p)
			if c != Class(ctx, p) {
				fail("Class(%q) not stable", p)
			}
			checked[c]++
			real, loop := Real(m, p)
			if !loop && (anyUnder(real, o.secrets) || anyUnder(real, o.dotenv)) && c != ClassSecret {
				fail("%q (real %q) is under a secret entry: %s", p, real, c)
			}
			if c == ClassInside {
				switch {
				case loop:
					fail("%q loops, yet Inside", p)
				case anyUnder(real, o.secrets), anyUnder(real, o.dotenv), anyUnder(real, o.protected), anyUnder(real, o.project):
					fail("%q (real %q): a rule covers it, yet Inside", p, real)
				case anyHeld(real, o.secrets), anyHeld(real, o.dotenv), anyHeld(real, o.protected), anyHeld(real, o.project):
					fail("%q (real %q) is an ancestor of an entry, yet Inside", p, real)
				case !anyUnder(real, o.roots):
					fail("%q (real %q): no root holds it, yet Inside", p, real)
				}
			}
		}
		for _, e := range slices.Concat(o.secrets, o.dotenv, o.protected, o.project) {
			for _, a := range prefixes(e) {
				if a == e {
					continue
				}
				if c := Class(ctx, a); c != ClassProtected && c != ClassSecret {
					if r, _ := Real(m, a); r != a {
						continue // a symlink: its real place is another path
					}
					fail("%q is an ancestor of the entry %q: %s", a, e, c)
				}
			}
		}
	}
	for c := ClassOutside; c <= ClassSecret; c++ {
		if checked[c] < 50 {
			t.Errorf("only %d random paths were %s: the generator misses cases", checked[c], c)
		}
	}
}

// A context does not remember what it found below a directory: a .git made by a later step
// protects its ancestors at once.
func TestClassSeesNewProjectDirs(t *testing.T) {
	t.Parallel()
	ctx := testContext()
	if c := Class(ctx, "/ws/build"); c != ClassInside {
		t.Fatalf("/ws/build: %s", c)
	}
	ctx.FS.(*MapFS).Add("/ws/build/sub/.git/")
	if c := Class(ctx, "/ws/build"); c != ClassProtected {
		t.Fatalf("/ws/build, holding a new .git: %s", c)
	}
}

// A path holds a secret only when a secret entry exists below it, and always then; the
// ancestors of an entry that does not exist stay protected. A dotenv file is secret by its
// name; a directory above one is found to hold it only by the walk of a write (protected).
// law: secret_needs_a_secret_path, secret_path_gives_secret, path_ancestor_guarded
func TestHoldsLaw(t *testing.T) {
	t.Parallel()
	checked := map[bool]int{}
	for seed := uint64(0); seed < 300; seed++ {
		g := newTreeGen(seed)
		m := g.tree(40)
		ctx := &Context{Cwd: "/ws", Home: "/home/u", Env: []string{"PATH=/usr/bin"}, Roots: []string{"/ws"}, FS: m}
		o := newOracle(ctx, m)
		for i := 0; i < 40; i++ {
			p := g.path(6)
			real, loop := Real(m, p)
			if loop {
				continue
			}
			f := ctx.paths("/ws").facts(p, false)
			want := anyUnder(real, o.secrets)
			// A dotenv name below a root that is no directory: a file, or none yet.
			for _, q := range prefixes(real) {
				if fi, err := m.Lstat(q); isDotenv(path.Base(q)) && anyUnder(q, o.roots) && !slices.Contains(o.roots, q) && (err != nil || !fi.IsDir()) {
					want = true
				}
			}
			for _, e := range o.secrets {
				if under(e, real) && e != real {
					if _, err := m.Lstat(e); err == nil {
						want = true
					}
				}
			}
			checked[want]++
			if f.secretish() != want {
				t.Fatalf("seed %d: %q (real %q): secret %v, want %v\n%s", seed, p, real, f.secretish(), want, strings.Join(m.Entries(), "\n"))
			}
			if c := Class(ctx, p); anyHeld(real, o.secrets) && !anyUnder(real, o.secrets) && c != ClassProtected {
				t.Fatalf("seed %d: %q (real %q) is an ancestor of a secret entry: %s", seed, p, real, c)
			}
		}
	}
	if checked[true] < 100 || checked[false] < 100 {
		t.Errorf("held %d, not held %d: the generator misses cases", checked[true], checked[false])
	}
}
