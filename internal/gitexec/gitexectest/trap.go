// Package gitexectest makes repositories whose configuration tries every way git has of
// running a program of the repository's choosing, each program leaving a mark when it
// runs, so that a test can run what the host runs on such a workspace and find no mark.
package gitexectest

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/creack/pty"
)

// Marks are the names of the marks the traps leave, one per way of running a program.
var Marks = []string{
	"alias", "askpass", "credential", "diff-command", "diff-external", "editor", "ext",
	"filter-clean", "filter-process", "filter-smudge", "fsmonitor", "git-proxy", "gpg",
	"hook", "pager", "sequence-editor", "ssh-command", "textconv", "upload-pack",
}

// FilterMarks are the marks of the filter drivers: the one kind of program a command line
// cannot switch off, run when git reads a work-tree file's content (status, a work-tree
// diff, blame), which are judged exec for it.
var FilterMarks = []string{"filter-clean", "filter-process", "filter-smudge"}

// Layout is where a repository's traps are laid.
type Layout string

// The layouts.
const (
	// Plain: in the repository's .git/config.
	Plain Layout = "plain"
	// Included: in a file outside the workspace that .git/config includes (include.path
	// and includeIf).
	Included Layout = "included"
	// Linked: .git is a file naming a git directory elsewhere, whose config holds them.
	Linked Layout = "linked"
	// Below: the workspace is a directory inside a trapped work tree.
	Below Layout = "below"
	// Bare: the workspace is itself a bare repository holding them.
	Bare Layout = "bare"
)

// Layouts are every layout.
var Layouts = []Layout{Plain, Included, Linked, Below, Bare}

// Trap lays traps and reads their marks.
type Trap struct {
	dir   string // the programs, the hooks, the included files
	marks string
}

