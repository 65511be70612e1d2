package workspace

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// cloneTree is a parent with every kind of entry a clone keeps.
func cloneTree(t testing.TB, root string) {
	t.Helper()
	writeTree(t, root, spec("src/a.go=package a", "src/run.sh*=#!/bin/sh", "empty/", "deep/er/est/f=x",
		"link->src/a.go", "dangling->nowhere", "src/dirlink->.."))
	big := make([]byte, 8<<20)
	rand.Read(big)
	if err := os.WriteFile(filepath.Join(root, "big.bin"), big, 0o600); err != nil {
		t.Fatal(err)
	}
	os.Chmod(filepath.Join(root, "deep/er"), 0o750)
	old := time.Date(2001, 2, 3, 4, 5, 6, 789, time.UTC)
	for _, p := range []string{"src/a.go", "big.bin", "deep/er/est", "deep"} {
		os.Chtimes(filepath.Join(root, p), old, old)
	}
	lt := []unix.Timespec{unix.NsecToTimespec(old.UnixNano()), unix.NsecToTimespec(old.UnixNano())}
	unix.UtimesNanoAt(unix.AT_FDCWD, filepath.Join(root, "link"), lt, unix.AT_SYMLINK_NOFOLLOW)
}

// sameMeta reports how the entries of got differ from want's in mode and modification
// time (a clone equals `cp -a` in what it keeps).
func sameMeta(t testing.TB, want, got string) string {
	t.Helper()
	var b strings.Builder
	filepath.WalkDir(want, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(want, p)
		var ws, gs unix.Stat_t
		if err := unix.Lstat(p, &ws); err != nil {
			return err
		}
		if err := unix.Lstat(filepath.Join(got, rel), &gs); err != nil {
			fmt.Fprintf(&b, "  %s: %v\n", rel, err)
			return nil
		}
		if ws.Mode != gs.Mode {
			fmt.Fprintf(&b, "  %s: mode %o, want %o\n", rel, gs.Mode, ws.Mode)
		}
		if ws.Mtim != gs.Mtim {
			fmt.Fprintf(&b, "  %s: mtime %v, want %v\n", rel, time.Unix(gs.Mtim.Unix()), time.Unix(ws.Mtim.Unix()))
		}
		return nil
	})
	return b.String()
}

func checkClone(t *testing.T, parent, dir string) {
	t.Helper()
	want := readTree(t, parent)
	for _, d := range []string{BaseDir, CopyDir} {
		root := filepath.Join(dir, d)
		if diff := diffTrees(want, readTree(t, root)); diff != "" {
			t.Errorf("%s differs from the parent:\n%s", d, diff)
		}
		if diff := sameMeta(t, parent, root); diff != "" {
			t.Errorf("%s keeps other modes or times than the parent:\n%s", d, diff)
		}
	}
}

// fiemapExtent is struct fiemap_extent (linux/fiemap.h).
type fiemapExtent struct {
	Logical, Physical, Length uint64
	_                         [2]uint64
	Flags                     uint32
	_                         [3]uint32
}

// fiemap is struct fiemap with room for extents.
type fiemap struct {
	Start, Length                  uint64
	Flags, Mapped, Count, Reserved uint32
	Extents                        [32]fiemapExtent
}

const (
	fsIocFiemap        = 0xC020660B // _IOWR('f', 11, struct fiemap)
	fiemapFlagSync     = 0x1
	fiemapExtentShared = 0x2000
)

// extents returns the physical extents of a file and whether each is shared.
func extents(t testing.TB, name string) []fiemapExtent {
	t.Helper()
	f, err := os.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fm := fiemap{Length: ^uint64(0), Flags: fiemapFlagSync, Count: 32}
	if _, _, errno := unix.Syscall(unix.SYS_IOCTL, f.Fd(), fsIocFiemap, uintptr(unsafe.Pointer(&fm))); errno != 0 {
		t.Fatalf("FIEMAP %s: %v", name, errno)
	}
	return fm.Extents[:fm.Mapped]
}

