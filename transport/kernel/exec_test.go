//go:build linux

package kernel_test

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/paddockhq/paddock/transport/wire"
)

func TestPipelineStatuses(t *testing.T) {
	k := startKernel(t, "")
	dir := t.TempDir()
	plain := filepath.Join(dir, "plain")
	if err := os.WriteFile(plain, []byte("#!/bin/sh\necho no\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name   string
		x      wire.Exec
		codes  []int
		signal []string
		errs   []bool // Error set
		stdout string
	}{
		{name: "false|true", x: pipeline(argv("false"), argv("true")), codes: []int{1, 0}},
		{name: "exit3|cat", x: pipeline(argv("sh", "-c", "echo piped; exit 3"), argv("cat")), codes: []int{3, 0}, stdout: "piped\n"},
		{name: "three", x: pipeline(argv("printf", "b\\na\\nc\\n"), argv("sort"), argv("head", "-n", "2")), codes: []int{0, 0, 0}, stdout: "a\nb\n"},
		{name: "not found, the rest runs", x: pipeline(argv("no-such-program-paddock"), argv("echo", "still")), codes: []int{127, 0}, errs: []bool{true, false}, stdout: "still\n"},
		{name: "not found by path", x: pipeline(argv(filepath.Join(dir, "missing"))), codes: []int{127}, errs: []bool{true}},
		{name: "not executable", x: pipeline(argv(plain)), codes: []int{126}, errs: []bool{true}},
		{name: "directory", x: pipeline(argv(dir)), codes: []int{126}, errs: []bool{true}},
		{name: "killed by TERM", x: pipeline(argv("sh", "-c", "kill -TERM $$")), codes: []int{143}, signal: []string{"TERM"}},
		{name: "killed by KILL mid-pipeline", x: pipeline(argv("true"), argv("sh", "-c", "kill -KILL $$"), argv("true")), codes: []int{0, 137, 0}, signal: []string{"", "KILL", ""}},
		{name: "shell", x: shell("false | true; echo ${PIPESTATUS[@]}; exit 4"), codes: []int{4}, stdout: "1 0\n"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			k.t = t
			r := k.run(c.x)
			if r.err != nil {
				t.Fatalf("error reply: %v", r.err)
			}
			if !reflect.DeepEqual(r.codes(), c.codes) {
				t.Fatalf("codes %v, want %v (%+v)", r.codes(), c.codes, r.statuses)
			}
			for i, s := range r.statuses {
				if c.signal != nil && s.Signal != c.signal[i] {
					t.Errorf("command %d: signal %q, want %q", i, s.Signal, c.signal[i])
				}
				if c.signal == nil && s.Signal != "" {
					t.Errorf("command %d: signal %q, want none", i, s.Signal)
				}
				want := c.errs != nil && c.errs[i]
				if (s.Error != "") != want {
					t.Errorf("command %d: error %q, want one: %v", i, s.Error, want)
				}
			}
			if got := r.stdout(len(c.x.Commands) - 1); got != c.stdout {
				t.Errorf("stdout %q, want %q", got, c.stdout)
			}
		})
	}
}

