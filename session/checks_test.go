package session

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/paddockhq/paddock/internal/loopfs"
	"github.com/paddockhq/paddock/internal/peer"
)

// On btrfs, doctor says which a workspace gets: snapshots for a subvolume, reflink clones
// (and how to get snapshots) for a plain directory.
func TestCheckReflinkSaysSnapshots(t *testing.T) {
	t.Parallel()
	mnt := loopfs.ForTest(t, "btrfs", 1<<30)
	btrfs := peer.Program(t, "btrfs", "btrfs-progs")
	sub, plain := filepath.Join(mnt, "ws"), filepath.Join(mnt, "plain")
	if out, err := exec.Command(btrfs, "subvolume", "create", sub).CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if err := os.Mkdir(plain, 0o755); err != nil {
		t.Fatal(err)
	}
	if c := checkReflink(sub); !c.OK || !strings.Contains(c.Detail, "snapshots") {
		t.Errorf("subvolume: %+v, want snapshots", c)
	}
	if c := checkReflink(plain); !c.OK || !strings.Contains(c.Detail, "reflink clones") || !strings.Contains(c.Fix, "subvolume") {
		t.Errorf("plain directory: %+v, want reflink clones and how to get snapshots", c)
	}
}

// A check's line: ok or fix, the name in a column, the fix under the detail.
func TestCheckString(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		c    Check
		want string
	}{
		{Check{Name: "docker", OK: true, Detail: "engine 24.0"}, "ok   docker     engine 24.0\n"},
		{Check{Name: "reflinks", Detail: "none in /tmp", Fix: "use XFS"}, "fix  reflinks   none in /tmp\n                use XFS\n"},
	} {
		if got := tc.c.String(); got != tc.want {
			t.Errorf("%+v: %q, want %q", tc.c, got, tc.want)
		}
	}
}