// New makes the trap programs in a fresh directory.
func New(t testing.TB) *Trap {
	t.Helper()
	tr := &Trap{dir: t.TempDir(), marks: t.TempDir()}
	for _, m := range Marks {
		// Each leaves its mark; a pager or a filter then passes its input on. The others
		// end at once: one that talks a protocol (ssh, a remote helper, a filter process)
		// leaves git at the end of its input.
		body := fmt.Sprintf("#!/bin/sh\n: > '%s'\n", filepath.Join(tr.marks, m))
		if m == "pager" || m == "filter-clean" || m == "filter-smudge" {
			body += "exec cat\n"
		}
		if err := os.WriteFile(tr.program(m), []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	hooks := filepath.Join(tr.dir, "hooks")
	os.Mkdir(hooks, 0o755)
	tr.writeHooks(t, hooks)
	if err := os.WriteFile(tr.configFile(), []byte(tr.config()), 0o644); err != nil {
		t.Fatal(err)
	}
	return tr
}

func (tr *Trap) program(mark string) string { return filepath.Join(tr.dir, mark) }
func (tr *Trap) configFile() string         { return filepath.Join(tr.dir, "traps.gitconfig") }

// hookNames are git's hooks.
var hookNames = []string{
	"applypatch-msg", "pre-applypatch", "post-applypatch", "pre-commit", "pre-merge-commit",
	"prepare-commit-msg", "commit-msg", "post-commit", "pre-rebase", "post-checkout",
	"post-merge", "pre-push", "pre-receive", "update", "proc-receive", "post-receive",
	"post-update", "reference-transaction", "push-to-checkout", "pre-auto-gc", "post-rewrite",
	"sendemail-validate", "fsmonitor-watchman", "post-index-change",
}

func (tr *Trap) writeHooks(t testing.TB, dir string) {
	t.Helper()
	for _, h := range hookNames {
		body := fmt.Sprintf("#!/bin/sh\n: > '%s'\n", filepath.Join(tr.marks, "hook"))
		if err := os.WriteFile(filepath.Join(dir, h), []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
}

// config is every trap, as configuration.
func (tr *Trap) config() string {
	p := tr.program
	aliases := ""
	for _, a := range []string{"status", "ls-files", "rev-parse", "config", "log", "show", "diff",
		"grep", "blame", "cat-file", "var", "evil"} {
		aliases += fmt.Sprintf("\t%s = !%s\n", a, p("alias"))
	}
	pagers := ""
	for _, c := range []string{"log", "show", "diff", "status", "grep", "blame", "ls-files", "config"} {
		pagers += fmt.Sprintf("\t%s = %s\n", c, p("pager"))
	}
	return fmt.Sprintf(`[core]
	fsmonitor = %s
	hooksPath = %s
	pager = %s
	editor = %s
	askPass = %s
	sshCommand = %s
	gitProxy = %s
	untrackedCache = true
[pager]
%s[sequence]
	editor = %s
[diff]
	external = %s
[diff "evil"]
	command = %s
	textconv = %s
[filter "evil"]
	clean = %s
	smudge = %s
[filter "proc"]
	process = %s
[credential]
	helper = !%s
[gpg]
	program = %s
[log]
	showSignature = true
[alias]
%s[protocol]
	allow = always
[protocol "ext"]
	allow = always
[protocol "file"]
	allow = always
[remote "origin"]
	url = ext::%s
	promisor = true
[remote "ssh"]
	url = ssh://example.invalid/r.git
[remote "gitp"]
	url = git://example.invalid/r.git
[remote "file"]
	url = file://%s
	uploadpack = %s
[gc]
	auto = 1
	autoDetach = false
[maintenance]
	auto = true
`, p("fsmonitor"), filepath.Join(tr.dir, "hooks"), p("pager"), p("editor"), p("askpass"),
		p("ssh-command"), p("git-proxy"), pagers, p("sequence-editor"), p("diff-external"),
		p("diff-command"), p("textconv"), p("filter-clean"), p("filter-smudge"),
		p("filter-process"), p("credential"), p("gpg"), aliases, p("ext"), tr.dir, p("upload-pack"))
}

// Sprung returns the marks left so far, sorted.
func (tr *Trap) Sprung(t testing.TB) []string {
	t.Helper()
	des, err := os.ReadDir(tr.marks)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, de := range des {
		out = append(out, de.Name())
	}
	return out
}

// Clear removes the marks left.
func (tr *Trap) Clear(t testing.TB) {
	t.Helper()
	for _, m := range tr.Sprung(t) {
		os.Remove(filepath.Join(tr.marks, m))
	}
}

// Env returns the GIT_* variables that would each undo a part of a hardening if a git took
// them from its caller: configuration from the environment naming programs, a global
// configuration file holding every trap, the programs git takes from the environment, and
// every transport allowed.
func (tr *Trap) Env() []string {
	p := tr.program
	return []string{
		fmt.Sprintf("GIT_CONFIG_PARAMETERS='core.fsmonitor'='%s'", p("fsmonitor")),
		"GIT_CONFIG_COUNT=1", "GIT_CONFIG_KEY_0=core.hooksPath", "GIT_CONFIG_VALUE_0=" + filepath.Join(tr.dir, "hooks"),
		"GIT_CONFIG_GLOBAL=" + tr.configFile(),
		"GIT_EXTERNAL_DIFF=" + p("diff-external"),
		"GIT_PAGER=" + p("pager"),
		"GIT_EDITOR=" + p("editor"),
		"GIT_SEQUENCE_EDITOR=" + p("sequence-editor"),
		"GIT_ASKPASS=" + p("askpass"),
		"GIT_SSH_COMMAND=" + p("ssh-command"),
		"GIT_ALLOW_PROTOCOL=ext:file:ssh:git",
	}
}

// SetEnv sets Env in the test's process for the rest of the test.
func (tr *Trap) SetEnv(t *testing.T) {
	for _, kv := range tr.Env() {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
}

// LiveMarks are the marks plain git leaves in Live on a layout: every mark, but in a bare
// repository, which has no work tree and no history, only those that need neither.
func LiveMarks(layout Layout) []string {
	if layout == Bare {
		return []string{"alias", "askpass", "credential", "editor", "git-proxy", "pager", "ssh-command", "upload-pack"}
	}
	return Marks
}

// git runs a plain git for the setup, with no configuration but the repository's and none
// of the caller's GIT_* variables.
func git(t testing.TB, dir string, stdin string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@example.invalid",
		"-c", "init.defaultBranch=main", "-c", "core.hooksPath=/dev/null", "-c", "core.fsmonitor=false"}, args...)...)
	cmd.Dir = dir
	cmd.Env = cleanEnv()
	cmd.Stdin = strings.NewReader(stdin)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "GIT_") {
			env = append(env, kv)
		}
	}
	return append(env, "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null")
}

