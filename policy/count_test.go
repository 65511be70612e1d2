//go:build linux

package policy

import (
	"io/fs"
	"path/filepath"
	"testing"
)

// countFS counts the calls a judgment makes on the disk.
type countFS struct {
	OSFS
	calls int
}

func (c *countFS) Lstat(n string) (fs.FileInfo, error) { c.calls++; return c.OSFS.Lstat(n) }
func (c *countFS) Readlink(n string) (string, error)   { c.calls++; return c.OSFS.Readlink(n) }
func (c *countFS) ReadDir(n string) ([]fs.DirEntry, error) {
	c.calls++
	return c.OSFS.ReadDir(n)
}
func (c *countFS) LinkFree(n string) error { c.calls++; return c.OSFS.LinkFree(n) }

// A path with no symlink costs one call, whatever its depth; the benchmark's mix stays
// within its budget of calls (the cost of a judgment is its system calls).
func TestDiskCallsPerStep(t *testing.T) {
	t.Parallel()
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if (OSFS{}).LinkFree(dir) != nil {
		requirePeer(t, false, "openat2 with RESOLVE_NO_SYMLINKS is not available (Linux 5.6+)")
	}
	ws, home := benchTreeIn(t, dir)
	c := &countFS{}
	ctx := benchContext(ws, home)
	ctx.FS = c
	ctx.compiled() // the context's entries, resolved once
	for _, tc := range []struct {
		step  Step
		calls int
	}{
		{Step{Argv: []string{"cat", "src/pkg/b.go"}, Cwd: ws}, 1},
		{Step{Argv: []string{"cat", ws + "/src/pkg/b.go"}, Cwd: ws}, 1},
		{Step{Argv: []string{"ls"}, Cwd: ws + "/src/pkg"}, 1},
	} {
		c.calls = 0
		StepEffects(ctx, tc.step)
		if c.calls != tc.calls {
			t.Errorf("%s: %d calls, want %d", tc.step, c.calls, tc.calls)
		}
	}
	c.calls = 0
	mix := benchMix(ws, home)
	for _, s := range mix {
		StepEffects(ctx, s)
	}
	// Four a step, and one more for each step that writes through a new file beside its
	// target (sed -i, curl -o), which is judged as well.
	if budget := 4*len(mix) + 2; c.calls > budget {
		t.Errorf("the mix of %d steps made %d calls to the disk, over its budget of %d", len(mix), c.calls, budget)
	}
}
