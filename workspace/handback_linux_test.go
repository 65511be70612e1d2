package workspace

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// outsideState is every entry under root: a file's content, a directory, a symlink's target.
func outsideState(t *testing.T, root string) map[string]string {
	t.Helper()
	st := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		switch {
		case d.Type().IsRegular():
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			st[p] = "file " + string(b)
		case d.Type()&os.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			st[p] = "symlink " + target
		default:
			st[p] = d.Type().String()
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// A program that writes the parent can swap one of its directories for a symlink to one
// outside (RENAME_EXCHANGE, over and over) while a child is handed back: the hand-back
// creates, replaces and removes nothing outside the parent, whatever it reports.
func TestHandbackNeverWritesOutside(t *testing.T) {
	root := t.TempDir()
	parent, outside := filepath.Join(root, "parent"), filepath.Join(root, "outside")
	writeTree(t, parent, spec("a/f=parent f", "a/g=parent g", "a/h=parent h"))
	writeTree(t, outside, spec("f=outside f", "g=outside g", "h=outside h"))
	want := outsideState(t, outside)
	a, alink := filepath.Join(parent, "a"), filepath.Join(parent, "alink")
	if err := os.Symlink(outside, alink); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	ok := 0
	for i := range 60 {
		dir := filepath.Join(root, fmt.Sprintf("ws%d", i))
		if _, err := Clone(ctx, parent, dir, Options{NoSnapshot: true}); err != nil {
			t.Fatal(err)
		}
		cp := filepath.Join(dir, CopyDir)
		for name, data := range map[string]string{"a/f": fmt.Sprintf("child f %d", i), fmt.Sprintf("a/n%d", i): "child new"} {
			if err := os.WriteFile(filepath.Join(cp, name), []byte(data), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.Remove(filepath.Join(cp, "a/g")); err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		p, err := Prepare(ctx, dir)
		if err != nil {
			t.Fatal(err)
		}
		stop := make(chan struct{})
		swapped := make(chan error, 1)
		go func() {
			var err error
			n := 0
			defer func() { swapped <- err }()
			for {
				select {
				case <-stop:
					if n%2 == 1 {
						err = exchange(a, alink) // a is the directory again
					}
					return
				default:
				}
				if err = exchange(a, alink); err != nil {
					return
				}
				n++
			}
		}()
		_, err = p.Merge(ctx)
		close(stop)
		if serr := <-swapped; serr != nil {
			t.Fatal(serr)
		}
		if got := outsideState(t, outside); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("hand-back %d (error %v) changed the directory outside the parent:\n got %v\nwant %v", i, err, got, want)
		}
		if err == nil {
			ok++
		}
		// The parent's a/g is back for the next child to remove.
		if err := os.WriteFile(filepath.Join(a, "g"), []byte("parent g"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("%d of 60 hand-backs succeeded", ok)
}

// diskUsed is the bytes in use on the filesystem that holds name.
func diskUsed(t *testing.T, name string) int64 {
	t.Helper()
	var fs unix.Statfs_t
	if err := unix.Statfs(name, &fs); err != nil {
		t.Fatal(err)
	}
	return int64(fs.Blocks-fs.Bfree) * fs.Bsize
}

// A child's file with many names costs the hand-back its size once, not once per name: on
// ext4, where files are copied by bytes, the parent's new names are links to one copy of
// the child's file, and nothing the child made is lost.
// law: cow_takes_child
func TestHandbackLinksNamesOfOneInode(t *testing.T) {
	root, parent, dir := ext4Clone(t, func(parent string) { writeTree(t, parent, spec("keep=parent's")) })
	data := manyNames(t, filepath.Join(dir, CopyDir))
	before := diskUsed(t, root)
	rep, err := Merge(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("the hand-back of 101 names of a 4 MiB file used %d bytes of disk", diskUsed(t, root)-before)
	if rep.Counts.Taken != 101 || rep.Counts.Conflicts != 0 {
		t.Fatalf("counts %+v, want 101 taken", rep.Counts)
	}
	ino := inodeOf(t, filepath.Join(parent, "f"))
	if ino == inodeOf(t, filepath.Join(dir, CopyDir, "f")) {
		t.Fatal("the parent's f is the copy's")
	}
	for i := 1; i <= 100; i++ {
		name := filepath.Join(parent, fmt.Sprintf("l%d", i))
		if got := inodeOf(t, name); got != ino {
			t.Fatalf("%s is inode %d, not f's %d", name, got, ino)
		}
	}
	if b, err := os.ReadFile(filepath.Join(parent, "l100")); err != nil || !bytes.Equal(b, data) {
		t.Fatalf("the parent's l100 does not hold the child's bytes (%v)", err)
	}
}

// Two sparse files of 15 TiB compared by content cost what their data does: a child that
// only touched a file of the parent's (its facts changed, its size did not) hands back
// nothing, without reading the holes.
// law: cow_keeps_parent
func TestHandbackComparesSparseByTheirData(t *testing.T) {
	_, parent, dir := ext4Clone(t, func(parent string) { sparseFile(t, filepath.Join(parent, "disk.img"), 15<<40, 7<<40, "parent's data") })
	touched := time.Unix(1_000_000_000, 0)
	if err := os.Chtimes(filepath.Join(dir, CopyDir, "disk.img"), touched, touched); err != nil {
		t.Fatal(err)
	}
	n := compared.Load()
	rep, err := Handback(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Counts.Changed != 0 {
		t.Fatalf("counts %+v: a touched file counted as changed", rep.Counts)
	}
	if compared.Load() == n {
		t.Fatal("the touched file was not compared by content")
	}
	checkSparse(t, filepath.Join(parent, "disk.img"), 15<<40, 7<<40, "parent's data")
}

// A file's comparison opens no symlink: a name of the sandbox's tree that is a symlink to
// a file with the other side's content is not that content.
func TestEqualEntriesFollowsNoSymlink(t *testing.T) {
	a, b := t.TempDir(), t.TempDir()
	writeTree(t, a, spec("d/f=same", "real=same", "e/g=same"))
	writeTree(t, b, spec("d/f=same", "d/g=same"))
	if err := os.Remove(filepath.Join(a, "d", "f")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(a, "real"), filepath.Join(a, "d", "f")); err != nil {
		t.Fatal(err)
	}
	if eq, err := equalEntries(context.Background(), a, b, "d/f", File); eq {
		t.Fatalf("a symlink compared equal to the file it names (%v)", err)
	}
	if err := os.RemoveAll(filepath.Join(a, "d")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("e", filepath.Join(a, "d")); err != nil {
		t.Fatal(err)
	}
	if eq, err := equalEntries(context.Background(), a, b, "d/g", File); eq {
		t.Fatalf("a file read through a symlinked directory (%v)", err)
	}
}

// A program writing the parent that replaces each name the hand-back puts, so that no
// later name can be linked to it, does not make the hand-back copy the child's file once
// per name: past the bytes the first copies wrote, it stops with a refusal, and the
// child's files stay in the workspace.
// law: cow_conflict_reported
func TestHandbackRefusesRelinkingPastTheFirstCopies(t *testing.T) {
	_, parent, dir := ext4Clone(t, func(parent string) { writeTree(t, parent, spec("keep=parent's")) })
	data := manyNames(t, filepath.Join(dir, CopyDir))
	hook = func(what string) {
		name, ok := strings.CutPrefix(what, "rename ")
		if !ok || filepath.Dir(name) != parent {
			return
		}
		// The parent's own program puts a file of its own at the name.
		tmp := name + ".parent's"
		if err := os.WriteFile(tmp, []byte("parent's"), 0o644); err == nil {
			os.Rename(tmp, name)
		}
	}
	defer func() { hook = nil }()
	_, err := Merge(context.Background(), dir)
	if !errors.Is(err, &Error{Reason: CodeRelinks}) {
		t.Fatalf("Merge: %v; want a %s refusal", err, CodeRelinks)
	}
	for _, name := range []string{"f", "l1", "l100"} {
		if b, err := os.ReadFile(filepath.Join(dir, CopyDir, name)); err != nil || !bytes.Equal(b, data) {
			t.Fatalf("the child's %s is lost (%v)", name, err)
		}
	}
}

// A hand-back of a child's file with several names, some taken and some saved as
// conflicts, killed at any point and rerun, ends with the same parent, saved conflicts and
// report as an uncut one (on ext4, where the later names are links to the first's copy).
func TestHandbackCrashLinks(t *testing.T) {
	mk := func(t *testing.T) (string, string) {
		_, parent, dir := ext4Clone(t, func(parent string) { writeTree(t, parent, spec("keep=1", "c=1", "d/c2=1")) })
		cp := filepath.Join(dir, CopyDir)
		for _, name := range []string{"c", "d/c2"} {
			if err := os.WriteFile(filepath.Join(parent, name), []byte("parent's"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.WriteFile(filepath.Join(cp, "f"), []byte("child's"), 0o644); err != nil {
			t.Fatal(err)
		}
		for _, name := range []string{"l1", "l2", "d/l3", "n/l4", "c", "d/c2"} {
			os.Remove(filepath.Join(cp, name))
			os.MkdirAll(filepath.Dir(filepath.Join(cp, name)), 0o755)
			if err := os.Link(filepath.Join(cp, "f"), filepath.Join(cp, name)); err != nil {
				t.Fatal(err)
			}
		}
		return parent, dir
	}
	crashRuns(t, mk, func(_ int, parent string, want *Report) bool {
		return len(want.Taken) >= 5 && len(want.Conflicts) == 2 && inodeOf(t, filepath.Join(parent, "l1")) == inodeOf(t, filepath.Join(parent, "d", "l3"))
	})
}
