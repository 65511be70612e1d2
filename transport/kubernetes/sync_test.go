package kubernetes

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	k8s "k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/paddockhq/paddock/transport"
	"github.com/paddockhq/paddock/transport/pathmap"
)

// law: nothing-lost. A hand-back whose parent changed a file the pod changed too keeps the
// pod's version where the report says it is saved: the sync's directory stays while it
// holds a conflict, and goes when nothing is left in it.
func TestHandbackKeepsConflicts(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	for _, conflict := range []bool{true, false} {
		parent := t.TempDir()
		os.WriteFile(filepath.Join(parent, "both.txt"), []byte("base\n"), 0o644)
		s, err := StartSync(parent)
		if err != nil {
			t.Fatal(err)
		}
		// The pod's tree, as it came back: its own version of both.txt, a new file.
		os.WriteFile(filepath.Join(s.Copy(), "both.txt"), []byte("pod\n"), 0o644)
		os.WriteFile(filepath.Join(s.Copy(), "made.txt"), []byte("new\n"), 0o644)
		if conflict {
			os.WriteFile(filepath.Join(parent, "both.txt"), []byte("host\n"), 0o644)
		}
		s.fetched = true
		rep, err := s.Handback(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if b, _ := os.ReadFile(filepath.Join(parent, "made.txt")); string(b) != "new\n" {
			t.Errorf("conflict %v: made.txt in the parent: %q", conflict, b)
		}
		if !conflict {
			if len(rep.Conflicts) != 0 {
				t.Errorf("conflicts %+v", rep.Conflicts)
			}
			if _, err := os.Stat(s.Dir); !os.IsNotExist(err) {
				t.Errorf("the sync's directory is left with nothing in it: %v", err)
			}
			continue
		}
		if len(rep.Conflicts) != 1 || rep.Conflicts[0].Path != "both.txt" || rep.Conflicts[0].Saved == "" {
			t.Fatalf("conflicts %+v", rep.Conflicts)
		}
		if b, err := os.ReadFile(filepath.Join(rep.Dir, rep.Conflicts[0].Saved)); err != nil || string(b) != "pod\n" {
			t.Errorf("the pod's version of both.txt, where the report says it is saved: %q %v", b, err)
		}
		if b, _ := os.ReadFile(filepath.Join(parent, "both.txt")); string(b) != "host\n" {
			t.Errorf("the parent's both.txt: %q", b)
		}
	}
}

// A synced workspace lives in one pod: a second kernel is refused as gone (it once got a
// pod of its own with the host's copy bound as a hostPath), unless the first never ran,
// whose start gives the sync back.
func TestSyncOnePod(t *testing.T) {
	var none *Sync
	if s, err := none.claim(); s != nil || err != nil {
		t.Fatalf("no sync: %v %v", s, err)
	}
	none.hold("p")
	none.release()
	s := &Sync{Dir: t.TempDir()}
	if got, err := s.claim(); got != s || err != nil {
		t.Fatalf("first claim: %v %v", got, err)
	}
	// A start that failed before its kernel ran: the next may have it.
	s.hold("kernel-a")
	s.release()
	if got, err := s.claim(); got != s || err != nil {
		t.Fatalf("claim after a start that failed: %v %v", got, err)
	}
	s.hold("kernel-b")
	for range 2 {
		got, err := s.claim()
		var gone *PodGoneError
		if got != nil || !errors.As(err, &gone) || gone.Pod != "kernel-b" || !errors.Is(err, transport.ErrGone) {
			t.Fatalf("a second kernel on a synced workspace: %v %v", got, err)
		}
	}
}

// Start refuses a second kernel on a synced workspace before it asks the cluster for
// anything (a cluster no one answers at: asked, it would fail otherwise).
func TestStartRefusesSecondSyncedKernel(t *testing.T) {
	cfg := &rest.Config{Host: "http://127.0.0.1:1"}
	cs, err := k8s.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	s := &Sync{Dir: t.TempDir()}
	s.claim()
	s.hold("first")
	tr := &Transport{Client: cs, Config: cfg, Settings: Settings{Namespace: "ns", Image: "img"}, NoReap: true, Sync: s}
	pm, _ := pathmap.New(pathmap.Mount{Host: s.Copy(), Sandbox: SyncDir})
	_, err = tr.Start(context.Background(), transport.Spec{Session: "s", Kernel: "/k", Cwd: SyncDir, PathMap: pm})
	var gone *PodGoneError
	if !errors.As(err, &gone) || gone.Pod != "first" {
		t.Fatalf("Start: %v", err)
	}
}
