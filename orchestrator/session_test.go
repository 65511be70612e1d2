package orchestrator

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/paddockhq/paddock/images"
	"github.com/paddockhq/paddock/internal/gitexec/gitexectest"
	"github.com/paddockhq/paddock/orchestrator/output"
	"github.com/paddockhq/paddock/policy"
	"github.com/paddockhq/paddock/transport/local"
)

// openLocal opens a session on a local kernel in dir.
func openLocal(t testing.TB, dir string, cfg Config) *Session {
	t.Helper()
	ctx := context.Background()
	k, err := images.Default.Find(ctx, runtime.GOARCH)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Workspace = dir
	cfg.Transport = &local.Transport{Stderr: os.Stderr}
	cfg.Kernel = k
	if cfg.Env == nil {
		cfg.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + dir, "LC_ALL=C"}
	}
	s, err := Open(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestBashSteps(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "a.txt"), []byte("one\ntwo\n"), 0o644)
	os.Mkdir(filepath.Join(dir, "sub"), 0o755)
	s := openLocal(t, dir, Config{})
	ctx := context.Background()
	for _, tc := range []struct {
		script string
		stdout string
		status int
		end    string
		steps  int
	}{
		{"echo hello", "hello\n", 0, Finished, 1},
		{"cat a.txt | wc -l", "2\n", 0, Finished, 2},
		{"false && echo no || echo yes", "yes\n", 0, Finished, 2},
		{"echo *.txt", "a.txt\n", 0, Finished, 1},
		{"cd sub && pwd", filepath.Join(dir, "sub") + "\n", 0, Finished, 2},
		{"pwd", dir + "\n", 0, Finished, 1}, // cd lasted one call
		{"export X=1; sh -c 'echo $X'", "1\n", 0, Finished, 2},
		{"sh -c 'echo ${X:-unset}'", "unset\n", 0, Finished, 1},
		{"Y=2; echo $Y; sh -c 'echo ${Y:-unset}'", "2\nunset\n", 0, Finished, 3},
		{"echo a; exit 3; echo b", "a\n", 3, Exited, 2},
		{"false; echo $?", "1\n", 0, Finished, 2},
		{"for i in 1 2; do echo $i; done", "1\n2\n", 0, Finished, 1},
		{"echo x > out.txt; cat out.txt", "x\n", 0, Finished, 2},
		{"nosuchcommand", "", 127, Finished, 1},
	} {
		res, err := s.Bash(ctx, tc.script)
		if err != nil {
			t.Fatalf("%q: %v", tc.script, err)
		}
		var stdout strings.Builder
		for _, st := range res.Steps {
			stdout.WriteString(st.Stdout.Text)
		}
		if stdout.String() != tc.stdout || res.End.Status != tc.status || res.End.Kind != tc.end || len(res.Steps) != tc.steps {
			t.Errorf("%q: stdout %q, end %+v, %d steps; want %q, %d %s, %d steps\n%s", tc.script, stdout.String(), res.End, len(res.Steps), tc.stdout, tc.status, tc.end, tc.steps, res)
		}
	}
}

// refuseAt refuses every step whose command starts with prefix.
type refuseAt struct {
	prefix string
	asked  []int
}

func (g *refuseAt) Decide(_ context.Context, st Step) Verdict {
	g.asked = append(g.asked, st.Index)
	if strings.HasPrefix(st.Command, g.prefix) {
		return Verdict{Code: "denied", Message: "no"}
	}
	return Verdict{Run: true}
}

// law: gate_deny_stops, gate_prefix
func TestBashRefusalStops(t *testing.T) {
	dir := t.TempDir()
	g := &refuseAt{prefix: "touch"}
	s := openLocal(t, dir, Config{Gatekeeper: g})
	res, err := s.Bash(context.Background(), "echo a > first; echo b | touch second | cat; echo c > third")
	if err != nil {
		t.Fatal(err)
	}
	if res.End.Kind != Refused || res.End.Step != 2 || res.End.Code != "denied" || len(res.Steps) != 1 {
		t.Fatalf("end %+v, %d steps", res.End, len(res.Steps))
	}
	// The pipeline's steps were asked in order, none ran: not even echo b.
	if fmt.Sprint(g.asked) != "[0 1 2]" {
		t.Fatalf("asked %v, want steps 0 1 2", g.asked)
	}
	for name, want := range map[string]bool{"first": true, "second": false, "third": false} {
		if _, err := os.Stat(filepath.Join(dir, name)); (err == nil) != want {
			t.Errorf("%s exists: %v, want %v", name, err == nil, want)
		}
	}
}

