package orchestrator

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/paddockhq/paddock/internal/await"
	"github.com/paddockhq/paddock/policy"
)

// fifo makes a named pipe in dir: a program that opens it waits there until the test opens
// the other end, so a command stays at work for as long as the test wants.
func fifo(t *testing.T, dir, name string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := syscall.Mkfifo(p, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// release opens a named pipe for writing, writes data and closes it: the program waiting
// on it goes on.
func release(t *testing.T, p, data string) {
	t.Helper()
	f, err := os.OpenFile(p, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(data)
	f.Close()
}

// hear reads a named pipe to its end: it waits for a program to open it, write and close it.
func hear(t *testing.T, p string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), guard)
	defer cancel()
	s, err := await.Hear(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// The kernel's shell judges each command as it starts; a background job's commands and the
// ones after it run at once, as a pipeline's members do. A command that opens paths judged
// while one that changes names is at work asks (nobody is attached: refused), whichever was
// judged first; beside a command that changes no name it runs as alone.
func TestBackgroundRenamingIsBeside(t *testing.T) {
	cases := []struct {
		script  string
		refused string // the command refused; "" when the script runs through
	}{
		// cp waits on the pipe, at work, while cat is judged.
		{"cp f out & cat k; echo x > f; wait", "cat k"},
		{"cp f out & wc -l < k; echo x > f; wait", "<"}, // the redirection is judged first
		// The other side: the reader is at work when the renaming is judged.
		{"cat f > /dev/null & mv k k2; echo x > f; wait", "mv k k2"},
		// Beside a command that changes no name, as alone.
		{"cat f > /dev/null & cat k; echo x > f; wait", ""},
		{"sleep 0 & cat k; wait", ""},
	}
	for _, tc := range cases {
		t.Run(tc.script, func(t *testing.T) {
			dir := t.TempDir()
			fifo(t, dir, "f")
			os.WriteFile(filepath.Join(dir, "k"), []byte("plain\n"), 0o600)
			s := openLocal(t, dir, Config{})
			res, err := s.Bash(context.Background(), tc.script)
			if err != nil {
				t.Fatal(err)
			}
			if tc.refused == "" {
				if res.End.Kind == Refused || !strings.Contains(res.String(), "plain") {
					t.Fatalf("refused or no output: %s", res)
				}
				return
			}
			if res.End.Kind != Refused || !strings.HasPrefix(res.End.Command, tc.refused) || !res.End.Effects.Has(policy.Secret) {
				t.Fatalf("end %+v, want %q refused as secret: %s", res.End, tc.refused, res)
			}
		})
	}
}

// A background program that changes names holds its shell: the call does not end while it
// runs, so no step of a later call is judged while it may still rename (a step is judged
// against the names as they are). One that changes none goes on alone, as it would in a
// shell that forks.
func TestBackgroundRenamingHoldsTheShell(t *testing.T) {
	dir := t.TempDir()
	p := fifo(t, dir, "f")
	s := openLocal(t, dir, Config{})
	ctx := context.Background()
	res, err := s.Run(ctx, Call{Script: "cp f out >/dev/null 2>&1 &", Budget: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if res.End.Kind != Detached {
		t.Fatalf("the call ended with cp still at work: %+v", res.End)
	}
	j, err := s.Job(res.End.Job)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-j.Done():
		t.Fatal("the job ended with cp still at work")
	default:
	}
	release(t, p, "x")
	if final, err := j.Wait(ctx); err != nil || final.End.Kind == Refused {
		t.Fatalf("job end %v %+v", err, final)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "out")); string(b) != "x" {
		t.Fatalf("out holds %q", b)
	}

	// A reader in the background: the call ends with it still waiting on the pipe.
	res, err = s.Run(ctx, Call{Script: "cat f > out2 2>&1 &", Budget: -1})
	if err != nil {
		t.Fatal(err)
	}
	if res.End.Kind == Detached || res.End.Kind == Refused {
		t.Fatalf("a background reader held the call: %+v", res.End)
	}
	release(t, p, "y")
}
