package workspace

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

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

// secretIn reports a file under root whose content is secret.
func secretIn(t *testing.T, root, secret string) string {
	t.Helper()
	found := ""
	filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if b, _ := os.ReadFile(p); string(b) == secret {
				found = p
			}
		}
		return nil
	})
	return found
}

// A program that writes the parent can swap one of its directories for a symlink to a
// directory outside it (RENAME_EXCHANGE, over and over) while the parent is cloned: no
// clone may copy a file from outside the parent.
func TestCloneNeverLeavesParent(t *testing.T) {
	root := t.TempDir()
	parent, outside := filepath.Join(root, "parent"), filepath.Join(root, "outside")
	const secret = "outside the parent"
	var specs []string
	for i := range 16 {
		specs = append(specs, fmt.Sprintf("a/s%d/target=inside", i))
	}
	writeTree(t, parent, spec(specs...))
	for i := range 16 {
		writeTree(t, filepath.Join(outside, fmt.Sprintf("s%d", i)), spec("target="+secret))
	}
	if err := os.Symlink(outside, filepath.Join(parent, "alink")); err != nil {
		t.Fatal(err)
	}
	a, alink := filepath.Join(parent, "a"), filepath.Join(parent, "alink")
	stop := make(chan struct{})
	swapped := make(chan error, 1)
	go func() {
		var err error
		defer func() { swapped <- err }()
		for {
			select {
			case <-stop:
				return
			default:
			}
			if err = exchange(a, alink); err != nil {
				return
			}
		}
	}()
	ok := 0
	for i := range 60 {
		dir := filepath.Join(root, fmt.Sprintf("ws%d", i))
		_, err := Clone(context.Background(), parent, dir, Options{NoSnapshot: true})
		if p := secretIn(t, dir, secret); p != "" {
			close(stop)
			t.Fatalf("clone %d (error %v) copied a file from outside the parent into %s", i, err, p)
		}
		if err == nil {
			ok++
			removeAll(dir)
		}
	}
	close(stop)
	if err := <-swapped; err != nil {
		t.Fatal(err)
	}
	t.Logf("%d of 60 clones succeeded", ok)
}