// A 100 MB output is counted exactly: kept + dropped = every byte.
func TestBashBigOutputCounted(t *testing.T) {
	if testing.Short() {
		t.Skip("100 MB through the kernel")
	}
	s := openLocal(t, t.TempDir(), Config{Limit: output.Default()})
	res, err := s.Bash(context.Background(), "head -c 100000000 /dev/zero")
	if err != nil {
		t.Fatal(err)
	}
	o := res.Steps[0].Stdout
	if o.TotalBytes != 100_000_000 || int64(len(o.Text))+o.DroppedBytes != o.TotalBytes || o.Notice == "" {
		t.Fatalf("total %d, kept %d, dropped %d, notice %q", o.TotalBytes, len(o.Text), o.DroppedBytes, o.Notice)
	}
}

// law: cwd_none_refused, cwd_gone_refused, cwd_file_refused
func TestOpenWorkdir(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "f")
	os.WriteFile(file, nil, 0o600)
	for _, tc := range []struct {
		ws, code string
	}{
		{"", "cwd_none"},
		{filepath.Join(dir, "gone"), "cwd_gone"},
		{file, "cwd_not_dir"},
	} {
		_, err := Open(context.Background(), Config{Workspace: tc.ws, Transport: &local.Transport{}})
		var we *WorkdirError
		if !errors.As(err, &we) || we.Code() != tc.code {
			t.Errorf("Open(%q) = %v, want %s", tc.ws, err, tc.code)
		}
	}
}

// A program in the sandbox reaches the host through the kernel's socket: its request is a
// host_request frame admitted by the gate, served by a handler, and answered back.
func TestHostRequestFromSandbox(t *testing.T) {
	kernel, err := images.Default.Find(context.Background(), runtime.GOARCH)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	s := openLocal(t, t.TempDir(), Config{Handlers: map[string]Handler{
		"test.echo": func(_ context.Context, req HostRequest) (any, error) {
			var body struct{ Say string }
			if err := req.Decode(&body); err != nil {
				return nil, err
			}
			got = append(got, body.Say)
			return map[string]string{"said": body.Say}, nil
		},
	}})
	res, err := s.Bash(context.Background(), kernel+` host test.echo '{"say":"hi"}'; `+kernel+` host nope '{}'; echo status $?`)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Steps) != 3 || !strings.Contains(res.Steps[0].Stdout.Text, `"said":"hi"`) || res.Steps[0].Status != 0 {
		t.Fatalf("host request: %s", res)
	}
	if !strings.Contains(res.Steps[1].Stderr.Text, CodeUnknownType) || res.Steps[2].Stdout.Text != "status 1\n" {
		t.Fatalf("unserved type: %s", res)
	}
	if fmt.Sprint(got) != "[hi]" {
		t.Fatalf("handler saw %v", got)
	}
}

// Two programs of one pipeline ask the host at once; the first one's request waits until the
// second one's has been served. With host requests served one after another, neither would
// ever be answered.
//
// law: request_not_held_back
func TestHostRequestWaitsAlone(t *testing.T) {
	kernel, err := images.Default.Find(context.Background(), runtime.GOARCH)
	if err != nil {
		t.Fatal(err)
	}
	started, served := make(chan struct{}), make(chan struct{})
	heldBack := make(chan string, 2)
	dir := t.TempDir()
	s := openLocal(t, dir, Config{Handlers: map[string]Handler{
		"test.wait": func(context.Context, HostRequest) (any, error) {
			close(started)
			select {
			case <-served:
				return "waited", nil
			case <-time.After(guard):
				heldBack <- "test.wait was never released"
				return nil, errors.New("held back")
			}
		},
		"test.echo": func(context.Context, HostRequest) (any, error) {
			select {
			case <-started:
			case <-time.After(guard):
				heldBack <- "test.echo ran, but test.wait never started"
			}
			close(served)
			return "echoed", nil
		},
	}})
	// The waiting program's reply goes to a file: the pipe's reader may be gone by then.
	res, err := s.Bash(context.Background(), kernel+` host test.wait '{}' > waited.txt | `+kernel+` host test.echo '{}'`)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case msg := <-heldBack:
		t.Fatal(msg)
	default:
	}
	if len(res.Steps) != 2 || res.Steps[0].Status != 0 || res.Steps[1].Status != 0 || !strings.Contains(res.Steps[1].Stdout.Text, "echoed") {
		t.Fatalf("%s", res)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "waited.txt")); err != nil || !strings.Contains(string(b), "waited") {
		t.Fatalf("the waiting program's reply: %q %v", b, err)
	}
}

