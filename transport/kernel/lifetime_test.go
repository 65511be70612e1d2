//go:build linux

package kernel_test

import (
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/paddockhq/paddock/transport/wire"
)

// grandchildren forks two background sleeps that write their pids to a file, then waits.
const grandchildren = `sleep 300 & echo $! >> "$0"; sleep 300 & echo $! >> "$0"; echo $$ >> "$0"; wait`

// foreground writes its pid, then becomes a sleep: every process of its pipeline is in the
// foreground (background jobs of sh ignore INT and QUIT, as POSIX says).
const foreground = `echo $$ >> "$0"; exec sleep 300`

func TestSignalKillsTheGroup(t *testing.T) {
	for _, sig := range []string{"TERM", "KILL", "INT", "HUP", "QUIT"} {
		t.Run(sig, func(t *testing.T) {
			k := startKernel(t, "")
			pidFile := filepath.Join(t.TempDir(), "pids")
			script, n := grandchildren, 3
			if sig != "TERM" && sig != "KILL" {
				script, n = foreground, 1
			}
			id := k.startExec(pipeline(argv("sh", "-c", script, pidFile), argv("cat")))
			pids := pidsIn(t, pidFile, n)
			killLeft(t, &pids)
			k.call(wire.TypeSignal, wire.Signal{Target: id, Signal: sig}, nil)
			r := k.wait(id)
			// sh and cat are both in the group.
			if r.statuses[0].Signal != sig || r.statuses[1].Signal != sig {
				t.Errorf("statuses %+v", r.statuses)
			}
			gone(t, pids)
		})
	}
}

// A group that ignores TERM gets KILL after the grace.
func TestTermThenKill(t *testing.T) {
	k := startKernel(t, "")
	pidFile := filepath.Join(t.TempDir(), "pids")
	id := k.startExec(pipeline(argv("sh", "-c", `trap "" TERM; `+grandchildren, pidFile)))
	pids := pidsIn(t, pidFile, 3)
	killLeft(t, &pids)
	start := time.Now()
	k.call(wire.TypeSignal, wire.Signal{Target: id, Signal: "TERM", GraceMillis: 300}, nil)
	r := k.wait(id)
	if r.statuses[0].Signal != "KILL" {
		t.Errorf("status %+v, want KILL after the grace", r.statuses)
	}
	if d := time.Since(start); d < 300*time.Millisecond {
		t.Errorf("ended after %v, before the grace", d)
	}
	gone(t, pids)
}

func TestSignalErrors(t *testing.T) {
	k := startKernel(t, "")
	if e := k.callErr(wire.TypeSignal, wire.Signal{Target: "nothing", Signal: "TERM"}); e.Code != "not_found" {
		t.Errorf("unknown exec: %v", e)
	}
	done := k.startExec(pipeline(argv("true")))
	k.wait(done)
	if e := k.callErr(wire.TypeSignal, wire.Signal{Target: done, Signal: "TERM"}); e.Code != "not_found" {
		t.Errorf("finished exec: %v", e)
	}
	running := k.startExec(pipeline(argv("sleep", "60")))
	if e := k.callErr(wire.TypeSignal, wire.Signal{Target: running, Signal: "USR1"}); e.Code != "bad_request" {
		t.Errorf("bad signal: %v", e)
	}
	// A signal sent right behind its exec finds it.
	k.call(wire.TypeSignal, wire.Signal{Target: running, Signal: "sigkill"}, nil)
	if r := k.wait(running); r.statuses[0].Signal != "KILL" {
		t.Errorf("status %+v", r.statuses)
	}
}

