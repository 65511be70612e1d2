package policy

import (
	"fmt"
	"io/fs"
	"os"
	"testing"
)

// countFS counts the calls each step costs on the disk.
type countFS struct {
	OSFS
	calls map[string]int
}

func (c *countFS) Lstat(n string) (fs.FileInfo, error) { c.calls["lstat"]++; return c.OSFS.Lstat(n) }
func (c *countFS) Readlink(n string) (string, error) {
	c.calls["readlink"]++
	return c.OSFS.Readlink(n)
}
func (c *countFS) ReadDir(n string) ([]fs.DirEntry, error) {
	c.calls["readdir"]++
	return c.OSFS.ReadDir(n)
}
func (c *countFS) LinkFree(n string) error { c.calls["openat2"]++; return c.OSFS.LinkFree(n) }

func BenchmarkCount(b *testing.B) {
	ws, home := benchTree(b)
	mix := benchMix(ws, home)
	c := &countFS{calls: map[string]int{}}
	ctx := benchContext(ws, home)
	ctx.FS = c
	StepEffects(ctx, mix[0])
	for _, s := range mix {
		for k := range c.calls {
			delete(c.calls, k)
		}
		StepEffects(ctx, s)
		fmt.Fprintf(os.Stderr, "%-40s %v\n", s.String()[:min(40, len(s.String()))], c.calls)
	}
}
