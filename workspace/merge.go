package workspace

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/paddockhq/paddock/internal/gitexec"
)

// Line merges are git's own: `git merge-file` run through gitexec (hardened: it runs no
// program the repository names), so a path both sides changed merges exactly as git would
// merge it. A Go diff3 would have to match git's hunk boundaries and marker layout line for
// line; the program itself does.

// maxMergeSize is the largest file merged by lines; a bigger one keeps the table's conflict.
const maxMergeSize = 8 << 20

// maxMergesHeld bounds the merges one hand-back holds in memory until its plan runs (a
// variable, for a test to lower).
var maxMergesHeld int64 = 256 << 20

// MergeLabels are the names the conflict markers of a marked merge give each side.
var MergeLabels = [3]string{"parent", "base", "child"}

// JournalName is the file a hand-back that takes line merges writes before it changes the
// parent: the hash of each merged content, so that a rerun after a cut tells a file it
// already merged from one the parent changed.
const JournalName = "merged.json"

// lineMerge merges by lines what the base's file became in the parent and in the child,
// running git in dir (the workspace directory). It returns the merge (with conflict
// markers where hunks conflict) and whether it was clean; ok is false when git cannot merge
// the files by lines (one is binary).
func lineMerge(ctx context.Context, dir, parent, base, child string) (out []byte, clean, ok bool, err error) {
	args := []string{"-c", "merge.conflictStyle=merge", "merge-file", "-p",
		"-L", MergeLabels[0], "-L", MergeLabels[1], "-L", MergeLabels[2], "--", parent, base, child}
	cmd := gitexec.Command(ctx, dir, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err = cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return stdout.Bytes(), true, true, nil
	case errors.As(err, &ee) && ee.ExitCode() > 0 && ee.ExitCode() < 128:
		return stdout.Bytes(), false, true, nil // the number of conflicting hunks
	case errors.As(err, &ee) && strings.Contains(stderr.String(), "binary"):
		return nil, false, false, nil
	}
	if ctx.Err() != nil {
		return nil, false, false, ctx.Err()
	}
	return nil, false, false, fmt.Errorf("git merge-file %s: %v: %s", child, err, strings.TrimSpace(stderr.String()))
}

func contentHash(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// readBeneath reads the regular file at rel under root, opening each element beneath the
// one above it and following no symlink, and refusing a file larger than limit. The
// parent's workspace is shared with a running sandbox: a path judged a file may be a
// symlink to anything by the time it is read, and what is read here is written back.
func readBeneath(root, rel string, limit int64) ([]byte, error) {
	fd, err := unix.Open(root, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &pathError{op: "open", path: root, err: err}
	}
	elems := strings.Split(rel, "/")
	for i, e := range elems {
		if e == "" || e == "." || e == ".." {
			unix.Close(fd)
			return nil, fmt.Errorf("%s: not a path beneath %s", rel, root)
		}
		flags := unix.O_RDONLY | unix.O_NOFOLLOW | unix.O_CLOEXEC
		if i < len(elems)-1 {
			flags |= unix.O_DIRECTORY
		}
		next, err := unix.Openat(fd, e, flags, 0)
		unix.Close(fd)
		if err != nil {
			return nil, &pathError{op: "open", path: filepath.Join(root, rel), err: err}
		}
		fd = next
	}
	f := os.NewFile(uintptr(fd), filepath.Join(root, rel))
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() || fi.Size() > limit {
		return nil, fmt.Errorf("%s: not a regular file within %d bytes", filepath.Join(root, rel), limit)
	}
	b := make([]byte, 0, fi.Size())
	buf := bytes.NewBuffer(b)
	if _, err := buf.ReadFrom(f); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// readJournal returns the merged contents' hashes a cut hand-back recorded, by path.
func readJournal(dir string) (map[string]string, error) {
	data, err := os.ReadFile(filepath.Join(dir, JournalName))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var j map[string]string
	if err := json.Unmarshal(data, &j); err != nil {
		return nil, &Error{Reason: CodeBadManifest, Msg: fmt.Sprintf("the merge journal of %s cannot be read", dir), Err: err}
	}
	return j, nil
}

// writeJournal records the merged contents' hashes, synced, before the parent changes.
func writeJournal(dir string, j map[string]string) error {
	data, err := json.Marshal(j)
	if err != nil {
		return err
	}
	name := filepath.Join(dir, JournalName)
	tmp := tempFor(name)
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, name); err != nil {
		return err
	}
	step("journal")
	return nil
}

// putBytes makes the entry rel beneath the directory root a regular file holding data with
// permission bits perm, by one rename from its fixed sibling; both are written relative to
// the directory that holds rel, opened beneath root through no symlink (see openDirOf).
func putBytes(data []byte, root, rel string, perm uint32) error {
	dir, err := openDirOf(root, rel, true)
	if err != nil {
		return err
	}
	defer unix.Close(dir)
	dst := join(root, rel)
	tname, tmp := tempName(path.Base(rel)), tempFor(dst)
	fd, err := unix.Openat(dir, tname, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, perm)
	if err != nil {
		return &pathError{op: "create", path: tmp, err: err}
	}
	for w := data; len(w) > 0; {
		n, err := unix.Write(fd, w)
		if err != nil {
			unix.Close(fd)
			return &pathError{op: "write", path: tmp, err: err}
		}
		w = w[n:]
	}
	if perm&umask != 0 || perm&^0o777 != 0 {
		if err := unix.Fchmod(fd, perm); err != nil {
			unix.Close(fd)
			return &pathError{op: "chmod", path: tmp, err: err}
		}
	}
	if err := unix.Close(fd); err != nil {
		return &pathError{op: "close", path: tmp, err: err}
	}
	step("write " + tmp)
	if err := unix.Renameat(dir, tname, dir, path.Base(rel)); err != nil {
		return &pathError{op: "rename", path: dst, err: err}
	}
	step("rename " + dst)
	return nil
}