// A sandbox program's request that is not UTF-8 gets a refusal, and the session goes on with
// the same kernel: it is a program's bad request, not a kernel the host cannot answer. (The
// kernel refuses it; were it to relay it, the host would refuse it too: see
// TestGateNotUTF8Refused.)
func TestHostRequestNotUTF8FromSandbox(t *testing.T) {
	kernel, err := images.Default.Find(context.Background(), runtime.GOARCH)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	s := openLocal(t, t.TempDir(), Config{Handlers: map[string]Handler{
		"test.echo": func(_ context.Context, req HostRequest) (any, error) {
			got = append(got, string(req.Body))
			return "heard", nil
		},
	}})
	before, err := s.Ping(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	res, err := s.Bash(context.Background(), `printf '{"say":"\377"}' | `+kernel+` host test.echo -; echo status $?`)
	if err != nil {
		t.Fatalf("the session's call failed: %v", err)
	}
	if len(res.Steps) != 3 || !strings.Contains(res.Steps[1].Stderr.Text, "not UTF-8") || res.Steps[2].Stdout.Text != "status 1\n" {
		t.Fatalf("no refusal: %s", res)
	}
	if len(got) != 0 {
		t.Fatalf("the handler ran for %q", got)
	}
	res, err = s.Bash(context.Background(), kernel+` host test.echo '{"say":"hi"}'`)
	if err != nil || !strings.Contains(res.Steps[0].Stdout.Text, "heard") {
		t.Fatalf("the next request: %v %s", err, res)
	}
	after, err := s.Ping(context.Background())
	if err != nil || after.PID != before.PID {
		t.Fatalf("the kernel was replaced: pid %d, then %d (%v)", before.PID, after.PID, err)
	}
}

// A git step judged to read runs hardened: a textconv program the repository's config names
// (through a .gitattributes driver) does not run under git show.
func TestGitReadRunsHardened(t *testing.T) {
	dir := t.TempDir()
	s := openLocal(t, dir, Config{})
	marker := filepath.Join(dir, "driver-ran")
	os.WriteFile(filepath.Join(dir, "drv.sh"), []byte("#!/bin/sh\ntouch "+marker+"\ncat \"$1\"\n"), 0o755)
	os.WriteFile(filepath.Join(dir, ".gitattributes"), []byte("*.txt diff=evil\n"), 0o644)
	ctx := context.Background()
	setup := "git init -q && git config diff.evil.textconv " + filepath.Join(dir, "drv.sh") +
		" && echo one > a.txt && git add -A && git -c user.name=p -c user.email=p@p commit -q -m one" +
		" && echo two > a.txt && git -c user.name=p -c user.email=p@p commit -q -am two"
	if res, err := s.Bash(ctx, setup); err != nil || res.End.Status != 0 {
		t.Fatalf("%v %s", err, res)
	}
	os.Remove(marker) // the commits may have run it
	res, err := s.Bash(ctx, "git show")
	if err != nil || res.End.Status != 0 || !strings.Contains(res.Steps[0].Stdout.Text, "+two") {
		t.Fatalf("%v %s", err, res)
	}
	if res.Steps[0].Effects.Has(policy.Exec) {
		t.Fatalf("git show judged exec: %v", res.Steps[0].Effects)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("the repository's diff driver ran during a read")
	}
}

// The bash tool's git steps that add objects and move the current branch forward run
// hardened too: no hook, editor, signature program, pager or fsmonitor of the repository's
// runs, in any layout. The one kind that may still run is a filter driver (a command line
// cannot switch those off), and only in a step judged exec for it; a step judged without
// exec (a commit of the index, branch, tag, mv, a config read) runs no program at all.
// law: host_git_hardened
func TestGitWritesRunHardened(t *testing.T) {
	tr := gitexectest.New(t)
	ctx := context.Background()
	for _, l := range gitexectest.Layouts {
		if l == gitexectest.Bare {
			continue // no work tree to add from
		}
		ws := tr.Repo(t, l)
		// The trap's filter process ends at once, which fails every add: only the clean and
		// smudge filters (which pass their input on) stay, so that the commits happen.
		if err := os.WriteFile(filepath.Join(ws, ".gitattributes"), []byte("*.txt filter=evil diff=evil\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		env := append([]string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + t.TempDir(), "LC_ALL=C",
			"GIT_AUTHOR_NAME=p", "GIT_AUTHOR_EMAIL=p@p", "GIT_COMMITTER_NAME=p", "GIT_COMMITTER_EMAIL=p@p"}, tr.Env()...)
		s := openLocal(t, ws, Config{Env: env})
		for _, script := range []string{"git add -A", "git commit -m one", "git branch topic", "git tag v1",
			"git stash list", "git config user.name", "git reflog", "git checkout -b work", "git mv c.txt d.txt",
			"git commit -m two", "git clean -n", "git notes add -m n", "git branch -d topic",
			"git branch topic", "echo five > a.txt", "git stash", "git stash pop", "git add -A", "git commit -qm three",
			"git switch topic", "git merge --no-edit work", "git tag -l", "git reset -q", "git pack-refs"} {
			res, err := s.Bash(ctx, script)
			if err != nil {
				t.Fatalf("%s: %s: %v", l, script, err)
			}
			got := tr.Sprung(t)
			tr.Clear(t)
			if !strings.HasPrefix(script, "git ") {
				continue
			}
			if len(res.Steps) != 1 || res.Steps[0].Effects.Has(policy.Protected) {
				t.Errorf("%s: %s: %s", l, script, res)
				continue
			}
			if res.Steps[0].Effects.Has(policy.Exec) {
				got = slices.DeleteFunc(got, func(m string) bool { return slices.Contains(gitexectest.FilterMarks, m) })
			}
			if len(got) > 0 {
				t.Errorf("%s: %s (%v) ran %v\n%s", l, script, res.Steps[0].Effects, got, res)
			}
		}
		// The steps ran git: the history holds what they committed.
		res, err := s.Bash(ctx, "git log --format=%s")
		if err != nil || !strings.Contains(res.Steps[0].Stdout.Text, "three") {
			t.Errorf("%s: the commits did not happen: %v %s", l, err, res)
		}
	}
}

// The bash tool's git steps that read, show the work tree or change refs run none of the
// programs a repository names, in any layout of its configuration, with a session
// environment whose GIT_* variables name them too: not the fsmonitor, hooks, pager, drivers,
// signature programs, helpers, nor a lazy fetch from a promisor remote that is an ext::
// command. Status, a work-tree diff and blame read files through the repository's filter
// drivers, which no command line switches off: those may run, and the steps are judged exec
// for them.
// law: host_git_hardened
func TestGitStepsHardened(t *testing.T) {
	tr := gitexectest.New(t)
	ctx := context.Background()
	for _, l := range gitexectest.Layouts {
		ws := tr.Repo(t, l)
		env := append([]string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + t.TempDir(), "LC_ALL=C"}, tr.Env()...)
		s := openLocal(t, ws, Config{Env: env})
		for _, script := range []string{"git status", "git diff", "git blame a.txt", "git log -p",
			"git show", "git diff --cached", "git grep six", "git ls-files", "git log",
			"git show HEAD:a.txt", "git cat-file -p HEAD", "git branch", "git describe --always"} {
			res, err := s.Bash(ctx, script)
			if err != nil {
				t.Fatalf("%s: %s: %v", l, script, err)
			}
			got := tr.Sprung(t)
			tr.Clear(t)
			filters := script == "git status" || script == "git diff" || script == "git blame a.txt"
			if filters {
				got = slices.DeleteFunc(got, func(m string) bool { return slices.Contains(gitexectest.FilterMarks, m) })
				if len(res.Steps) != 1 || !res.Steps[0].Effects.Has(policy.Exec) {
					t.Errorf("%s: %s not judged exec: %s", l, script, res)
				}
			}
			if len(got) > 0 {
				t.Errorf("%s: %s ran %v\n%s", l, script, got, res)
			}
			// The steps ran git: a read of what is there gives it.
			if l != gitexectest.Bare && (script == "git ls-files" && !strings.Contains(res.Steps[0].Stdout.Text, "a.txt") ||
				script == "git log" && !strings.Contains(res.Steps[0].Stdout.Text, "second")) {
				t.Errorf("%s: %s: %s", l, script, res)
			}
		}
	}
}
