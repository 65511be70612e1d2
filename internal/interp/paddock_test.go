package interp

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"mvdan.cc/sh/v3/syntax"
)

// A background statement that is one program, alone, in a subshell or in a group, has the
// pid its handler reports as $!; one that is shell code has a job id. The job's goroutine
// hands its channel on while the statement waits on it, so this runs many times (and under
// -race in CI).
func TestBackgroundProgramPid(t *testing.T) {
	for _, src := range []string{
		`prog & echo $!`,
		`(prog) & echo $!`,
		`{ prog; } & echo $!`,
		`( { prog; } ) & echo $!`,
		`true; prog & echo $!`,
	} {
		for range 200 {
			if got := runBackground(t, src); got != "4242\n" {
				t.Fatalf("%s: $! is %q, want the program's pid", src, got)
			}
		}
	}
	for _, src := range []string{`{ prog; prog; } & echo $!`, `(prog; true) & echo $!`, `f() { prog; }; f & echo $!`} {
		if got := runBackground(t, src); !strings.HasPrefix(got, "g") {
			t.Errorf("%s: $! is %q, want a job id", src, got)
		}
	}
}

func runBackground(t *testing.T, src string) string {
	t.Helper()
	f, err := syntax.NewParser().Parse(strings.NewReader(src), "")
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	exec := func(ctx context.Context, args []string) error {
		HandlerCtx(ctx).Started(4242)
		return nil
	}
	r, err := New(StdIO(nil, &out, &out), ExecHandlers(func(ExecHandlerFunc) ExecHandlerFunc { return exec }))
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Run(context.Background(), f); err != nil {
		t.Fatal(err)
	}
	return out.String()
}