func write(t testing.TB, name, data string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(name, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

// Repo makes a trapped repository in a fresh directory and returns the workspace: a history
// of two commits, the second carrying a signature, and a blob of the first (m.md's) missing
// from a partial clone (a lazy fetch would get it from the promisor remote, an ext::
// command); in
// the work tree a changed file of the same size (so status reads its content), a changed
// file under a process filter, an untracked file and an ignored one. The traps are laid
// once the repository is made; none has run.
func (tr *Trap) Repo(t testing.TB, layout Layout) string {
	t.Helper()
	root := t.TempDir()
	ws := filepath.Join(root, "ws")
	top := ws // the work tree
	switch layout {
	case Below:
		top = filepath.Join(root, "top")
		ws = filepath.Join(top, "sub")
	case Bare:
		git(t, root, "", "init", "-q", "--bare", ws)
		tr.lay(t, ws, layout)
		return ws
	}
	os.MkdirAll(ws, 0o755)
	if layout == Linked {
		git(t, top, "", "init", "-q", "--separate-git-dir", filepath.Join(root, "elsewhere.git"))
	} else {
		git(t, top, "", "init", "-q")
	}
	write(t, filepath.Join(ws, ".gitattributes"), "*.txt filter=evil diff=evil\n*.dat filter=proc\n")
	write(t, filepath.Join(ws, ".gitignore"), "*.log\n")
	write(t, filepath.Join(ws, "a.txt"), "one\n")
	write(t, filepath.Join(ws, "b.dat"), "data\n")
	write(t, filepath.Join(ws, "m.md"), "lost\n")
	git(t, top, "", "add", "-A")
	git(t, top, "", "commit", "-q", "-m", "first")
	first := git(t, top, "", "rev-parse", "HEAD:"+rel(t, top, filepath.Join(ws, "m.md")))
	write(t, filepath.Join(ws, "a.txt"), "two\n")
	write(t, filepath.Join(ws, "m.md"), "kept\n")
	git(t, top, "", "commit", "-q", "-a", "-m", "second")
	// The second commit again, signed: log.showSignature checks it.
	body := git(t, top, "", "cat-file", "commit", "HEAD")
	head, msg, _ := strings.Cut(body, "\n\n")
	signed := head + "\ngpgsig -----BEGIN PGP SIGNATURE-----\n \n iQEzBAABCAAdFiEE\n -----END PGP SIGNATURE-----\n\n" + msg + "\n"
	id := git(t, top, signed, "hash-object", "-t", "commit", "-w", "--stdin")
	git(t, top, "", "update-ref", "HEAD", id)
	gitDir := git(t, top, "", "rev-parse", "--absolute-git-dir")
	if err := os.Remove(filepath.Join(gitDir, "objects", first[:2], first[2:])); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(ws, "a.txt"), "six\n")
	write(t, filepath.Join(ws, "b.dat"), "changed data\n")
	write(t, filepath.Join(ws, "c.txt"), "untracked\n")
	write(t, filepath.Join(ws, "x.log"), "ignored\n")
	tr.lay(t, gitDir, layout)
	if m := tr.Sprung(t); len(m) > 0 {
		t.Fatalf("making the repository sprang %v", m)
	}
	return ws
}

func rel(t testing.TB, base, p string) string {
	r, err := filepath.Rel(base, p)
	if err != nil {
		t.Fatal(err)
	}
	return filepath.ToSlash(r)
}

// lay writes the traps into a git directory's configuration, and its hooks.
func (tr *Trap) lay(t testing.TB, gitDir string, layout Layout) {
	t.Helper()
	os.MkdirAll(filepath.Join(gitDir, "hooks"), 0o755)
	tr.writeHooks(t, filepath.Join(gitDir, "hooks"))
	cfg := filepath.Join(gitDir, "config")
	old, err := os.ReadFile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	add := "[core]\n\trepositoryformatversion = 1\n[extensions]\n\tpartialClone = origin\n"
	if layout == Included {
		add += fmt.Sprintf("[include]\n\tpath = %s\n[includeIf \"gitdir:/\"]\n\tpath = %s\n", tr.configFile(), tr.configFile())
	} else {
		add += tr.config()
	}
	if err := os.WriteFile(cfg, append(old, add...), 0o644); err != nil {
		t.Fatal(err)
	}
}

// Live runs plain git on trapped repositories of the layout, the way a user would, and
// returns the marks left: every mark, when the traps work. A test that finds no mark after
// the host ran shows something only if the traps spring when git is not hardened.
func (tr *Trap) Live(t testing.TB, layout Layout) []string {
	t.Helper()
	tr.Clear(t)
	ws, other := tr.Repo(t, layout), tr.Repo(t, layout)
	// quiet switches off the traps that end a command before the one it is run for
	// springs: an fsmonitor that reports nothing changed, a filter process that fails.
	quiet := []string{"-c", "core.fsmonitor=false", "-c", "filter.proc.process="}
	run := func(dir, stdin string, tty bool, args ...string) {
		cmd := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@example.invalid"}, args...)...)
		cmd.Dir, cmd.Env = dir, cleanEnv()
		if !tty {
			cmd.Stdin = strings.NewReader(stdin)
			cmd.Run() // many fail once their program has run: the marks tell
			return
		}
		f, err := pty.Start(cmd)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, f) // until git and its pager end
		cmd.Wait()
		f.Close()
	}
	run(ws, "", false, "-c", "core.fsmonitor=false", "status")                       // filter-clean
	run(ws, "", false, "-c", "core.fsmonitor=false", "diff", "--", "b.dat")          // filter-process
	run(ws, "", false, append(quiet, "diff")...)                                     // diff-command, diff-external
	run(ws, "", false, "log", "-p")                                                  // gpg, textconv, ext
	run(ws, "", true, "log", "-1")                                                   // pager
	run(ws, "", false, "status")                                                     // fsmonitor (it marks every file unchanged: after the others)
	run(ws, "", false, "evil")                                                       // alias
	run(ws, "", false, "commit", "--allow-empty")                                    // hook, editor
	run(ws, "", false, "ls-remote", "ssh")                                           // ssh-command
	run(ws, "", false, "ls-remote", "gitp")                                          // git-proxy
	run(ws, "", false, "ls-remote", "file")                                          // upload-pack
	run(ws, "", true, "config", "--list")                                            // pager, in a bare repository
	run(ws, "", false, "config", "--edit")                                           // editor, in a bare repository
	run(other, "", false, append(quiet, "checkout", "--", ".")...)                   // filter-smudge, hook
	run(other, "", false, append(quiet, "rebase", "-i", "HEAD~1")...)                // sequence-editor, on a clean tree
	run(ws, "protocol=https\nhost=example.invalid\n\n", false, "credential", "fill") // credential, askpass
	return tr.Sprung(t)
}

// Missing returns the marks of want that got lacks.
func Missing(want, got []string) []string {
	var out []string
	for _, m := range want {
		if !slices.Contains(got, m) {
			out = append(out, m)
		}
	}
	return out
}
