//go:build linux

package kernel_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/paddockhq/paddock/transport/wire"
)

// judged is an exec of a script run to its end, with every judge it asked.
type judged struct {
	*ran
	judges []wire.Judge
}

// runJudged runs x, answering each judge with answer, and collects what it gave.
func (k *kern) runJudged(x wire.Exec, answer func(wire.Judge) wire.Verdict) *judged {
	k.t.Helper()
	return k.waitJudged(k.startExec(x), answer)
}

// waitJudged waits for exec id's reply, answering each judge with answer.
func (k *kern) waitJudged(id string, answer func(wire.Judge) wire.Verdict) *judged {
	k.t.Helper()
	r := &judged{ran: &ran{id: id, out: make(map[[2]int][]byte)}}
	for {
		f, ok := k.next(id, 30*time.Second)
		if !ok {
			k.t.Fatalf("exec %s: no reply; judges %v", id, r.judges)
		}
		switch f.Event {
		case wire.EventStream:
			key := [2]int{f.Step, f.FD}
			r.out[key] = append(r.out[key], f.Data...)
		case wire.EventJudge:
			var j wire.Judge
			if err := json.Unmarshal(f.Body, &j); err != nil {
				k.t.Fatalf("judge body: %v", err)
			}
			r.judges = append(r.judges, j)
			v := answer(j)
			k.send(&wire.Frame{Event: wire.EventVerdict, ID: id, Step: f.Step, Body: mustJSON(k.t, v)})
		case wire.EventReply:
			if f.Status != wire.StatusOK {
				r.err = f.Error
				return r
			}
			var res wire.ExecResult
			if err := json.Unmarshal(f.Body, &res); err != nil {
				k.t.Fatalf("exec reply: %v", err)
			}
			r.statuses = res.Statuses
			return r
		default:
			k.t.Fatalf("exec %s: unexpected %s frame", id, f.Event)
		}
	}
}

func runAll(wire.Judge) wire.Verdict { return wire.Verdict{Run: true} }

// words is each judge as one line: its kind and words, or an open's op and path.
func (r *judged) words() []string {
	var out []string
	for _, j := range r.judges {
		if j.Kind == wire.JudgeOpen {
			out = append(out, "open "+j.Op+" "+filepath.Base(j.Path))
			continue
		}
		out = append(out, j.Kind+" "+strings.Join(j.Argv, " "))
	}
	return out
}

func script(src string, dir string) wire.Exec {
	return wire.Exec{Script: src, Cwd: dir, Env: []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir}}
}

// Every command a script runs is judged with the words it really runs with, however they
// are built: loops, functions, groups, eval, command substitutions, inner shells.
func TestScriptJudgesEveryCommand(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "a"), []byte("A\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "b"), []byte("B\n"), 0o644)
	k := startKernel(t, "")
	for _, tc := range []struct {
		name, src, out string
		want           []string // the judges, in order, that must appear
	}{
		{"loop", `for f in a b; do cat "$f"; done`, "A\nB\n", []string{"program cat a", "program cat b"}},
		{"built words", `for f in ~/x; do cat ${f%x}a; done`, "A\n", []string{"program cat " + dir + "/a"}},
		{"group with cd", `{ cd /; cat "$HOME/b"; }`, "B\n", []string{"builtin cd /", "program cat " + dir + "/b"}},
		{"function", `f() { cat "$1"; }; f a`, "A\n", []string{"program cat a"}},
		{"eval", `x='cat b'; eval "$x"`, "B\n", []string{"builtin eval cat b", "program cat b"}},
		{"command substitution", `cat $(printf a)`, "A\n", []string{"builtin printf a", "program cat a"}},
		{"bash -c", `bash -c 'cat "$1"' sh b`, "B\n", []string{"program bash -c cat \"$1\" sh b", "program cat b"}},
		{"sh reading its input", `echo 'cat a' | sh`, "A\n", []string{"builtin echo cat a", "program sh", "program cat a"}},
		{"redirection", `echo hi > out; cat < out`, "hi\n", []string{"open > out", "builtin echo hi", "open < out", "program cat"}},
		{"subshell and pipeline", `(cat a) | tr A-Z a-z`, "a\n", []string{"program cat a", "program tr A-Z a-z"}},
		{"command builtin", `command cat a; builtin echo x`, "A\nx\n", []string{"program cat a", "builtin builtin echo x"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := k.runJudged(script(tc.src, dir), runAll)
			if r.err != nil || r.codes()[0] != 0 {
				t.Fatalf("%v %v: %q %q", r.err, r.statuses, r.stdout(0), r.stderr(0))
			}
			if r.stdout(0) != tc.out {
				t.Errorf("stdout %q, want %q", r.stdout(0), tc.out)
			}
			got := r.words()
			for _, w := range tc.want {
				if !slices.Contains(got, w) {
					t.Errorf("no judge %q among %q", w, got)
				}
			}
		})
	}
}

