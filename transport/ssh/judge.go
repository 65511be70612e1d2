package ssh

import (
	"fmt"
	"path"
	"strings"
)

// What the transport concludes from what a box shows, whichever way (SFTP, exec) it was
// learnt: pure decisions, the I/O around them in box.go and sync.go.

// private checks that p (a directory when dir), described by fi, is owned by the owner of
// the home and writable by no one else. An owner not known (uid -1) is not compared.
func private(p string, fi, home rstat, dir bool) error {
	switch {
	case !fi.exists:
		return fmt.Errorf("kernel cache %s is not there", p)
	case dir && !fi.mode.IsDir():
		return fmt.Errorf("kernel cache %s is not a directory", p)
	case fi.mode.Perm()&0o022 != 0:
		return fmt.Errorf("kernel cache %s is writable by others (mode %v); it must be the user's alone", p, fi.mode.Perm())
	case home.exists && home.uid >= 0 && fi.uid >= 0 && home.uid != fi.uid:
		return fmt.Errorf("kernel cache %s is owned by uid %d, not the user (uid %d)", p, fi.uid, home.uid)
	}
	return nil
}

// cached reports whether fi, at a kernel's name in the cache, is that kernel: a regular
// executable file of its size (the name holds its content hash, and only the user can
// write there).
func cached(fi rstat, size int64) bool {
	return fi.exists && fi.mode.IsRegular() && fi.size == size && fi.mode&0o100 != 0
}

// local reports whether rel, a path a box listed under a tree's root, names something
// beneath the root: relative, clean, no "..", not the root itself.
func local(rel string) bool {
	if rel == "" || rel == "." || strings.HasPrefix(rel, "/") || path.Clean(rel) != rel {
		return false
	}
	for _, el := range strings.Split(rel, "/") {
		if el == ".." {
			return false
		}
	}
	return true
}

// facts are what the quick check compares of a regular file.
type facts struct {
	perm  uint32 // permission bits
	size  int64
	mtime int64 // unix seconds
}

// fileVerdict is what the hand-back does with a regular file the box lists.
type fileVerdict int

const (
	take    fileVerdict = iota // fetch the box's content
	keep                       // the local copy holds it already
	compare                    // fetch it, and keep the local copy if the content is the same
)

// judge decides for a regular file the box lists (box), against what was sent for it
// (was, wasSent) and what the local copy holds (loc, locRegular; locRegular false: nothing
// regular there). The box's file is the one sent when its size, mode and modification time
// are those sent and the local copy still has that size and mode; then it is kept when that
// time is older than the upload (stamp, by the box's clock: a change since would have a
// newer time), compared by content when it falls in the upload's second or later.
func judge(box, was facts, wasSent bool, loc facts, locRegular bool, stamp int64) fileVerdict {
	if !wasSent || !locRegular || loc.size != box.size || loc.perm != box.perm {
		return take
	}
	if was != box {
		return take
	}
	if box.mtime < stamp {
		return keep
	}
	return compare
}
