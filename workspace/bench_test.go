package workspace

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/paddockhq/paddock/internal/peer"
)

// benchTrees are the source-like trees the benchmarks share, by file count, on the XFS
// test filesystem, each a git repository with one commit.
var benchTrees = struct {
	sync.Mutex
	m map[string]string
}{m: map[string]string{}}

// benchTree makes (once per test binary) a tree of n files of 200 B to 8 KiB, 100 to a
// directory, two levels deep, committed to git, on the XFS test filesystem.
func benchTree(b *testing.B, n int) string { return benchTreeOn(b, "xfs", n) }

// benchTreeOn is benchTree on the named test filesystem; on btrfs the tree is a subvolume.
func benchTreeOn(b *testing.B, fs string, n int) string {
	benchTrees.Lock()
	defer benchTrees.Unlock()
	key := fmt.Sprintf("%s/%d", fs, n)
	if root, ok := benchTrees.m[key]; ok {
		return root
	}
	mnt, why := mounts.xfs, mounts.xfsWhy
	if fs == "btrfs" {
		mnt, why = mounts.btrfs, mounts.btrfsWhy
	}
	if mnt == "" {
		requireIntegration(b, fs+" test filesystem: "+why)
	}
	root := filepath.Join(mnt, fmt.Sprintf("bench-%d", n))
	if fs == "btrfs" {
		// Not subvolume(b, root): the tree outlives this benchmark's run (the filesystem
		// goes at the end).
		if out, err := exec.Command(peer.Program(b, "btrfs", "btrfs-progs"), "subvolume", "create", root).CombinedOutput(); err != nil {
			b.Fatalf("btrfs subvolume create: %v: %s", err, out)
		}
	}
	rng := rand.New(rand.NewPCG(uint64(n), 7))
	buf := make([]byte, 8<<10)
	for i := range buf {
		buf[i] = byte('a' + rng.IntN(26))
	}
	for i := range n {
		dir := filepath.Join(root, fmt.Sprintf("d%02d", i/10000), fmt.Sprintf("e%03d", i/100%100))
		if i%100 == 0 {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				b.Fatal(err)
			}
		}
		size := 200 + rng.IntN(len(buf)-200)
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("f%03d.go", i%100)), buf[:size], 0o644); err != nil {
			b.Fatal(err)
		}
	}
	for _, args := range [][]string{{"init", "-q"}, {"add", "-A"}, {"commit", "-q", "-m", "tree"}} {
		git(b, root, args...)
	}
	unix.Sync()
	benchTrees.m[key] = root
	return root
}

// timed runs f and returns how long it took.
func timed(b *testing.B, f func() error) time.Duration {
	b.Helper()
	start := time.Now()
	if err := f(); err != nil {
		b.Fatal(err)
	}
	return time.Since(start)
}