// On XFS with reflinks the clone shares the parent's extents: FIEMAP shows the same
// physical blocks, flagged shared, and the clone takes almost no space.
func TestCloneReflinksOnXFS(t *testing.T) {
	root := onFS(t, "xfs")
	parent, dir := filepath.Join(root, "parent"), filepath.Join(root, "ws")
	cloneTree(t, parent)
	var before unix.Statfs_t
	unix.Statfs(root, &before)
	rep, err := Clone(context.Background(), parent, dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	var after unix.Statfs_t
	unix.Statfs(root, &after)
	if rep.Files != 4 || rep.Cloned != rep.Files || rep.Copied != 0 || len(rep.Warnings) > 0 {
		t.Errorf("report %+v: want every file cloned, no warning", rep)
	}
	if rep.Symlinks != 3 || rep.Dirs != 5 {
		t.Errorf("report %+v: want 3 symlinks and 5 directories", rep)
	}
	checkClone(t, parent, dir)
	src := extents(t, filepath.Join(parent, "big.bin"))
	if len(src) == 0 {
		t.Fatal("no extents for the parent's file")
	}
	for _, d := range []string{BaseDir, CopyDir} {
		got := extents(t, filepath.Join(dir, d, "big.bin"))
		if len(got) != len(src) {
			t.Fatalf("%s: %d extents, parent %d", d, len(got), len(src))
		}
		for i := range got {
			if got[i].Physical != src[i].Physical || got[i].Flags&fiemapExtentShared == 0 {
				t.Errorf("%s extent %d: physical %d flags %#x, parent's at %d: not shared", d, i, got[i].Physical, got[i].Flags, src[i].Physical)
			}
		}
	}
	used := int64(before.Bfree-after.Bfree) * before.Bsize
	if used > 2<<20 {
		t.Errorf("two clones of 8 MiB took %d bytes of free space", used)
	}
	// The hand-back of a changed clone takes the child's file, again by extents.
	os.WriteFile(filepath.Join(dir, CopyDir, "src/a.go"), []byte("package b"), 0o644)
	if _, err := Handback(context.Background(), dir); err != nil {
		t.Fatal(err)
	}
	if data, _ := os.ReadFile(filepath.Join(parent, "src/a.go")); string(data) != "package b" {
		t.Errorf("parent's a.go = %q after the hand-back", data)
	}
}

// On ext4, which cannot clone extents, every file is copied by bytes and the report warns
// with the counts; the trees are still exact.
func TestCloneWarnsOnExt4(t *testing.T) {
	root := onFS(t, "ext4")
	parent, dir := filepath.Join(root, "parent"), filepath.Join(root, "ws")
	cloneTree(t, parent)
	rep, err := Clone(context.Background(), parent, dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Cloned != 0 || rep.Copied != 4 || rep.CopiedB != rep.Bytes || rep.Bytes < 8<<20 {
		t.Errorf("report %+v: want 4 files copied, all bytes", rep)
	}
	want := fmt.Sprintf("%d of %d files (%d bytes)", rep.Copied, rep.Files, rep.CopiedB)
	if len(rep.Warnings) != 1 || !strings.Contains(rep.Warnings[0], want) {
		t.Errorf("warnings %q, want one saying %q", rep.Warnings, want)
	}
	checkClone(t, parent, dir)
}

// A clone is exact wherever it runs (here, the test's temporary directory).
func TestCloneKeepsEverything(t *testing.T) {
	parent, dir := filepath.Join(t.TempDir(), "parent"), filepath.Join(t.TempDir(), "ws")
	cloneTree(t, parent)
	rep, err := Clone(context.Background(), parent, dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Cloned+rep.Copied != rep.Files || (rep.Copied > 0) != (len(rep.Warnings) > 0) {
		t.Errorf("report %+v: a copy without a warning, or counts that do not add up", rep)
	}
	checkClone(t, parent, dir)
	for _, name := range []string{"", BaseDir, CopyDir, ManifestName} {
		fi, err := os.Stat(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if name == "" && fi.Mode().Perm() != 0o700 || name == ManifestName && fi.Mode().Perm() != 0o600 {
			t.Errorf("%s is %v", filepath.Join(dir, name), fi.Mode())
		}
	}
}

// A workspace directory inside the parent is left out of the listing; a directory already
// in use is refused, and a refused clone leaves nothing.
func TestCloneDirs(t *testing.T) {
	parent := t.TempDir()
	writeTree(t, parent, spec("a=1", ".paddock/"))
	dir := filepath.Join(parent, ".paddock", "ws")
	if _, err := Clone(context.Background(), parent, dir, Options{}); err != nil {
		t.Fatal(err)
	}
	// .paddock holds nothing but the workspace: left out, as a directory of ignored files is.
	if got := readTree(t, filepath.Join(dir, CopyDir)); diffTrees(spec("a=1"), got) != "" {
		t.Errorf("copy = %v", got)
	}
	if _, err := Clone(context.Background(), parent, dir, Options{}); !errors.Is(err, &Error{Code: CodeExists}) {
		t.Errorf("a second clone into %s: %v, want %s", dir, err, CodeExists)
	}
	if _, err := Clone(context.Background(), parent, parent, Options{}); !errors.Is(err, &Error{Code: CodeInside}) {
		t.Errorf("a clone into the parent: %v, want %s", err, CodeInside)
	}
	if _, err := Handback(context.Background(), t.TempDir()); !errors.Is(err, &Error{Code: CodeNoManifest}) {
		t.Errorf("a hand-back of an empty directory: %v, want %s", err, CodeNoManifest)
	}
}
