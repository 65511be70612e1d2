package pool

import (
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/paddockhq/paddock/transport"
	"github.com/paddockhq/paddock/transport/pathmap"
)

func mustMap(t *testing.T, ms ...pathmap.Mount) *pathmap.Map {
	t.Helper()
	pm, err := pathmap.New(ms...)
	if err != nil {
		t.Fatal(err)
	}
	return pm
}

func baseSpec(t *testing.T) transport.Spec {
	return transport.Spec{
		Session: "s1",
		Kernel:  "/k/paddock-kernel",
		Env:     []string{"A=1"},
		Cwd:     "/work",
		PathMap: mustMap(t, pathmap.Mount{Sandbox: "/work", Host: "/srv/ws"}),
		Labels:  map[string]string{SessionLabel: "s1", "team": "x"},
	}
}

// law: pool_key_ignores_session — what is the session's own (its id, working directory,
// environment and session label) never keeps a warm kernel from serving it.
func TestKeyIgnoresTheSessionsOwn(t *testing.T) {
	base := baseSpec(t)
	want := Key(base)
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 500 {
		s := base
		s.Session = "s" + strconv.Itoa(r.IntN(1e6))
		s.Env = nil
		for range r.IntN(5) {
			s.Env = append(s.Env, "V"+strconv.Itoa(r.IntN(100))+"="+strconv.Itoa(r.Int()))
		}
		s.Labels = map[string]string{SessionLabel: s.Session, "team": "x"}
		s.Cwd = "/work/" + strconv.Itoa(r.IntN(100))
		if got := Key(s); got != want {
			t.Fatalf("case %d: %+v has key %s, want %s", i, s, got, want)
		}
	}
}

// law: pool_key_separates — a warm kernel never serves a session whose sandbox differs in
// anything it was started with: kernel, arguments, mounts, labels.
func TestKeySeparatesSandboxes(t *testing.T) {
	base := baseSpec(t)
	for name, change := range map[string]func(*transport.Spec){
		"kernel":     func(s *transport.Spec) { s.Kernel = "/other/paddock-kernel" },
		"args":       func(s *transport.Spec) { s.Args = []string{"-grace", "1s"} },
		"mount host": func(s *transport.Spec) { s.PathMap = mustMap(t, pathmap.Mount{Sandbox: "/work", Host: "/srv/other"}) },
		"read-only": func(s *transport.Spec) {
			s.PathMap = mustMap(t, pathmap.Mount{Sandbox: "/work", Host: "/srv/ws", ReadOnly: true})
		},
		"more mounts": func(s *transport.Spec) {
			s.PathMap = mustMap(t, pathmap.Mount{Sandbox: "/work", Host: "/srv/ws"}, pathmap.Mount{Sandbox: "/data", Host: "/srv/data"})
		},
		"no map":      func(s *transport.Spec) { s.PathMap = nil },
		"label":       func(s *transport.Spec) { s.Labels = map[string]string{SessionLabel: "s1", "team": "y"} },
		"extra label": func(s *transport.Spec) { s.Labels = map[string]string{SessionLabel: "s1", "team": "x", "a": "b"} },
	} {
		s := base
		change(&s)
		if Key(s) == Key(base) {
			t.Errorf("%s: the key did not change", name)
		}
	}
}

// law: pool_refill_bounded — a refill never holds more than size kernels ready and in
// flight, never more than parallel in flight, none after MaxFailures failures in a row, and
// otherwise starts as many as those bounds allow.
func TestToStart(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for range 10000 {
		size, ready, starting, parallel, failures := r.IntN(30), r.IntN(30), r.IntN(10), 1+r.IntN(8), r.IntN(5)
		n := ToStart(size, ready, starting, parallel, failures)
		switch {
		case n < 0:
			t.Fatalf("ToStart(%d,%d,%d,%d,%d) = %d", size, ready, starting, parallel, failures, n)
		case n > 0 && ready+starting+n > size:
			t.Fatalf("ToStart(%d,%d,%d,%d,%d) = %d passes the size", size, ready, starting, parallel, failures, n)
		case n > 0 && starting+n > parallel:
			t.Fatalf("ToStart(%d,%d,%d,%d,%d) = %d passes the parallel bound", size, ready, starting, parallel, failures, n)
		case failures >= MaxFailures && n != 0:
			t.Fatalf("ToStart(%d,%d,%d,%d,%d) = %d after failures", size, ready, starting, parallel, failures, n)
		case failures < MaxFailures && n == 0 && ready+starting < size && starting < parallel:
			t.Fatalf("ToStart(%d,%d,%d,%d,%d) = 0 with room left", size, ready, starting, parallel, failures)
		}
	}
}

// law: pool_wait_only_for_flight — a session waits only for a start in flight that no
// earlier waiter will take.
func TestWait(t *testing.T) {
	for _, c := range []struct {
		starting, waiting int
		want              bool
	}{{0, 0, false}, {1, 0, true}, {1, 1, false}, {3, 2, true}, {2, 5, false}} {
		if got := Wait(c.starting, c.waiting); got != c.want {
			t.Errorf("Wait(%d, %d) = %v", c.starting, c.waiting, got)
		}
	}
}
