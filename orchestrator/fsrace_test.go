package orchestrator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"golang.org/x/sys/unix"
)

const outsideSecret = "SECRET-OUTSIDE-THE-MOUNT\n"

// raceFixture is a workspace holding race/f (a file) and race/d/f (a file in a directory),
// each beside a symlink out of every mount: race/fl to a secret file, race/dl to a directory
// holding a file of the same name with the secret in it.
type raceFixture struct {
	*fsFixture
	race, secret, outDir string
}

func newRaceFixture(t *testing.T) *raceFixture {
	t.Helper()
	f := &raceFixture{fsFixture: newFSFixture(t)}
	f.race = filepath.Join(f.ws, "race")
	f.secret = filepath.Join(f.out, "secret")
	f.outDir = filepath.Join(f.out, "dir")
	for _, d := range []string{filepath.Join(f.race, "d"), f.outDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for p, body := range map[string]string{
		f.secret:                          outsideSecret,
		filepath.Join(f.outDir, "f"):      outsideSecret,
		filepath.Join(f.race, "f"):        "inside\n",
		filepath.Join(f.race, "d", "f"):   "inside\n",
		filepath.Join(f.race, "d", "old"): "inside\n",
	} {
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for link, target := range map[string]string{"fl": f.secret, "dl": f.outDir} {
		if err := os.Symlink(target, filepath.Join(f.race, link)); err != nil {
			t.Fatal(err)
		}
	}
	return f
}

// forceWalk makes the opens take the component walk (walk) or openat2 where the kernel has
// it, until the returned function restores what was.
func forceWalk(walk bool) func() {
	was := noOpenat2.Load()
	noOpenat2.Store(walk || was)
	return func() { noOpenat2.Store(was) }
}

// exchange swaps two names atomically: at every instant each name is either entry.
func exchange(a, b string) error {
	return unix.Renameat2(unix.AT_FDCWD, a, unix.AT_FDCWD, b, unix.RENAME_EXCHANGE)
}

// escapedWrites counts what writes left outside the mount: files made in the directory
// outside, and the secrets changed.
func (f *raceFixture) escapedWrites(t *testing.T) int {
	t.Helper()
	n := 0
	entries, err := os.ReadDir(f.outDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.Name() != "f" {
			n++
		}
	}
	for _, p := range []string{f.secret, filepath.Join(f.outDir, "f")} {
		if b, err := os.ReadFile(p); err != nil || string(b) != outsideSecret {
			n++
		}
	}
	return n
}

// law: access_judged_as_opened
// While two goroutines swap entries of the workspace for symlinks out of every mount as fast
// as they can (the final name for a link to a secret file, a parent directory for a link to
// a directory outside), thousands of fs.read and fs.write requests run through the policy's
// own guard: none reads the secret, none writes outside the mount. Some must get through,
// or the test would hold of a handler that refuses everything.
func TestFSRaceSwappedEntries(t *testing.T) {
	for _, walk := range []bool{false, true} {
		t.Run(fmt.Sprintf("walk=%v", walk), func(t *testing.T) {
			defer forceWalk(walk)()
			n := int64(5000)
			if walk { // the fallback: fewer, to keep the test to seconds
				n = 2000
			}
			raceSwappedEntries(t, n)
		})
	}
}

func raceSwappedEntries(t *testing.T, requests int64) {
	const workers = 4
	f := newRaceFixture(t)
	stop := make(chan struct{})
	var swappers sync.WaitGroup
	var swaps atomic.Int64
	for _, pair := range [][2]string{{"f", "fl"}, {"d", "dl"}} {
		swappers.Add(1)
		go func() {
			defer swappers.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				if err := exchange(filepath.Join(f.race, pair[0]), filepath.Join(f.race, pair[1])); err != nil {
					t.Errorf("exchange %s: %v", pair, err)
					return
				}
				swaps.Add(1)
			}
		}()
	}
	var secretReads, reads, writes, refused atomic.Int64
	var next atomic.Int64
	var work sync.WaitGroup
	for range workers {
		work.Add(1)
		go func() {
			defer work.Done()
			for i := next.Add(1); i <= requests; i = next.Add(1) {
				var typ string
				var body any
				// Reads outnumber writes, which each sync a file.
				switch i % 10 {
				case 0, 1, 2:
					typ, body = TypeFSRead, FSReadRequest{Path: "/work/race/f"}
				case 3, 4, 5:
					typ, body = TypeFSRead, FSReadRequest{Path: "/work/race/d/f"}
				case 6:
					typ, body = TypeFSWrite, FSWriteRequest{Path: "/work/race/f", Content: "written\n"}
				case 7:
					typ, body = TypeFSWrite, FSWriteRequest{Path: "/work/race/d/f", Content: "written\n"}
				default:
					typ, body = TypeFSWrite, FSWriteRequest{Path: fmt.Sprintf("/work/race/d/new-%d", i), Content: "written\n"}
				}
				r, err := f.call(typ, body)
				switch {
				case err != nil:
					refused.Add(1)
				case typ == TypeFSRead && strings.Contains(r.Content, "SECRET"):
					secretReads.Add(1)
				case typ == TypeFSRead:
					reads.Add(1)
				default:
					writes.Add(1)
				}
			}
		}()
	}
	work.Wait()
	close(stop)
	swappers.Wait()
	escaped := f.escapedWrites(t)
	t.Logf("%d requests, %d swaps: %d reads of the secret, %d writes outside; %d reads and %d writes inside, %d refused",
		requests, swaps.Load(), secretReads.Load(), escaped, reads.Load(), writes.Load(), refused.Load())
	if secretReads.Load() != 0 || escaped != 0 {
		t.Errorf("%d reads of the secret, %d writes outside the mount", secretReads.Load(), escaped)
	}
	if reads.Load() == 0 || writes.Load() == 0 {
		t.Errorf("no read or no write got through (%d, %d): the race was never run", reads.Load(), writes.Load())
	}
}

// law: access_judged_as_opened
// The entry is swapped while the access is being judged (the guard itself swaps it, so the
// window is hit every time): the access touches what was judged, never what the swap put
// there; the guard was told the path of the file the access touched.
func TestFSSwappedWhileJudged(t *testing.T) {
	for _, walk := range []bool{false, true} {
		t.Run(fmt.Sprintf("walk=%v", walk), func(t *testing.T) {
			defer forceWalk(walk)()
			swappedWhileJudged(t)
		})
	}
}

func swappedWhileJudged(t *testing.T) {
	for _, tc := range []struct {
		name, path string
		write      bool
		swap       [2]string // the names exchanged, under race/
		// where, under race/ after the swap, the write must have landed; "": nowhere, the
		// write refused as changed (its target is a symlink now, not the file judged)
		landed string
	}{
		{"read, the final name", "/work/race/f", false, [2]string{"f", "fl"}, "fl"},
		{"read, a parent directory", "/work/race/d/f", false, [2]string{"d", "dl"}, "dl/f"},
		{"write, the final name", "/work/race/f", true, [2]string{"f", "fl"}, ""},
		{"write, a parent directory", "/work/race/d/f", true, [2]string{"d", "dl"}, "dl/f"},
		{"write a new file, a parent directory", "/work/race/d/new", true, [2]string{"d", "dl"}, "dl/new"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newRaceFixture(t)
			var judged []FSOp
			f.h = FSHandlers(FSConfig{PathMap: f.pm, Guard: func(_ context.Context, op FSOp) error {
				judged = append(judged, op)
				return exchange(filepath.Join(f.race, tc.swap[0]), filepath.Join(f.race, tc.swap[1]))
			}})
			var r *FSReply
			var err error
			if tc.write {
				r, err = f.call(TypeFSWrite, FSWriteRequest{Path: tc.path, Content: "written\n"})
			} else {
				r, err = f.call(TypeFSRead, FSReadRequest{Path: tc.path})
			}
			if len(judged) != 1 {
				t.Fatalf("judged %d times", len(judged))
			}
			if n := f.escapedWrites(t); n != 0 {
				t.Errorf("%d writes outside the mount", n)
			}
			if tc.write && tc.landed == "" {
				if !errors.Is(err, &FSError{Reason: FSChanged}) {
					t.Errorf("%s: %v, want changed", tc.path, err)
				}
				if fi, err := os.Lstat(filepath.Join(f.race, "f")); err != nil || fi.Mode()&os.ModeSymlink == 0 {
					t.Errorf("the symlink swapped in was replaced")
				}
				for _, name := range []string{"fl", "d/f"} {
					if b, _ := os.ReadFile(filepath.Join(f.race, name)); string(b) != "inside\n" {
						t.Errorf("%s holds %q", name, b)
					}
				}
				return
			}
			if err != nil {
				t.Fatalf("%s: %v", tc.path, err)
			}
			if !tc.write && r.Content != "inside\n" {
				t.Errorf("read %q, not the file judged", r.Content)
			}
			if tc.write {
				if b, err := os.ReadFile(filepath.Join(f.race, tc.landed)); err != nil || string(b) != "written\n" {
					t.Errorf("the file judged holds %q, %v", b, err)
				}
			}
			// The path judged was the file's own (no symlink in it) when it was opened:
			// inside the workspace, where the access landed before the swap moved it.
			want := filepath.Join(f.ws, strings.TrimPrefix(tc.path, "/work/"))
			if judged[0].Host != want {
				t.Errorf("judged %s, want %s", judged[0].Host, want)
			}
		})
	}
}

