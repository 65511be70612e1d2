package fanout

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/paddockhq/paddock/images"
	"github.com/paddockhq/paddock/internal/loopfs"
	"github.com/paddockhq/paddock/internal/peer"
	"github.com/paddockhq/paddock/orchestrator"
	"github.com/paddockhq/paddock/transport/local"
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

// fanoutWorkspace makes a fresh 10,000-file git work tree on mnt: on btrfs a subvolume, so
// that isolated children are snapshots.
func fanoutWorkspace(b *testing.B, fs, mnt string) string {
	ws, err := os.MkdirTemp(mnt, "ws-")
	if err != nil {
		b.Fatal(err)
	}
	if fs == "btrfs" {
		os.Remove(ws)
		btrfs := peer.Program(b, "btrfs", "btrfs-progs")
		if out, err := exec.Command(btrfs, "subvolume", "create", ws).CombinedOutput(); err != nil {
			b.Fatalf("%v: %s", err, out)
		}
	}
	fanoutTree(b, ws, 10000)
	exec.Command("sync").Run()
	return ws
}

// removeWorkspace removes a workspace fanoutWorkspace made (a subvolume too).
func removeWorkspace(fs, ws string) {
	os.RemoveAll(ws)
	if fs == "btrfs" {
		exec.Command("btrfs", "subvolume", "delete", ws).Run()
	}
}

// BenchmarkFanout: `paddock fanout` (Run over Embedded children on the local transport) of
// N children over a 10,000-file git workspace, each making one small change, all handed
// back — against the same with `git worktree add` per child, a commit in each and
// `git merge` of each branch back, in the same iteration, in turns. On a loop XFS (reflink
// clones) and a loop btrfs (the workspace a subvolume: snapshots). Metrics: paddock-s and
// git-s per iteration and x-git their ratio; clone-ms, a child's mean clone.
func BenchmarkFanout(b *testing.B) {
	kernel, err := images.Default.Find(context.Background(), runtime.GOARCH)
	if err != nil {
		b.Fatal(err)
	}
	for _, fs := range []string{"xfs", "btrfs"} {
		mnt := loopfs.ForTest(b, fs, 4<<30)
		for _, n := range []int{8, 16} {
			b.Run(fmt.Sprintf("fs=%s/children=%d", fs, n), func(b *testing.B) {
				var paddock, peer, clone time.Duration
				for i := 0; i < b.N; i++ {
					runs := []func(){
						func() {
							d, c := fanoutPaddock(b, kernel, fs, mnt, n)
							paddock, clone = paddock+d, clone+c
						},
						func() { peer += fanoutGit(b, fs, mnt, n) },
					}
					for j := range runs {
						runs[(i+j)%len(runs)]()
					}
				}
				b.ReportMetric(paddock.Seconds()/float64(b.N), "paddock-s")
				b.ReportMetric(peer.Seconds()/float64(b.N), "git-s")
				b.ReportMetric(float64(paddock)/float64(peer), "x-git")
				b.ReportMetric(float64(clone.Milliseconds())/float64(b.N*n), "clone-ms")
			})
		}
	}
}

// fanoutPaddock runs the fan-out of n children at once, each changing one file; it returns
// how long it took, up to every child's hand-back, and the children's clones summed.
func fanoutPaddock(b *testing.B, kernel, fs, mnt string, n int) (total, clone time.Duration) {
	ws := fanoutWorkspace(b, fs, mnt)
	defer removeWorkspace(fs, ws)
	state, _ := os.MkdirTemp(mnt, "state-")
	defer os.RemoveAll(state)
	root, err := orchestrator.Open(context.Background(), orchestrator.Config{
		Workspace: ws, StateDir: state, Transport: &local.Transport{Stderr: os.Stderr}, Kernel: kernel,
		Env: []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + ws, "LC_ALL=C"},
	})
	if err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	var ended time.Duration
	rep := Run(context.Background(), Embedded(root, nil), Options{N: n, Script: `echo change >> "d$(printf %02d $((PADDOCK_CHILD_INDEX % 100)))/f$(printf %05d $PADDOCK_CHILD_INDEX).txt"`,
		Ended: func(e, n int, c Child) {
			if e == n {
				ended = time.Since(start)
			}
		}})
	for _, c := range rep.Children {
		if c.End != orchestrator.Finished || c.Status != 0 || len(c.Taken) != 1 || c.Clone == nil {
			b.Fatalf("%s: %s %d %s, taken %v", c.Name, c.End, c.Status, c.Error, c.Taken)
		}
		if fs == "btrfs" && !c.Clone.Snapshot {
			b.Fatalf("%s: no snapshot on btrfs: %+v", c.Name, c.Clone)
		}
		clone += c.Clone.Elapsed
	}
	return ended, clone
}

// fanoutGit is the peer: `git worktree add` per child, its change committed there, and each
// branch merged back with `git merge`.
func fanoutGit(b *testing.B, fs, mnt string, n int) time.Duration {
	ws := fanoutWorkspace(b, fs, mnt)
	defer removeWorkspace(fs, ws)
	wts, _ := os.MkdirTemp(mnt, "wt-")
	defer os.RemoveAll(wts)
	start := time.Now()
	var g errgroup.Group
	for c := 0; c < n; c++ {
		g.Go(func() error {
			wt := filepath.Join(wts, fmt.Sprint(c))
			// Worktrees added at once sometimes trip over each other in git itself ("failed
			// to read .git/worktrees/N/commondir"): such an add is tried again, as a user
			// would.
			for try := 0; ; try++ {
				out, err := exec.Command("git", "-C", ws, "worktree", "add", "-q", "-B", fmt.Sprintf("c%d", c), wt).CombinedOutput()
				if err == nil {
					break
				}
				if try == 3 {
					return fmt.Errorf("%v: %s", err, out)
				}
				os.RemoveAll(wt)
				exec.Command("git", "-C", ws, "worktree", "prune").Run()
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
	return time.Since(start)
}
