package workspace

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/paddockhq/paddock/internal/peer"
)

// The test binary doubles as the process the crash test kills: with PADDOCK_WS_HELPER set
// it runs one hand-back and SIGKILLs itself at the chosen point.
const (
	helperEnv = "PADDOCK_WS_HELPER"  // the workspace directory to hand back
	killAtEnv = "PADDOCK_WS_KILL_AT" // the 1-based hook point to die at; 0: never
)

// mounts are the loop filesystems the tests share (one per test binary).
var mounts struct {
	xfs, ext4, btrfs          string // mount points; empty when they could not be made
	xfsWhy, ext4Why, btrfsWhy string // why not
}

func TestMain(m *testing.M) {
	if dir := os.Getenv(helperEnv); dir != "" {
		os.Exit(helper(dir))
	}
	cleanup := setupMounts()
	code := m.Run()
	cleanup()
	os.Exit(code)
}

func helper(dir string) int {
	killAt, _ := strconv.Atoi(os.Getenv(killAtEnv))
	var n atomic.Int64
	hook = func(string) {
		if int(n.Add(1)) == killAt {
			syscall.Kill(os.Getpid(), syscall.SIGKILL)
			select {} // the signal lands before anything else runs
		}
	}
	rep, err := Handback(context.Background(), dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	json.NewEncoder(os.Stdout).Encode(rep)
	return 0
}

// runHelper runs a hand-back of dir in a separate process killed at hook point killAt; it
// reports whether the process was killed.
func runHelper(t *testing.T, dir string, killAt int) bool {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"="+dir, killAtEnv+"="+strconv.Itoa(killAt))
	out, err := cmd.CombinedOutput()
	if err == nil {
		return false
	}
	if ee, ok := err.(*exec.ExitError); ok {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL {
			return true
		}
	}
	t.Fatalf("hand-back process: %v\n%s", err, out)
	return false
}

// requireIntegration fails instead of skipping when PADDOCK_REQUIRE_INTEGRATION=1.
func requireIntegration(t testing.TB, why string) {
	t.Helper()
	peer.Missing(t, "%s", why)
}

// setupMounts makes a reflink XFS filesystem and an ext4 one on loop devices, when this
// process may (root, mkfs.xfs, mkfs.ext4, loop devices). It returns their cleanup.
func setupMounts() func() {
	var cleanups []func()
	done := func() {
		for i := len(cleanups) - 1; i >= 0; i-- {
			cleanups[i]()
		}
	}
	if os.Geteuid() != 0 {
		why := "not root: cannot mount a loop filesystem"
		mounts.xfsWhy, mounts.ext4Why, mounts.btrfsWhy = why, why, why
		return done
	}
	// PADDOCK_WS_IMAGE_DIR puts the images elsewhere (a tmpfs keeps the benchmarks from
	// measuring a slow disk under the loop device).
	tmp, err := os.MkdirTemp(os.Getenv("PADDOCK_WS_IMAGE_DIR"), "paddock-ws-mounts-")
	if err != nil {
		mounts.xfsWhy, mounts.ext4Why, mounts.btrfsWhy = err.Error(), err.Error(), err.Error()
		return done
	}
	cleanups = append(cleanups, func() { os.RemoveAll(tmp) })
	mount := func(fstype string, mkfs ...string) (string, string) {
		if _, err := exec.LookPath(mkfs[0]); err != nil {
			return "", fmt.Sprintf("%s not installed (Debian package %s)", mkfs[0], map[string]string{"xfs": "xfsprogs", "ext4": "e2fsprogs", "btrfs": "btrfs-progs"}[fstype])
		}
		img, mnt := filepath.Join(tmp, fstype+".img"), filepath.Join(tmp, fstype)
		f, err := os.Create(img)
		if err == nil {
			err = f.Truncate(map[string]int64{"xfs": 4 << 30, "ext4": 512 << 20, "btrfs": 4 << 30}[fstype])
			f.Close()
		}
		if err != nil {
			return "", err.Error()
		}
		if out, err := exec.Command(mkfs[0], append(mkfs[1:], img)...).CombinedOutput(); err != nil {
			return "", fmt.Sprintf("%s: %v: %s", mkfs[0], err, out)
		}
		if err := os.Mkdir(mnt, 0o755); err != nil {
			return "", err.Error()
		}
		if out, err := exec.Command("mount", "-o", "loop", img, mnt).CombinedOutput(); err != nil {
			return "", fmt.Sprintf("mount -o loop: %v: %s", err, out)
		}
		cleanups = append(cleanups, func() { exec.Command("umount", mnt).Run() })
		return mnt, ""
	}
	mounts.xfs, mounts.xfsWhy = mount("xfs", "mkfs.xfs", "-q", "-m", "reflink=1")
	mounts.ext4, mounts.ext4Why = mount("ext4", "mkfs.ext4", "-q", "-F")
	mounts.btrfs, mounts.btrfsWhy = mount("btrfs", "mkfs.btrfs", "-q", "-f")
	return done
}

// onFS returns a fresh directory on the named test filesystem ("xfs", "ext4" or
// "btrfs"), or skips; "" is the test's own temporary directory.
func onFS(t testing.TB, fs string) string {
	t.Helper()
	if fs == "" {
		return t.TempDir()
	}
	mnt, why := mounts.xfs, mounts.xfsWhy
	switch fs {
	case "ext4":
		mnt, why = mounts.ext4, mounts.ext4Why
	case "btrfs":
		mnt, why = mounts.btrfs, mounts.btrfsWhy
	}
	if mnt == "" {
		requireIntegration(t, fs+" test filesystem: "+why)
	}
	dir, err := os.MkdirTemp(mnt, "t-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// subvolume makes dir a new btrfs subvolume, removed with the test.
func subvolume(t testing.TB, dir string) {
	t.Helper()
	btrfs := peer.Program(t, "btrfs", "btrfs-progs")
	if out, err := exec.Command(btrfs, "subvolume", "create", dir).CombinedOutput(); err != nil {
		t.Fatalf("btrfs subvolume create: %v: %s", err, out)
	}
	t.Cleanup(func() { destroySubvolume(dir) })
}
