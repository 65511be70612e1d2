package workspace

import (
	"os"
	"path/filepath"
	"syscall"
)

// Scratch makes a new private directory (0700) for isolated workspaces of parent: beside
// parent when that directory is on parent's filesystem and can be written, so that clones
// share extents (a reflink needs both ends on one filesystem); else in the system's
// temporary directory. sameFS says whether it is on parent's filesystem; the caller says so
// when it is not, as the clone's warning will.
func Scratch(parent, pattern string) (dir string, sameFS bool, err error) {
	parent, err = filepath.Abs(parent)
	if err != nil {
		return "", false, err
	}
	pdev, pok := device(parent)
	for _, base := range []string{filepath.Dir(parent), os.TempDir()} {
		if base == parent { // the root of the tree: nowhere beside it
			continue
		}
		d, err := os.MkdirTemp(base, pattern)
		if err != nil {
			continue
		}
		ddev, dok := device(d)
		same := pok && dok && pdev == ddev
		if same || base == os.TempDir() {
			return d, same, nil
		}
		os.Remove(d) // beside parent but on another filesystem (a mount point): no better
	}
	d, err := os.MkdirTemp("", pattern)
	return d, false, err
}

// device is the filesystem a path is on.
func device(p string) (uint64, bool) {
	fi, err := os.Stat(p)
	if err != nil {
		return 0, false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, false
	}
	return uint64(st.Dev), true
}

// Snapshots reports whether isolated workspaces of parent, made beside it (as Scratch
// does), are btrfs snapshots; if not, why not, in words for `paddock doctor`.
func Snapshots(parent string) (bool, string) {
	parent, err := filepath.Abs(parent)
	if err != nil {
		return false, err.Error()
	}
	return snapshotsHere(parent, filepath.Join(filepath.Dir(parent), ".paddock-doctor"))
}