// The program is looked up on the exec's PATH, not the kernel's, and a command's own
// environment is added to the exec's.
func TestEnvironmentAndPath(t *testing.T) {
	k := startKernel(t, "")
	bin := t.TempDir()
	tool := filepath.Join(bin, "paddock-test-tool")
	if err := os.WriteFile(tool, []byte("#!/bin/sh\necho \"tool $A $B\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	x := wire.Exec{
		Env: []string{"PATH=" + bin + ":/usr/bin:/bin", "A=exec", "B=exec"},
		Commands: []wire.Command{
			{Argv: []string{"paddock-test-tool"}, Env: []string{"B=own"}},
			{Argv: []string{"cat"}},
		},
	}
	r := k.run(x)
	if got := r.stdout(1); got != "tool exec own\n" {
		t.Errorf("stdout %q (statuses %+v)", got, r.statuses)
	}
	// The same name is not found on the kernel's own PATH alone.
	r = k.run(pipeline(argv("paddock-test-tool")))
	if !reflect.DeepEqual(r.codes(), []int{127}) {
		t.Errorf("found without the exec's PATH: %+v", r.statuses)
	}
	// A script with no #! line runs under sh, as execvp runs it.
	script := filepath.Join(bin, "nobang")
	if err := os.WriteFile(script, []byte("echo bare $1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	r = k.run(pipeline(argv(script, "arg")))
	if r.stdout(0) != "bare arg\n" || r.codes()[0] != 0 {
		t.Errorf("script without #!: %+v %q", r.statuses, r.stdout(0))
	}
	// Only the exec's environment, with the host socket added.
	r = k.run(wire.Exec{Env: []string{"ONLY=1"}, Commands: []wire.Command{{Argv: []string{"/usr/bin/env"}}}})
	lines := strings.Split(strings.TrimSpace(r.stdout(0)), "\n")
	if len(lines) != 2 || lines[0] != "ONLY=1" || !strings.HasPrefix(lines[1], "PADDOCK_HOST_SOCKET=/") {
		t.Errorf("env: %q", lines)
	}
}

func TestCwd(t *testing.T) {
	k := startKernel(t, "")
	dir := t.TempDir()
	r := k.run(wire.Exec{Cwd: dir, Commands: []wire.Command{{Argv: []string{"pwd"}}}})
	if got := strings.TrimSpace(r.stdout(0)); got != dir {
		t.Errorf("pwd %q, want %q", got, dir)
	}
	x := wire.Exec{Cwd: filepath.Join(dir, "missing"), Commands: []wire.Command{{Argv: []string{"true"}}}}
	if r := k.run(x); r.err == nil || r.err.Code != "not_found" {
		t.Errorf("missing cwd: %+v", r.err)
	}
}

func TestRedirects(t *testing.T) {
	dir := t.TempDir()
	k := startKernel(t, "")
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	redir := func(fd int, op, path string) wire.Redirect { return wire.Redirect{FD: fd, Op: op, Path: path} }
	dup := func(fd, to int) wire.Redirect { return wire.Redirect{FD: fd, Op: wire.RedirDup, DupFD: to} }
	cmd := func(rs []wire.Redirect, a ...string) wire.Command { return wire.Command{Argv: a, Redirects: rs} }
	exe := func(cs ...wire.Command) wire.Exec { return wire.Exec{Cwd: dir, Commands: cs} }
	both := "echo out; echo err >&2"

	t.Run("out truncates, relative to cwd", func(t *testing.T) {
		k.t = t
		write("o", "old content that is longer\n")
		r := k.run(exe(cmd([]wire.Redirect{redir(1, ">", "o")}, "echo", "new")))
		if got := read("o"); got != "new\n" {
			t.Errorf("file %q", got)
		}
		if r.stdout(0) != "" {
			t.Errorf("stdout streamed %q", r.stdout(0))
		}
	})
	t.Run("append", func(t *testing.T) {
		k.t = t
		write("a", "one\n")
		k.run(exe(cmd([]wire.Redirect{redir(1, ">>", "a")}, "echo", "two")))
		if got := read("a"); got != "one\ntwo\n" {
			t.Errorf("file %q", got)
		}
	})
	t.Run("in", func(t *testing.T) {
		k.t = t
		write("i", "from file\n")
		r := k.run(exe(cmd([]wire.Redirect{redir(0, "<", "i")}, "cat")))
		if r.stdout(0) != "from file\n" {
			t.Errorf("stdout %q", r.stdout(0))
		}
	})
	t.Run("stdin is /dev/null", func(t *testing.T) {
		k.t = t
		r := k.run(exe(cmd(nil, "cat")))
		if r.stdout(0) != "" || r.codes()[0] != 0 {
			t.Errorf("cat: %q %+v", r.stdout(0), r.statuses)
		}
	})
	t.Run("2>&1 joins the stdout stream", func(t *testing.T) {
		k.t = t
		r := k.run(exe(cmd([]wire.Redirect{dup(2, 1)}, "sh", "-c", both)))
		if r.stdout(0) != "out\nerr\n" || r.stderr(0) != "" {
			t.Errorf("stdout %q stderr %q", r.stdout(0), r.stderr(0))
		}
	})
	t.Run("2>&1 in a pipeline goes down the pipe", func(t *testing.T) {
		k.t = t
		r := k.run(exe(cmd([]wire.Redirect{dup(2, 1)}, "sh", "-c", both), cmd(nil, "tr", "a-z", "A-Z")))
		if r.stdout(1) != "OUT\nERR\n" || r.stderr(0) != "" {
			t.Errorf("stdout %q stderr %q", r.stdout(1), r.stderr(0))
		}
	})
	t.Run("&> sends both to the file", func(t *testing.T) {
		k.t = t
		r := k.run(exe(cmd([]wire.Redirect{redir(1, ">", "both"), dup(2, 1)}, "sh", "-c", both)))
		if got := read("both"); got != "out\nerr\n" {
			t.Errorf("file %q", got)
		}
		if len(r.out) != 0 {
			t.Errorf("streamed %v", r.out)
		}
	})
	t.Run("order matters: 2>&1 >file", func(t *testing.T) {
		k.t = t
		r := k.run(exe(cmd([]wire.Redirect{dup(2, 1), redir(1, ">", "only-out")}, "sh", "-c", both)))
		if got := read("only-out"); got != "out\n" {
			t.Errorf("file %q", got)
		}
		if r.stdout(0) != "err\n" {
			t.Errorf("stdout stream %q", r.stdout(0))
		}
	})
	t.Run("2> file", func(t *testing.T) {
		k.t = t
		r := k.run(exe(cmd([]wire.Redirect{redir(2, ">", "e")}, "sh", "-c", both)))
		if got := read("e"); got != "err\n" || r.stdout(0) != "out\n" || r.stderr(0) != "" {
			t.Errorf("file %q stdout %q stderr %q", got, r.stdout(0), r.stderr(0))
		}
	})
	t.Run("a high descriptor", func(t *testing.T) {
		k.t = t
		k.run(exe(cmd([]wire.Redirect{redir(3, ">", "three")}, "sh", "-c", "echo on3 >&3")))
		if got := read("three"); got != "on3\n" {
			t.Errorf("file %q", got)
		}
	})
	t.Run("mode is 0666 less the umask", func(t *testing.T) {
		k.t = t
		k.run(exe(cmd([]wire.Redirect{redir(1, ">", "fresh")}, "true")))
		fi, err := os.Stat(filepath.Join(dir, "fresh"))
		if err != nil {
			t.Fatal(err)
		}
		umask := syscall.Umask(0)
		syscall.Umask(umask)
		if fi.Mode().Perm() != os.FileMode(0o666&^umask) {
			t.Errorf("mode %v, umask %o", fi.Mode().Perm(), umask)
		}
	})
	t.Run("a failed open: that command does not run, the others do", func(t *testing.T) {
		k.t = t
		r := k.run(exe(
			cmd(nil, "true"),
			cmd([]wire.Redirect{redir(0, "<", "missing")}, "sh", "-c", "echo ran > ran-marker"),
			cmd(nil, "echo", "last"),
		))
		if !reflect.DeepEqual(r.codes(), []int{0, 1, 0}) {
			t.Fatalf("codes %+v", r.statuses)
		}
		if !strings.Contains(r.stderr(1), "paddock-kernel: missing: No such file or directory") {
			t.Errorf("stderr %q", r.stderr(1))
		}
		if _, err := os.Stat(filepath.Join(dir, "ran-marker")); err == nil {
			t.Errorf("the command ran")
		}
		if r.stdout(2) != "last\n" {
			t.Errorf("last stdout %q", r.stdout(2))
		}
	})
	t.Run("a failed open reports where stderr goes then", func(t *testing.T) {
		k.t = t
		r := k.run(exe(cmd([]wire.Redirect{redir(2, ">", "errs"), redir(1, ">", "no/such/dir")}, "true")))
		if got := read("errs"); !strings.Contains(got, "no/such/dir: No such file or directory") {
			t.Errorf("errs file %q", got)
		}
		if len(r.out) != 0 || r.codes()[0] != 1 {
			t.Errorf("streamed %v, statuses %+v", r.out, r.statuses)
		}
	})
	t.Run("dup of a closed descriptor", func(t *testing.T) {
		k.t = t
		r := k.run(exe(cmd([]wire.Redirect{dup(1, 7)}, "true")))
		if r.codes()[0] != 1 || !strings.Contains(r.stderr(0), "7: Bad file descriptor") {
			t.Errorf("%+v %q", r.statuses, r.stderr(0))
		}
	})
}

func TestBadExecRequests(t *testing.T) {
	k := startKernel(t, "")
	for name, body := range map[string]any{
		"no commands":   wire.Exec{},
		"empty argv":    wire.Exec{Commands: []wire.Command{{}}},
		"two scripts":   wire.Exec{Shell: true, Commands: []wire.Command{{Argv: []string{"a"}}, {Argv: []string{"b"}}}},
		"bad op":        wire.Exec{Commands: []wire.Command{{Argv: []string{"true"}, Redirects: []wire.Redirect{{FD: 1, Op: "<>", Path: "x"}}}}},
		"fd range":      wire.Exec{Commands: []wire.Command{{Argv: []string{"true"}, Redirects: []wire.Redirect{{FD: 100000, Op: ">", Path: "x"}}}}},
		"env":           wire.Exec{Env: []string{"NOEQUALS"}, Commands: []wire.Command{{Argv: []string{"true"}}}},
		"not an object": "exec",
	} {
		t.Run(name, func(t *testing.T) {
			k.t = t
			if e := k.callErr(wire.TypeExec, body); e.Code != "bad_request" {
				t.Errorf("code %q", e.Code)
			}
		})
	}
}

// Stream frames arrive while the exec runs, not at its end.
func TestStreamsBeforeTheEnd(t *testing.T) {
	k := startKernel(t, "")
	id := k.startExec(pipeline(argv("sh", "-c", "echo early; exec sleep 60")))
	f, ok := k.next(id, 10*time.Second)
	if !ok || f.Event != wire.EventStream || string(f.Data) != "early\n" || f.FD != 1 {
		t.Fatalf("first frame %+v", f)
	}
	k.call(wire.TypeSignal, wire.Signal{Target: id, Signal: "KILL"}, nil)
	r := k.wait(id)
	if r.statuses[0].Signal != "KILL" {
		t.Errorf("status %+v", r.statuses)
	}
}

// Every byte of a large output arrives, in frames of at most 32 KiB.
func TestLargeOutput(t *testing.T) {
	const n = 100_000_000
	k := startKernel(t, "")
	id := k.startExec(pipeline(argv("head", "-c", "100000000", "/dev/zero")))
	total, frames := 0, 0
	for {
		f, ok := k.next(id, 60*time.Second)
		if !ok {
			t.Fatal("no reply")
		}
		if f.Event == wire.EventReply {
			if f.Status != wire.StatusOK {
				t.Fatalf("reply %v", f.Error)
			}
			break
		}
		if len(f.Data) > 32<<10 || f.FD != 1 {
			t.Fatalf("frame fd %d of %d bytes", f.FD, len(f.Data))
		}
		if i := strings.IndexFunc(string(f.Data), func(r rune) bool { return r != 0 }); i >= 0 {
			t.Fatalf("a non-zero byte at %d", total+i)
		}
		total += len(f.Data)
		frames++
	}
	if total != n {
		t.Errorf("got %d bytes, want %d", total, n)
	}
	t.Logf("%d bytes in %d frames", total, frames)
}

// yes | head -n 3 ends: the writer dies of SIGPIPE; and INT ends a sleep. Both hold when the
// kernel itself was started with SIGPIPE, SIGINT and SIGQUIT ignored (as a shell starts a
// background job): children get the default dispositions.
func TestChildrenGetDefaultSignals(t *testing.T) {
	for name, prefix := range map[string][]string{
		"plain":               nil,
		"kernel ignores them": {"sh", "-c", `trap "" PIPE INT QUIT; exec "$0" "$@"`},
	} {
		t.Run(name, func(t *testing.T) {
			k := startKernel(t, "", prefix...)
			r := k.run(pipeline(argv("yes"), argv("head", "-n", "3")))
			if r.stdout(1) != "y\ny\ny\n" {
				t.Errorf("stdout %q", r.stdout(1))
			}
			if r.statuses[0].Signal != "PIPE" || r.statuses[0].Code != 141 || r.statuses[1].Code != 0 {
				t.Errorf("statuses %+v", r.statuses)
			}
			for _, sig := range []string{"INT", "QUIT"} {
				id := k.startExec(pipeline(argv("sleep", "300")))
				k.call(wire.TypeSignal, wire.Signal{Target: id, Signal: sig}, nil)
				if r := k.wait(id); r.statuses[0].Signal != sig {
					t.Errorf("%s: status %+v", sig, r.statuses)
				}
			}
		})
	}
}

// Several execs run at once: the first ends only after the second has run.
func TestConcurrentExecs(t *testing.T) {
	k := startKernel(t, "")
	dir := t.TempDir()
	flag := filepath.Join(dir, "flag")
	first := k.startExec(pipeline(argv("sh", "-c", `while [ ! -e "$0" ]; do sleep 0.01; done; echo saw it`, flag)))
	second := k.run(pipeline(argv("touch", flag)))
	if second.codes()[0] != 0 {
		t.Fatalf("touch: %+v", second.statuses)
	}
	if r := k.wait(first); r.stdout(0) != "saw it\n" {
		t.Errorf("first: %q %+v", r.stdout(0), r.statuses)
	}

	// Many at once, each output under its own id.
	ids := make(map[string]string)
	for i := range 20 {
		w := strings.Repeat(string(rune('a'+i)), 3)
		ids[k.startExec(pipeline(argv("sh", "-c", "sleep 0.05; echo "+w)))] = w + "\n"
	}
	for id, want := range ids {
		if r := k.wait(id); r.stdout(0) != want {
			t.Errorf("exec %s: %q, want %q", id, r.stdout(0), want)
		}
	}
}