// cpuTime is the processor time (user and system) of this process and of its children
// waited for: what load on the machine does not share out, as it does wall time.
func cpuTime() time.Duration {
	var d time.Duration
	for _, who := range []int{unix.RUSAGE_SELF, unix.RUSAGE_CHILDREN} {
		var ru unix.Rusage
		unix.Getrusage(who, &ru)
		d += time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	return d
}

// timedCPU is timed, adding the processor time f took (its own and its children's) to cpu.
func timedCPU(b *testing.B, cpu *time.Duration, f func() error) time.Duration {
	b.Helper()
	c := cpuTime()
	d := timed(b, f)
	*cpu += cpuTime() - c
	return d
}

func sh(name string, args ...string) func() error {
	return func() error {
		out, err := exec.Command(name, args...).CombinedOutput()
		if err != nil {
			return fmt.Errorf("%s %v: %v: %s", name, args, err, out)
		}
		return nil
	}
}

// Making an isolated workspace (base and copy, with its manifest) against the peers a user
// would otherwise use, in the same run: `cp -a --reflink=always` of the tree once, and
// `git worktree add`.
func BenchmarkClone(b *testing.B) {
	for _, n := range []int{10_000, 100_000} {
		b.Run(fmt.Sprintf("files=%d", n), func(b *testing.B) {
			needGit(b)
			src := benchTree(b, n)
			out := filepath.Join(mounts.xfs, "bench-out")
			var paddock, cp, worktree, paddockCPU, cpCPU time.Duration
			var rep *CloneReport
			b.ResetTimer()
			for i := range b.N {
				b.StopTimer()
				removeAll(out)
				os.MkdirAll(out, 0o755)
				unix.Sync()
				ws, cpDst, wt := filepath.Join(out, "ws"), filepath.Join(out, "cp"), filepath.Join(out, "wt")
				// Alternate the order so neither side always runs on a warmer cache.
				runs := []func(){
					func() {
						paddock += timedCPU(b, &paddockCPU, func() (err error) { rep, err = Clone(context.Background(), src, ws, Options{}); return err })
					},
					func() { cp += timedCPU(b, &cpCPU, sh("cp", "-a", "--reflink=always", src, cpDst)) },
					func() {
						worktree += timed(b, sh("git", "-C", src, "worktree", "add", "-q", "--detach", wt))
					},
				}
				for j := range runs {
					runs[(i+j)%len(runs)]()
				}
				sh("git", "-C", src, "worktree", "remove", "--force", wt)()
			}
			b.StopTimer()
			if rep.Cloned != n || rep.Copied != 0 {
				b.Fatalf("clone report %+v: want all %d files cloned", rep, n)
			}
			b.ReportMetric(float64(paddock.Milliseconds())/float64(b.N), "paddock-ms")
			b.ReportMetric(float64(cp.Milliseconds())/float64(b.N), "cp-reflink-ms")
			b.ReportMetric(float64(worktree.Milliseconds())/float64(b.N), "worktree-ms")
			b.ReportMetric(float64(paddock)/float64(cp), "x-cp-reflink")
			b.ReportMetric(float64(paddock)/float64(worktree), "x-worktree")
			// Processor time, user and system, against cp's: under load the wall-time ratio
			// leans on how many threads each side runs (Paddock clones on several).
			b.ReportMetric(float64(paddockCPU.Milliseconds())/float64(b.N), "paddock-cpu-ms")
			b.ReportMetric(float64(cpCPU.Milliseconds())/float64(b.N), "cp-cpu-ms")
			b.ReportMetric(float64(paddockCPU)/float64(cpCPU), "x-cp-reflink-cpu")
			removeAll(out)
		})
	}
}

// statWalk is the peer of the hand-back: a walk that reads every directory and lstats
// every entry of a tree, and nothing more.
func statWalk(root string) (int, error) {
	n := 0
	var walk func(dir string) error
	walk = func(dir string) error {
		d, err := os.Open(dir)
		if err != nil {
			return err
		}
		defer d.Close()
		des, err := d.ReadDir(-1)
		if err != nil {
			return err
		}
		fd := int(d.Fd())
		for _, de := range des {
			var st unix.Stat_t
			if err := unix.Fstatat(fd, de.Name(), &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
				return err
			}
			n++
			if st.Mode&unix.S_IFMT == unix.S_IFDIR && de.Name() != ".git" {
				if err := walk(filepath.Join(dir, de.Name())); err != nil {
					return err
				}
			}
		}
		return nil
	}
	return n, walk(root)
}

// A hand-back where 1% of the files changed (in the copy; and 0.1% in the parent, half of
// them conflicts) against a stat-only walk of the tree, in the same run. The merge (up to
// handback.json) and the removal of base and copy are timed apart.
func BenchmarkHandback(b *testing.B) {
	for _, n := range []int{10_000, 100_000} {
		b.Run(fmt.Sprintf("files=%d", n), func(b *testing.B) {
			needGit(b)
			src := benchTree(b, n)
			work := filepath.Join(mounts.xfs, "bench-hb")
			var merged, discard, walk time.Duration
			var rep *Report
			b.ResetTimer()
			for i := range b.N {
				b.StopTimer()
				removeAll(work)
				os.MkdirAll(work, 0o755)
				parent, dir := filepath.Join(work, "parent"), filepath.Join(work, "ws")
				if err := sh("cp", "-a", "--reflink=always", src, parent)(); err != nil {
					b.Fatal(err)
				}
				if _, err := Clone(context.Background(), parent, dir, Options{}); err != nil {
					b.Fatal(err)
				}
				for j := 0; j < n; j += 100 { // 1% in the copy
					name := filepath.Join(dir, CopyDir, fmt.Sprintf("d%02d", j/10000), fmt.Sprintf("e%03d", j/100%100), fmt.Sprintf("f%03d.go", j%100))
					os.WriteFile(name, []byte("changed by the child"), 0o644)
				}
				for j := 0; j < n; j += 1000 { // 0.1% in the parent, every other one a conflict
					k := j + 100*((j/1000)%2)
					name := filepath.Join(parent, fmt.Sprintf("d%02d", k/10000), fmt.Sprintf("e%03d", k/100%100), fmt.Sprintf("f%03d.go", k%100))
					os.WriteFile(name, []byte("changed by the parent"), 0o644)
				}
				unix.Sync()
				runs := []func(){
					func() {
						merged += timed(b, func() (err error) { rep, err = Merge(context.Background(), dir); return err })
					},
					func() { walk += timed(b, func() error { _, err := statWalk(parent); return err }) },
				}
				for j := range runs {
					runs[(i+j)%len(runs)]()
				}
				discard += timed(b, func() error { return Discard(dir) })
			}
			b.StopTimer()
			if rep.Counts.Changed != n/100 || rep.Counts.Conflicts == 0 {
				b.Fatalf("report counts %+v: want %d changed, some conflicts", rep.Counts, n/100)
			}
			b.ReportMetric(float64(merged.Milliseconds())/float64(b.N), "handback-ms")
			b.ReportMetric(float64(walk.Milliseconds())/float64(b.N), "statwalk-ms")
			b.ReportMetric(float64(discard.Milliseconds())/float64(b.N), "discard-ms")
			b.ReportMetric(float64(merged)/float64(walk), "x-statwalk")
			removeAll(work)
		})
	}
}

// Making an isolated workspace of a btrfs subvolume (two snapshots) against the peer a
// user would otherwise use on btrfs, `cp -a --reflink=always` of the tree, in the same
// run. The goal: under 50 ms for 100,000 files.
func BenchmarkCloneSnapshot(b *testing.B) {
	for _, n := range []int{10_000, 100_000} {
		b.Run(fmt.Sprintf("files=%d", n), func(b *testing.B) {
			needGit(b)
			src := benchTreeOn(b, "btrfs", n)
			out := filepath.Join(mounts.btrfs, "bench-out")
			var paddock, cp time.Duration
			b.ResetTimer()
			for i := range b.N {
				b.StopTimer()
				removeAll(out)
				os.MkdirAll(out, 0o755)
				unix.Sync()
				ws, cpDst := filepath.Join(out, "ws"), filepath.Join(out, "cp")
				runs := []func(){
					func() {
						paddock += timed(b, func() error {
							rep, err := Clone(context.Background(), src, ws, Options{})
							if err == nil && !rep.Snapshot {
								err = fmt.Errorf("no snapshot: %+v", rep)
							}
							return err
						})
					},
					func() { cp += timed(b, sh("cp", "-a", "--reflink=always", src, cpDst)) },
				}
				for j := range runs {
					// Each starts on a clean filesystem: a snapshot commits what is dirty.
					unix.Sync()
					runs[(i+j)%len(runs)]()
				}
				b.StopTimer()
				if err := Discard(ws); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			b.ReportMetric(float64(paddock.Microseconds())/1000/float64(b.N), "paddock-ms")
			b.ReportMetric(float64(cp.Milliseconds())/float64(b.N), "cp-reflink-ms")
			b.ReportMetric(float64(paddock)/float64(cp), "x-cp-reflink")
			removeAll(out)
		})
	}
}