// A program that writes the parent can swap a FIFO in for a listed file (RENAME_EXCHANGE,
// over and over) while the parent is cloned: every clone returns, with the file or with an
// error, never waiting for a writer that does not come.
func TestCloneNeverBlocksOnFifo(t *testing.T) {
	root := t.TempDir()
	parent := filepath.Join(root, "parent")
	var specs []string
	for i := range 16 {
		specs = append(specs, fmt.Sprintf("d/f%d=content", i))
	}
	writeTree(t, parent, spec(specs...))
	for i := range 16 {
		if err := unix.Mkfifo(filepath.Join(parent, fmt.Sprintf("d/q%d", i)), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	stop := make(chan struct{})
	swapped := make(chan error, 1)
	go func() {
		var err error
		defer func() { swapped <- err }()
		for n := 0; ; n++ {
			select {
			case <-stop:
				return
			default:
			}
			i := n % 16
			if err = exchange(filepath.Join(parent, fmt.Sprintf("d/f%d", i)), filepath.Join(parent, fmt.Sprintf("d/q%d", i))); err != nil {
				return
			}
		}
	}()
	done := make(chan int, 1)
	go func() {
		ok := 0
		for i := range 40 {
			dir := filepath.Join(root, fmt.Sprintf("ws%d", i))
			if _, err := Clone(context.Background(), parent, dir, Options{NoSnapshot: true}); err == nil {
				ok++
				removeAll(dir)
			}
		}
		done <- ok
	}()
	select {
	case ok := <-done:
		t.Logf("%d of 40 clones succeeded", ok)
	case <-time.After(2 * time.Minute): // hang guard: a blocked open never returns
		t.Error("a clone blocked opening a FIFO swapped in for a file")
	}
	close(stop)
	if err := <-swapped; err != nil {
		t.Fatal(err)
	}
}

// sparseFile makes name a file of size bytes that is a hole but for data at off.
func sparseFile(t *testing.T, name string, size, off int64, data string) {
	t.Helper()
	f, err := os.Create(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt([]byte(data), off); err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(size); err != nil {
		t.Fatal(err)
	}
}

// checkSparse fails unless name has size bytes, data at off, and takes little disk.
func checkSparse(t *testing.T, name string, size, off int64, data string) {
	t.Helper()
	f, err := os.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, len(data))
	f.ReadAt(got, off)
	if st.Size != size || string(got) != data {
		t.Errorf("%s: %d bytes, %q at %d; want %d bytes, %q", name, st.Size, got, off, size, data)
	}
	if used := st.Blocks * 512; used > 1<<20 {
		t.Errorf("%s takes %d bytes of disk for %d of data: its holes were written out", name, used, len(data))
	}
}

// A sandbox's truncate costs the host no disk: on ext4, where files are copied by bytes,
// a sparse file of the parent's stays sparse in the clone, and one the child made (64 GiB
// of holes, larger than the test filesystem) comes back to the parent as the same holes.
func TestCloneKeepsHoles(t *testing.T) {
	_, parent, dir := ext4Clone(t, func(parent string) { sparseFile(t, filepath.Join(parent, "disk.img"), 8<<30, 3<<30, "parent's data") })
	checkSparse(t, filepath.Join(dir, CopyDir, "disk.img"), 8<<30, 3<<30, "parent's data")
	sparseFile(t, filepath.Join(dir, CopyDir, "made.img"), 64<<30, 1<<30, "child's data")
	if _, err := Handback(context.Background(), dir); err != nil {
		t.Fatal(err)
	}
	checkSparse(t, filepath.Join(parent, "made.img"), 64<<30, 1<<30, "child's data")
}

// manyNames writes a 4 MiB file of random bytes at dir/f with 100 more names (l1…l100):
// 404 MiB when each name is copied by bytes, more than the 512 MiB test ext4 holds twice.
func manyNames(t *testing.T, dir string) []byte {
	t.Helper()
	data := make([]byte, 4<<20)
	if _, err := rand.Read(data); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "f"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 100; i++ {
		if err := os.Link(filepath.Join(dir, "f"), filepath.Join(dir, fmt.Sprintf("l%d", i))); err != nil {
			t.Fatal(err)
		}
	}
	return data
}

// inodeOf is the inode number of name.
func inodeOf(t *testing.T, name string) uint64 {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Lstat(name, &st); err != nil {
		t.Fatal(err)
	}
	return st.Ino
}

// A parent's file with many names costs a clone its size once per tree, not once per name:
// on ext4, where files are copied by bytes, each tree's names are links to one copy, and
// the base, the copy and the parent stay three files.
func TestCloneLinksNamesOfOneInode(t *testing.T) {
	var data []byte
	_, parent, dir := ext4Clone(t, func(parent string) { data = manyNames(t, parent) })
	inos := map[string]uint64{}
	for _, tree := range []string{parent, filepath.Join(dir, BaseDir), filepath.Join(dir, CopyDir)} {
		inos[tree] = inodeOf(t, filepath.Join(tree, "f"))
		for i := 1; i <= 100; i++ {
			name := filepath.Join(tree, fmt.Sprintf("l%d", i))
			if got := inodeOf(t, name); got != inos[tree] {
				t.Fatalf("%s is inode %d, not f's %d", name, got, inos[tree])
			}
		}
		if b, err := os.ReadFile(filepath.Join(tree, "l100")); err != nil || !bytes.Equal(b, data) {
			t.Fatalf("%s/l100 does not hold the parent's bytes (%v)", tree, err)
		}
	}
	if len(slices.Compact(slices.Sorted(maps.Values(inos)))) != 3 {
		t.Fatalf("the parent, the base and the copy share an inode: %v", inos)
	}
	// The copy's names are one file, as the parent's are, and the base is not it.
	if err := os.WriteFile(filepath.Join(dir, CopyDir, "l7"), []byte("child's"), 0o644); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, BaseDir, "l7")); !bytes.Equal(b, data) {
		t.Fatal("a write to the copy changed the base")
	}
}

// The copy's names of one inode keep the facts the manifest records, though each link
// changed the inode's ctime: a hand-back after a child that changed nothing reads none of
// them.
func TestCloneRecordsLinkedNamesAsMade(t *testing.T) {
	_, _, dir := ext4Clone(t, func(parent string) { manyNames(t, parent) })
	n := compared.Load()
	rep, err := Handback(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Counts.Changed != 0 {
		t.Fatalf("counts %+v: nothing changed", rep.Counts)
	}
	if c := compared.Load() - n; c != 0 {
		t.Fatalf("%d files read by the hand-back of an unchanged copy", c)
	}
}

// ext4Clone makes a parent on the test ext4 filesystem (where files are copied by bytes),
// fills it, and clones it: the filesystem's directory, the parent, the workspace directory.
func ext4Clone(t *testing.T, fill func(parent string)) (root, parent, dir string) {
	t.Helper()
	root = onFS(t, "ext4")
	parent, dir = filepath.Join(root, "parent"), filepath.Join(root, "ws")
	if err := os.Mkdir(parent, 0o755); err != nil {
		t.Fatal(err)
	}
	fill(parent)
	if _, err := Clone(context.Background(), parent, dir, Options{}); err != nil {
		t.Fatal(err)
	}
	return root, parent, dir
}