// What runs is what the verdict says: a program runs with the verdict's words and
// environment, never the ones it was judged by when the verdict names others. So no program
// a script starts, by any way a shell has, runs unjudged: each is replaced here by one that
// leaves a marker named for its judge.
func TestScriptRunsOnlyWhatTheVerdictSays(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "noshebang"), []byte("touch plain-noshebang\n"), 0o755)
	os.WriteFile(filepath.Join(dir, "inner.sh"), []byte("touch plain-inner\n"), 0o644)
	k := startKernel(t, "")
	src := `touch plain-1; command touch plain-2; x=$(touch plain-3); (touch plain-4) | cat;
bash -c 'touch plain-5'; sh inner.sh; ./noshebang; eval 'touch plain-6'; f() { touch plain-7; }; f
exec touch plain-8`
	n := 0
	r := k.runJudged(script(src, dir), func(j wire.Judge) wire.Verdict {
		if j.Kind != wire.JudgeProgram || j.Argv[0] != "touch" || !strings.HasPrefix(j.Argv[1], "plain-") {
			return wire.Verdict{Run: true}
		}
		n++
		return wire.Verdict{Run: true, Argv: []string{"sh", "-c", `touch "judged-$N"`}, Env: []string{"N=" + strings.TrimPrefix(j.Argv[1], "plain-")}}
	})
	if r.err != nil {
		t.Fatalf("%v: %q", r.err, r.stderr(0))
	}
	ents, _ := os.ReadDir(dir)
	var made []string
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), "plain-") || strings.HasPrefix(e.Name(), "judged-") {
			made = append(made, e.Name())
		}
	}
	want := []string{"judged-1", "judged-2", "judged-3", "judged-4", "judged-5", "judged-6", "judged-7", "judged-8", "judged-inner", "judged-noshebang"}
	if !slices.Equal(made, want) {
		t.Errorf("files made %v, want %v (stderr %q)", made, want, r.stderr(0))
	}
	if n != len(want) {
		t.Errorf("%d touch programs judged, want %d", n, len(want))
	}
}

// A refusal ends the script at once: the refused command does not run, nor does anything
// after it, and the script's status is 126.
func TestScriptRefusalStops(t *testing.T) {
	dir := t.TempDir()
	k := startKernel(t, "")
	for _, tc := range []struct{ name, src, refuse string }{
		{"program", `touch before; cat secret; touch after`, "cat"},
		{"in a loop", `for i in 1 2 3; do touch "n$i"; cat secret; done; touch after`, "cat"},
		{"an open", `touch before; echo x > hook; touch after`, "hook"},
		{"a builtin", `touch before; echo ~/.ssh/id_rsa; touch after`, "echo"},
		{"in a pipeline", `touch before; cat secret | wc -c; touch after`, "cat"},
		{"in an inner shell", `touch before; bash -c 'cat secret; touch inner'; touch after`, "cat"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, f := range []string{"before", "after", "inner", "n1", "n2"} {
				os.Remove(filepath.Join(dir, f))
			}
			r := k.runJudged(script(tc.src, dir), func(j wire.Judge) wire.Verdict {
				if (len(j.Argv) > 0 && j.Argv[0] == tc.refuse) || filepath.Base(j.Path) == tc.refuse {
					return wire.Verdict{Code: "denied", Message: "no"}
				}
				return wire.Verdict{Run: true}
			})
			if r.err != nil || r.statuses[0].Code != 126 {
				t.Fatalf("%v %+v %q", r.err, r.statuses, r.stderr(0))
			}
			for _, f := range []string{"after", "inner", "n2", "hook"} {
				if _, err := os.Stat(filepath.Join(dir, f)); err == nil {
					t.Errorf("%s made after the refusal", f)
				}
			}
			if tc.name != "in a loop" {
				if _, err := os.Stat(filepath.Join(dir, "before")); err != nil {
					t.Errorf("the command before the refusal did not run")
				}
			}
		})
	}
}

