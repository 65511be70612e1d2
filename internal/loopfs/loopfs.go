// Package loopfs makes small filesystems on loop devices for tests and benchmarks that need
// a real XFS (reflinks), btrfs (snapshots) or ext4 beside the machine's own disk. It needs root, the mkfs
// program of the filesystem and loop devices.
package loopfs

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/paddockhq/paddock/internal/peer"
)

// Mkfs are the commands that make each filesystem kind, by name.
var Mkfs = map[string][]string{
	"xfs":   {"mkfs.xfs", "-q", "-m", "reflink=1"},
	"ext4":  {"mkfs.ext4", "-q", "-F"},
	"btrfs": {"mkfs.btrfs", "-q", "-f"},
}

// packages name the Debian package of each mkfs program.
var packages = map[string]string{"xfs": "xfsprogs", "ext4": "e2fsprogs", "btrfs": "btrfs-progs"}

// Mount makes a filesystem of kind (xfs, ext4, btrfs) of size bytes in an image under dir, mounts
// it on a loop device, and returns its mount point and the cleanup that unmounts it. The
// error says why it could not, in words fit for a skip.
func Mount(dir, kind string, size int64) (mnt string, cleanup func(), err error) {
	mkfs, ok := Mkfs[kind]
	if !ok {
		return "", nil, fmt.Errorf("no filesystem kind %q", kind)
	}
	if os.Geteuid() != 0 {
		return "", nil, fmt.Errorf("not root: cannot mount a loop filesystem")
	}
	if _, err := exec.LookPath(mkfs[0]); err != nil {
		return "", nil, fmt.Errorf("%s not installed (Debian package %s)", mkfs[0], packages[kind])
	}
	img, mnt := filepath.Join(dir, kind+".img"), filepath.Join(dir, kind)
	f, err := os.Create(img)
	if err == nil {
		err = f.Truncate(size)
		f.Close()
	}
	if err != nil {
		return "", nil, err
	}
	if out, err := exec.Command(mkfs[0], append(mkfs[1:], img)...).CombinedOutput(); err != nil {
		return "", nil, fmt.Errorf("%s: %v: %s", mkfs[0], err, out)
	}
	if err := os.Mkdir(mnt, 0o755); err != nil {
		return "", nil, err
	}
	if out, err := exec.Command("mount", "-o", "loop", img, mnt).CombinedOutput(); err != nil {
		return "", nil, fmt.Errorf("mount -o loop: %v: %s", err, out)
	}
	return mnt, func() {
		exec.Command("umount", mnt).Run()
		os.Remove(img)
	}, nil
}

// ForTest mounts a filesystem for one test or benchmark, cleaned up with it. When it cannot,
// the test is skipped with the reason, or fails when PADDOCK_REQUIRE_INTEGRATION=1.
func ForTest(t testing.TB, kind string, size int64) string {
	t.Helper()
	mnt, cleanup, err := Mount(t.TempDir(), kind, size)
	if err != nil {
		peer.Missing(t, "%s test filesystem: %v", kind, err)
	}
	t.Cleanup(cleanup)
	return mnt
}
