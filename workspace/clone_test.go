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

// sameMeta reports how the entries of got differ from want's in mode and, when times is
// set, modification time (a copy equals `cp -a` in what it keeps; a base keeps no times).
func sameMeta(t testing.TB, want, got string, times bool) string {
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
		if times && ws.Mtim != gs.Mtim {
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
		if diff := sameMeta(t, parent, root, d == CopyDir); diff != "" {
			t.Errorf("%s keeps other modes or times than the parent:\n%s", d, diff)
		}
	}
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
	if _, err := Clone(context.Background(), parent, dir, Options{}); !errors.Is(err, &Error{Reason: CodeExists}) {
		t.Errorf("a second clone into %s: %v, want %s", dir, err, CodeExists)
	}
	if _, err := Clone(context.Background(), parent, parent, Options{}); !errors.Is(err, &Error{Reason: CodeInside}) {
		t.Errorf("a clone into the parent: %v, want %s", err, CodeInside)
	}
	if _, err := Handback(context.Background(), t.TempDir()); !errors.Is(err, &Error{Reason: CodeNoManifest}) {
		t.Errorf("a hand-back of an empty directory: %v, want %s", err, CodeNoManifest)
	}
}

// Workspaces cloned as a group share one base: each holds its own copy and manifest, each
// hands back as a workspace of its own would, and the base goes with the last of them.
func TestCloneGroup(t *testing.T) {
	for _, fs := range []string{"", "xfs"} {
		t.Run("fs="+fs, func(t *testing.T) {
			root := onFS(t, fs)
			parent, group := filepath.Join(root, "parent"), filepath.Join(root, "group")
			writeTree(t, parent, spec("a=1", "b=1", "d/c=1", "l->a"))
			dirs := []string{filepath.Join(root, "w0"), filepath.Join(root, "w1"), filepath.Join(root, "w2")}
			reps, err := CloneGroup(context.Background(), parent, group, dirs, Options{})
			if err != nil {
				t.Fatal(err)
			}
			for i, d := range dirs {
				if reps[i].Dir != d || reps[i].Files != 3 || reps[i].Symlinks != 1 {
					t.Errorf("report %d: %+v", i, reps[i])
				}
				if _, err := os.Lstat(filepath.Join(d, BaseDir)); !errors.Is(err, os.ErrNotExist) {
					t.Errorf("%s has a base of its own: %v", d, err)
				}
				if diff := diffTrees(spec("a=1", "b=1", "d/c=1", "l->a"), readTree(t, filepath.Join(d, CopyDir))); diff != "" {
					t.Errorf("copy %d:\n%s", i, diff)
				}
			}
			os.WriteFile(filepath.Join(dirs[0], CopyDir, "a"), []byte("0"), 0o644)
			os.WriteFile(filepath.Join(dirs[1], CopyDir, "b"), []byte("1"), 0o644)
			os.WriteFile(filepath.Join(dirs[2], CopyDir, "a"), []byte("2"), 0o644)
			var conflicts []string
			for i, d := range dirs {
				rep, err := Handback(context.Background(), d)
				if err != nil {
					t.Fatal(err)
				}
				for _, c := range rep.Conflicts {
					conflicts = append(conflicts, fmt.Sprintf("%d:%s", i, c.Path))
				}
				_, err = os.Lstat(group)
				if last := i == len(dirs)-1; last != errors.Is(err, os.ErrNotExist) {
					t.Errorf("after %d hand-backs, the group: %v", i+1, err)
				}
			}
			if diff := diffTrees(spec("a=0", "b=1", "d/c=1", "l->a"), readTree(t, parent)); diff != "" {
				t.Errorf("parent:\n%s", diff)
			}
			if fmt.Sprint(conflicts) != "[2:a]" {
				t.Errorf("conflicts %v, want the third child's a", conflicts)
			}
		})
	}
}
