package main

import (
	"path/filepath"
	"testing"

	"github.com/paddockhq/paddock/internal/gitexec/gitexectest"
)

// paddock workspace list, clone and handback, and paddock fanout (its children cloned from
// the workspace and handed back, on the local transport), on a workspace whose repository
// names a program for every way git has of running one, with a caller whose GIT_*
// variables name them too: the host runs none of them.
// law: host_git_hardened
func TestHostGitHardened(t *testing.T) {
	tr := gitexectest.New(t)
	tr.SetEnv(t)
	for _, l := range gitexectest.Layouts {
		ws := tr.Repo(t, l)
		dir := filepath.Join(t.TempDir(), "child")
		for _, args := range [][]string{
			{"workspace", "list", ws},
			{"workspace", "clone", ws, dir},
			{"workspace", "handback", dir},
			{"fanout", "-n", "2", "--transport", "local", "--workspace", ws, "--state-dir", t.TempDir(), "--", "echo $PADDOCK_CHILD_INDEX > child-$PADDOCK_CHILD_INDEX.txt"},
		} {
			if so, se, code := paddock(t, "", args...); code != exitOK {
				t.Fatalf("%s: %v: exit %d\n%s\n%s", l, args, code, so, se)
			}
			if got := tr.Sprung(t); len(got) > 0 {
				t.Errorf("%s: paddock %v: the host ran %v", l, args, got)
			}
			tr.Clear(t)
		}
	}
}