// A signal to a script's exec ends the script and every program it started.
func TestScriptSignal(t *testing.T) {
	dir := t.TempDir()
	k := startKernel(t, "")
	id := k.startExec(script(`echo $BASHPID > /dev/null; sleep 100 & sleep 100; touch after`, dir))
	started := 0
	for started < 2 {
		f, ok := k.next(id, 20*time.Second)
		if !ok {
			t.Fatal("no judge")
		}
		if f.Event != wire.EventJudge {
			continue
		}
		var j wire.Judge
		json.Unmarshal(f.Body, &j)
		if j.Kind == wire.JudgeProgram {
			started++
		}
		k.send(&wire.Frame{Event: wire.EventVerdict, ID: id, Step: f.Step, Body: mustJSON(t, wire.Verdict{Run: true})})
	}
	waitFor(t, 10*time.Second, "two sleeps", func() bool { return len(sleepers(t)) >= 2 })
	k.call(wire.TypeSignal, wire.Signal{Target: id, Signal: "TERM"}, nil)
	// The shell and its programs get TERM at once: on a loaded machine the shell may see its
	// sleep end before its own TERM lands, and ask about the next command. That command is
	// refused here, and the script must end all the same.
	r := k.waitJudged(id, func(wire.Judge) wire.Verdict { return wire.Verdict{Run: false} })
	if r.codes()[0] == 0 {
		t.Errorf("status %v after TERM", r.statuses)
	}
	if _, err := os.Stat(filepath.Join(dir, "after")); err == nil {
		t.Error("the script went on after TERM")
	}
	waitFor(t, 10*time.Second, "the sleeps to end", func() bool { return len(sleepers(t)) == 0 })
}

// sleepers lists the "sleep 100" processes of this test's kernels.
func sleepers(t *testing.T) []string {
	var out []string
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err == nil && string(b) == "sleep\x00100\x00" {
			st, _ := os.ReadFile("/proc/" + e.Name() + "/stat")
			if !strings.Contains(string(st), ") Z ") {
				out = append(out, e.Name())
			}
		}
	}
	return out
}

// $! is the pid of a background program, as a forking shell's is: kill and wait take it. A
// background function or builtin starts no program of its own, and the script goes on.
func TestScriptBackgroundPid(t *testing.T) {
	dir := t.TempDir()
	k := startKernel(t, "")
	for _, tc := range []struct{ name, src, out string }{
		{"kill", `sleep 30 & p=$!; [ -d /proc/$p ] && echo alive; kill $p; wait $p; echo $?`, "alive\n143\n"},
		{"wait", `(exit 3) & wait $!; echo $?; sh -c 'exit 4' & wait $!; echo $?; false & wait $!; echo $?`, "3\n4\n1\n"},
		{"function", `mkfifo gate; f() { read x < gate; echo f; }; f & echo started; echo go > gate; wait`, "started\nf\n"},
		{"builtin", `echo bg & wait $!; echo $?`, "bg\n0\n"},
		{"the process", `sleep 30 & p=$!; tr '\0' ' ' < /proc/$p/cmdline; echo; kill $p`, "sleep 30 \n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := k.runJudged(script(tc.src, dir), runAll)
			if r.err != nil || r.stdout(0) != tc.out {
				t.Errorf("%v %v: stdout %q, want %q; stderr %q", r.err, r.statuses, r.stdout(0), tc.out, r.stderr(0))
			}
		})
	}
}

func TestScriptBackgroundSubshellPid(t *testing.T) {
	dir := t.TempDir()
	k := startKernel(t, "")
	r := k.runJudged(script(`(sleep 30) & p=$!; { sleep 30; } & q=$!; kill $p $q; wait $p; echo $?; wait $q; echo $?`, dir), runAll)
	if r.err != nil || r.stdout(0) != "143\n143\n" {
		t.Errorf("%v %v: stdout %q; stderr %q", r.err, r.statuses, r.stdout(0), r.stderr(0))
	}
}
