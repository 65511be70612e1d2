//go:build linux

package kernel_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The kernel puts its system-call filter on itself before it runs anything: a step cannot
// leave a setuid or setgid file behind (the classic `cp /bin/sh x; chmod 4755 x`, the
// symbolic form, a setgid directory, install -m), an ordinary chmod still works, and the
// step runs with no new privileges under a filter.
//
// law: no_setid_from_sandbox
func TestStepsCannotSetID(t *testing.T) {
	dir := t.TempDir()
	k := startKernel(t, dir)
	r := k.run(shell(`cp /bin/sh x; chmod 4755 x; echo chmod=$?
cp /bin/sh y; chmod u+s,g+s y; echo symbolic=$?
mkdir d; chmod g+s d; echo dir=$?
install -m 4755 /bin/sh z; echo install=$?
cp /bin/sh w; chmod 755 w; echo plain=$?
grep -E '^(NoNewPrivs|Seccomp):' /proc/self/status | tr -d ' \t'`))
	if r.err != nil {
		t.Fatalf("error reply: %v", r.err)
	}
	out := r.stdout(0)
	for _, want := range []string{"plain=0", "NoNewPrivs:1", "Seccomp:2"} {
		if !strings.Contains(out, want) {
			t.Errorf("%q missing from the step's output:\n%s", want, out)
		}
	}
	for _, refused := range []string{"chmod=0", "symbolic=0", "dir=0", "install=0"} {
		if strings.Contains(out, refused) {
			t.Errorf("%s: the set-id change succeeded:\n%s", refused, out)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "x")); err != nil {
		t.Fatalf("the step did not copy its shell: %v", err)
	}
	err := filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		if fi.Mode()&(os.ModeSetuid|os.ModeSetgid) != 0 {
			t.Errorf("%s carries %v", p, fi.Mode())
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