// law: access_judged_as_opened
// A replaced file keeps its mode but never setuid, setgid or sticky; a new file gets 0644
// less the umask; no temporary file is left beside the target.
func TestFSWriteModes(t *testing.T) {
	f := newFSFixture(t)
	target := filepath.Join(f.ws, "sub", "tool")
	if err := os.WriteFile(target, []byte("old"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := unix.Chmod(target, 0o7751); err != nil {
		t.Fatal(err)
	}
	if _, err := f.call(TypeFSWrite, FSWriteRequest{Path: "/work/sub/tool", Content: "new"}); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(target)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode()&(os.ModeSetuid|os.ModeSetgid|os.ModeSticky) != 0 || fi.Mode().Perm() != 0o751 {
		t.Errorf("replaced file mode %v, want 0751 without setuid, setgid, sticky", fi.Mode())
	}
	old := unix.Umask(0o027)
	defer unix.Umask(old)
	if _, err := f.call(TypeFSWrite, FSWriteRequest{Path: "/work/sub/fresh", Content: "new"}); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(filepath.Join(f.ws, "sub", "fresh")); err != nil || fi.Mode() != 0o640 {
		t.Errorf("new file mode %v, %v: want 0644 less the umask 027", fi.Mode(), err)
	}
	entries, _ := os.ReadDir(filepath.Join(f.ws, "sub"))
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if want := []string{"b", "fresh", "tool"}; !slices.Equal(names, want) {
		t.Errorf("sub holds %v, want %v", names, want)
	}
}

// errTimeout is a call that did not return in time: it blocked.
var errTimeout = errors.New("the call did not return: it blocked")

// callBounded runs one request and fails the test, rather than hang it, when the request
// does not return while the test's context lasts.
func (f *fsFixture) callBounded(t *testing.T, typ string, body any) (*FSReply, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), hangBound)
	defer cancel()
	type res struct {
		r   *FSReply
		err error
	}
	done := make(chan res, 1)
	go func() {
		b, _ := json.Marshal(body)
		out, err := f.h[typ](ctx, HostRequest{ID: "1", Type: typ, Body: b})
		r, _ := out.(*FSReply)
		done <- res{r, err}
	}()
	select {
	case r := <-done:
		return r.r, r.err
	case <-ctx.Done():
		t.Fatalf("%s %v: %v", typ, body, errTimeout)
		return nil, errTimeout
	}
}