// Closing stdin ends the kernel, and with it every process it started: grandchildren, an
// orphan that double-forked away, one that moved to its own session.
func TestStdinEOFLeavesNothing(t *testing.T) {
	k := startKernel(t, "")
	h := k.hello()
	pidFile := filepath.Join(t.TempDir(), "pids")
	k.startExec(pipeline(argv("sh", "-c", grandchildren, pidFile)))
	k.startExec(pipeline(argv("sh", "-c", `(sleep 300 & echo $! >> "$0") ; setsid sleep 300 & echo $! >> "$0"; wait`, pidFile)))
	// A process that ignores TERM needs the KILL.
	k.startExec(pipeline(argv("sh", "-c", `trap "" TERM; sleep 300 & echo $! >> "$0"; wait`, pidFile)))
	pids := pidsIn(t, pidFile, 6)
	killLeft(t, &pids)
	for _, p := range pids {
		if !alive(p) {
			t.Fatalf("pid %d not running before the end", p)
		}
	}
	if err := k.closeAndWait(); err != nil {
		t.Errorf("kernel exit: %v", err)
	}
	gone(t, pids)
	if _, err := os.Stat(filepath.Dir(h.HostSocket)); !os.IsNotExist(err) {
		t.Errorf("socket directory left: %v", err)
	}
}

func TestShutdownRequest(t *testing.T) {
	k := startKernel(t, "")
	pidFile := filepath.Join(t.TempDir(), "pids")
	running := k.startExec(pipeline(argv("sh", "-c", grandchildren, pidFile)))
	pids := pidsIn(t, pidFile, 3)
	killLeft(t, &pids)
	k.call(wire.TypeShutdown, nil, nil)
	// The running exec replies, its processes ended.
	if r := k.wait(running); r.statuses[0].Signal != "TERM" {
		t.Errorf("running exec: %+v %v", r.statuses, r.err)
	}
	select {
	case <-k.exited:
		if k.err != nil {
			t.Errorf("kernel exit: %v", k.err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("kernel still running after shutdown")
	}
	gone(t, pids)
}

func TestSigtermAndSighupEnd(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGHUP} {
		t.Run(sig.String(), func(t *testing.T) {
			k := startKernel(t, "")
			pidFile := filepath.Join(t.TempDir(), "pids")
			k.startExec(pipeline(argv("sh", "-c", grandchildren, pidFile)))
			pids := pidsIn(t, pidFile, 3)
			killLeft(t, &pids)
			k.cmd.Process.Signal(sig)
			select {
			case <-k.exited:
				if k.err != nil {
					t.Errorf("kernel exit: %v", k.err)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("kernel still running")
			}
			gone(t, pids)
		})
	}
}

// The kernel leads its own process group.
func TestOwnProcessGroup(t *testing.T) {
	k := startKernel(t, "")
	pid := k.hello().PID
	pgid, err := syscall.Getpgid(pid)
	if err != nil {
		t.Fatal(err)
	}
	if pgid != pid {
		t.Errorf("kernel %d in process group %d", pid, pgid)
	}
}

// Started as a session leader, where setpgid is refused, the kernel still serves.
func TestSessionLeaderKernel(t *testing.T) {
	k := startKernel(t, "", "setsid", "--wait")
	r := k.run(pipeline(argv("true")))
	if r.codes()[0] != 0 {
		t.Errorf("statuses %+v", r.statuses)
	}
}

// Every process of a pipeline is in one process group, not the kernel's; even when the
// first ends at once, the others join its group.
func TestOnePipelineOneGroup(t *testing.T) {
	k := startKernel(t, "")
	kpid := k.hello().PID
	pgid := `cut -d" " -f5 /proc/self/stat`
	r := k.run(pipeline(argv("sh", "-c", pgid), argv("sh", "-c", "cat; "+pgid), argv("cat")))
	lines := strings.Fields(r.stdout(2))
	if len(lines) != 2 || lines[0] != lines[1] || lines[0] == strconv.Itoa(kpid) {
		t.Errorf("process groups %q, kernel %d", lines, kpid)
	}
	ids := make([]string, 100)
	for i := range ids {
		ids[i] = k.startExec(pipeline(argv("true"), argv("true"), argv("true")))
	}
	for _, id := range ids {
		if r := k.wait(id); !reflect.DeepEqual(r.codes(), []int{0, 0, 0}) {
			t.Fatalf("true|true|true: %+v", r.statuses)
		}
	}
}
