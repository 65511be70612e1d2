package orchestrator

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"golang.org/x/sync/errgroup"

	"github.com/paddockhq/paddock/internal/loopfs"
)

// fanoutTree makes a git work tree of n files (committed) under dir.
func fanoutTree(b *testing.B, dir string, n int) {
	for i := 0; i < n; i++ {
		p := filepath.Join(dir, fmt.Sprintf("d%02d", i%100), fmt.Sprintf("f%05d.txt", i))
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(fmt.Sprintf("file %d\n", i)), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	git(b, dir, "init", "-q")
	git(b, dir, "add", "-A")
	git(b, dir, "-c", "user.name=p", "-c", "user.email=p@p", "commit", "-qm", "tree")
}

func git(b *testing.B, dir string, args ...string) {
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("git %v: %v: %s", args, err, out)
	}
}

// BenchmarkFanout: N isolated children over a 10,000-file workspace on XFS, each making one
// small change, all handed back — against the same with `git worktree add` per child, a
// commit in each and `git merge` of each branch back.
func BenchmarkFanout(b *testing.B) {
	mnt := loopfs.ForTest(b, "xfs", 2<<30)
	for _, n := range []int{8, 16} {
		b.Run(fmt.Sprintf("paddock/%d", n), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				ws, _ := os.MkdirTemp(mnt, "ws-")
				fanoutTree(b, ws, 10000)
				state, _ := os.MkdirTemp(mnt, "state-")
				root := openLocal(b, ws, Config{StateDir: state})
				b.StartTimer()
				var g errgroup.Group
				for c := 0; c < n; c++ {
					g.Go(func() error {
						child, err := root.Spawn(context.Background(), ChildConfig{Name: fmt.Sprint(c), Workspace: Isolated})
						if err != nil {
							return err
						}
						if _, err := child.Bash(context.Background(), fmt.Sprintf("echo change >> d%02d/f%05d.txt", c%100, c)); err != nil {
							return err
						}
						if err := child.Close(); err != nil {
							return err
						}
						if h := child.Handback(); h == nil || len(h.Taken) != 1 {
							return fmt.Errorf("child %d: hand-back %+v", c, h)
						}
						return nil
					})
				}
				if err := g.Wait(); err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				root.Close()
				os.RemoveAll(ws)
				os.RemoveAll(state)
				b.StartTimer()
			}
		})
		b.Run(fmt.Sprintf("git-worktree/%d", n), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				ws, _ := os.MkdirTemp(mnt, "ws-")
				fanoutTree(b, ws, 10000)
				wts, _ := os.MkdirTemp(mnt, "wt-")
				b.StartTimer()
				var g errgroup.Group
				for c := 0; c < n; c++ {
					g.Go(func() error {
						wt := filepath.Join(wts, fmt.Sprint(c))
						for _, args := range [][]string{
							{"-C", ws, "worktree", "add", "-q", "-b", fmt.Sprintf("c%d", c), wt},
						} {
							if out, err := exec.Command("git", args...).CombinedOutput(); err != nil {
								return fmt.Errorf("%v: %s", err, out)
							}
						}
						f, err := os.OpenFile(filepath.Join(wt, fmt.Sprintf("d%02d/f%05d.txt", c%100, c)), os.O_APPEND|os.O_WRONLY, 0)
						if err != nil {
							return err
						}
						f.WriteString("change\n")
						f.Close()
						out, err := exec.Command("git", "-C", wt, "-c", "user.name=p", "-c", "user.email=p@p", "commit", "-qam", "change").CombinedOutput()
						if err != nil {
							return fmt.Errorf("%v: %s", err, out)
						}
						return nil
					})
				}
				if err := g.Wait(); err != nil {
					b.Fatal(err)
				}
				for c := 0; c < n; c++ {
					git(b, ws, "-c", "user.name=p", "-c", "user.email=p@p", "merge", "-q", "--no-edit", fmt.Sprintf("c%d", c))
				}
				b.StopTimer()
				os.RemoveAll(ws)
				os.RemoveAll(wts)
				b.StartTimer()
			}
		})
	}
}
