package orchestrator

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Calls given one Shell continue one shell: cd, export and variables hold from one to the
// next; a call without it starts where the session does; a script outside the grammar and
// a call that detached leave the shell as it was.
func TestShellContinues(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, d := range []string{"sub", "other"} {
		if err := os.Mkdir(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	s := openLocal(t, dir, Config{})
	ctx := context.Background()
	sh := &Shell{}
	run := func(script string, sh *Shell, budget time.Duration) string {
		t.Helper()
		res, err := s.Run(ctx, Call{Script: script, Shell: sh, Budget: budget})
		if err != nil {
			t.Fatal(err)
		}
		var out strings.Builder
		for _, st := range res.Steps {
			out.WriteString(st.Stdout.Text)
		}
		return out.String()
	}
	run("cd sub && export A=exported; B=plain", sh, 0)
	if got, want := run(`pwd; echo "$A $B"; sh -c 'echo "[$A][$B]"'`, sh, 0), filepath.Join(dir, "sub")+"\nexported plain\n[exported][]\n"; got != want {
		t.Fatalf("the second call saw %q, want %q", got, want)
	}
	if got := sh.Cwd(); got != filepath.Join(dir, "sub") {
		t.Fatalf("Cwd %q", got)
	}
	if got := run("pwd; echo \"[$A]\"", nil, 0); got != dir+"\n[]\n" {
		t.Fatalf("a call without the shell saw %q", got)
	}
	// Outside the grammar: bash -c runs the whole script, and its cd is its own.
	run("for d in /; do cd $d; done; export A=loop", sh, 0)
	if got := run(`pwd; echo "$A"`, sh, 0); got != filepath.Join(dir, "sub")+"\nexported\n" {
		t.Fatalf("a script outside the grammar moved the shell: %q", got)
	}
	// A call that detaches leaves the shell as it was, even once its job ends.
	gate := filepath.Join(dir, "gate")
	res, err := s.Run(ctx, Call{Script: "cd ../other && export A=detached && sh -c 'until [ -e " + gate + " ]; do sleep 0.01; done'", Shell: sh, Budget: time.Nanosecond})
	if err != nil {
		t.Fatal(err)
	}
	if res.End.Job == "" {
		t.Fatalf("the call did not detach: %+v", res.End)
	}
	j, err := s.Job(res.End.Job)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	<-j.Done()
	if end := j.Result().End; end.Kind != Finished {
		t.Fatalf("the detached job ended %+v", end)
	}
	if got := run(`pwd; echo "$A"`, sh, 0); got != filepath.Join(dir, "sub")+"\nexported\n" {
		t.Fatalf("a detached call moved the shell: %q", got)
	}
}
