package workspace

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/paddockhq/paddock/internal/gitexec/gitexectest"
)

// Listing, cloning and handing back a workspace whose repository names a program for every
// way git has of running one (in its configuration, in what that includes, behind a .git
// file, above the workspace, in a bare repository), with a caller whose GIT_* variables name
// them too, runs none of them; the listing is git's all the same.
// law: host_git_hardened
func TestHostGitHardened(t *testing.T) {
	needGit(t)
	tr := gitexectest.New(t)
	tr.SetEnv(t)
	ctx := context.Background()
	for _, l := range gitexectest.Layouts {
		ws := tr.Repo(t, l)
		es, err := List(ctx, ws, ListOptions{})
		if err != nil {
			t.Fatalf("%s: list: %v", l, err)
		}
		if l != gitexectest.Bare {
			var files []string
			for _, e := range es {
				if e.Kind != Dir {
					files = append(files, e.Path)
				}
			}
			want := []string{".gitattributes", ".gitignore", "a.txt", "b.dat", "c.txt", "m.md"}
			if !slices.Equal(files, want) {
				t.Errorf("%s: listed %v, want %v", l, files, want)
			}
		}
		dir := filepath.Join(t.TempDir(), "child")
		if _, err := Clone(ctx, ws, dir, Options{}); err != nil {
			t.Fatalf("%s: clone: %v", l, err)
		}
		os.WriteFile(filepath.Join(dir, CopyDir, "new.txt"), []byte("child\n"), 0o644)
		if _, err := Handback(ctx, dir); err != nil {
			t.Fatalf("%s: hand-back: %v", l, err)
		}
		if got := tr.Sprung(t); len(got) > 0 {
			t.Errorf("%s: the host ran %v", l, got)
		}
		tr.Clear(t)
	}
}

// The excludes file the user's own global configuration names still applies, though the
// host's git reads no global configuration; a repository's own one wins over it; with
// neither, git's default file applies. Each is recorded for the hand-back too.
func TestListHonoursUserExcludes(t *testing.T) {
	needGit(t)
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("XDG_CONFIG_HOME", filepath.Join(home, "xdg"))
	global := filepath.Join(home, ".gitconfig")
	t.Setenv("GIT_CONFIG_GLOBAL", global)
	writeTree(t, home, spec("user-ignore=*.user\n", "repo-ignore=*.repo\n", "xdg/git/ignore=*.xdg\n"))
	root := t.TempDir()
	writeTree(t, root, spec("a.txt=x", "b.user=x", "c.repo=x", "d.xdg=x"))
	git(t, root, "init", "-q")
	check := func(what string, want []string, pattern string) {
		t.Helper()
		files, _ := listed(t, root)
		if !slices.Equal(files, want) {
			t.Errorf("%s: listed %v, want %v", what, files, want)
		}
		h, err := ignoreFacts(context.Background(), root)
		if err != nil {
			t.Fatal(err)
		}
		var recorded []string
		for _, s := range h.Ignore {
			recorded = append(recorded, s.Patterns...)
		}
		if !slices.Contains(recorded, pattern) {
			t.Errorf("%s: recorded %v, not %s", what, recorded, pattern)
		}
	}
	check("git's default", []string{"a.txt", "b.user", "c.repo"}, "*.xdg")
	os.WriteFile(global, []byte("[core]\n\texcludesFile = ~/user-ignore\n"), 0o644)
	check("the user's", []string{"a.txt", "c.repo", "d.xdg"}, "*.user")
	git(t, root, "config", "core.excludesFile", filepath.Join(home, "repo-ignore"))
	check("the repository's", []string{"a.txt", "b.user", "d.xdg"}, "*.repo")
}

// A repository owned by another user is one git refuses to read (safe.directory is honoured
// only from the global configuration, which the host's git does not read): the workspace is
// listed without git, with its .gitignore files, and none of its programs runs.
// law: host_git_hardened
func TestHostGitOthersRepository(t *testing.T) {
	needGit(t)
	if os.Geteuid() != 0 {
		t.Skip("not root: cannot give a repository to another user")
	}
	tr := gitexectest.New(t)
	ws := tr.Repo(t, gitexectest.Plain)
	// Left out by git alone: a listing that has it did not read the repository.
	os.WriteFile(filepath.Join(ws, ".git", "info", "exclude"), []byte("excluded.txt\n"), 0o644)
	os.WriteFile(filepath.Join(ws, "excluded.txt"), []byte("x\n"), 0o644)
	if err := filepath.Walk(filepath.Dir(ws), func(p string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, 65534, 65534)
	}); err != nil {
		t.Fatal(err)
	}
	files, _ := listed(t, ws)
	if want := []string{".gitattributes", ".gitignore", "a.txt", "b.dat", "c.txt", "excluded.txt", "m.md"}; !slices.Equal(files, want) {
		t.Errorf("listed %v, want %v", files, want)
	}
	if got := tr.Sprung(t); len(got) > 0 {
		t.Errorf("the host ran %v", got)
	}
}
