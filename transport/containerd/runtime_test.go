package containerd

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// look finds the programs named, at /usr/bin.
func look(have ...string) func(string) (string, error) {
	return func(name string) (string, error) {
		for _, h := range have {
			if h == name {
				return "/usr/bin/" + name, nil
			}
		}
		return "", errors.New("not found")
	}
}

func TestChooseRuntime(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, network string
		have          []string
		shim, binary  string
		wrapper       []string // what the wrapper holds
		gvisor        bool
		err           bool
	}{
		{name: "", shim: RuncShim},
		{name: "runc", shim: RuncShim},
		{name: "runsc", have: []string{"runsc", "containerd-shim-runsc-v1"}, shim: RunscShim, gvisor: true},
		{name: "runsc", have: []string{"runsc"}, shim: RuncShim, gvisor: true,
			wrapper: []string{"exec '/usr/bin/runsc' --oci-seccomp --cgroupfs --network=none \"$@\"", "delete --force"}},
		{name: "runsc", network: "host", have: []string{"runsc"}, shim: RuncShim, gvisor: true,
			wrapper: []string{"--network=host"}},
		{name: "runsc", network: "bridge", have: []string{"runsc"}, err: true},
		{name: "runsc", err: true},
		{name: "crun", have: []string{"crun"}, shim: RuncShim, binary: "/usr/bin/crun"},
		{name: "crun", err: true},
		{name: "io.containerd.kata.v2", shim: "io.containerd.kata.v2"},
		{name: "/usr/bin/crun", have: []string{"/usr/bin/crun"}, err: true},
	} {
		rt, err := ChooseRuntime(tc.name, tc.network, look(tc.have...))
		if tc.err {
			var re *RuntimeError
			if !errors.As(err, &re) {
				t.Errorf("%q %q: %+v, %v; want a RuntimeError", tc.name, tc.network, rt, err)
			}
			continue
		}
		if err != nil || rt.Shim != tc.shim || rt.Binary != tc.binary || rt.GVisor != tc.gvisor || (rt.Wrapper != "") != (tc.wrapper != nil) {
			t.Errorf("%q %q: %+v, %v", tc.name, tc.network, rt, err)
		}
		for _, w := range tc.wrapper {
			if !strings.Contains(rt.Wrapper, w) {
				t.Errorf("%q %q: the wrapper holds no %q:\n%s", tc.name, tc.network, w, rt.Wrapper)
			}
		}
	}
}

// The wrapper is written once per content, executable, and passes runsc what the shim gives
// it, delete with --force.
func TestWrapper(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	log := filepath.Join(dir, "args")
	rt, err := ChooseRuntime("runsc", "", func(name string) (string, error) {
		if name != "runsc" {
			return "", errors.New("not found")
		}
		return filepath.Join(dir, "fake-runsc"), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// A runsc that writes down its arguments, one a line.
	if err := os.WriteFile(filepath.Join(dir, "fake-runsc"), []byte("#!/bin/sh\nfor a do echo \"$a\"; done > "+log+"\n"), 0o700); err != nil {
		t.Fatal(err)
	}
	p, err := writeWrapper(filepath.Join(dir, "w"), rt.Wrapper)
	if err != nil {
		t.Fatal(err)
	}
	if q, err := writeWrapper(filepath.Join(dir, "w"), rt.Wrapper); err != nil || q != p {
		t.Fatalf("the second write: %s, %v; want %s", q, err, p)
	}
	for _, tc := range []struct{ args, want []string }{
		{[]string{"--root", "/r", "delete", "id one"}, []string{"--oci-seccomp", "--cgroupfs", "--network=none", "--root", "/r", "delete", "--force", "id one"}},
		{[]string{"--root", "/r", "kill", "--all", "id", "9"}, []string{"--oci-seccomp", "--cgroupfs", "--network=none", "--root", "/r", "kill", "--all", "id", "9"}},
	} {
		if out, err := runScript(p, tc.args...); err != nil {
			t.Fatalf("%v: %v %s", tc.args, err, out)
		}
		b, err := os.ReadFile(log)
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n"); strings.Join(got, "|") != strings.Join(tc.want, "|") {
			t.Errorf("%v: runsc got %q, want %q", tc.args, got, tc.want)
		}
	}
}

func runScript(p string, args ...string) ([]byte, error) {
	return exec.Command(p, args...).CombinedOutput()
}
