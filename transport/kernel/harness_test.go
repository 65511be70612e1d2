//go:build linux

package kernel_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/paddockhq/paddock/internal/peer"
	"github.com/paddockhq/paddock/transport/wire"
)

// kernelBin is the real paddock-kernel binary, built once by TestMain.
var kernelBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "paddock-kernel-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	kernelBin = filepath.Join(dir, "paddock-kernel")
	if err := peer.BuildStatic(".", "github.com/paddockhq/paddock/cmd/paddock-kernel", kernelBin); err != nil {
		fmt.Fprintf(os.Stderr, "building paddock-kernel: %v\n", err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// kern is a running kernel driven over its stdin and stdout, the test playing the host.
type kern struct {
	t      testing.TB
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stderr *syncBuffer
	exited chan struct{} // closed when the process has ended and been waited for
	err    error         // the process's end; read after exited

	wmu sync.Mutex
	w   *wire.Writer

	mu       sync.Mutex
	cond     *sync.Cond
	queues   map[string][]wire.Frame // frames of each id, not yet taken; guarded by mu
	hostReqs []wire.Frame            // host requests not yet taken; guarded by mu
	eof      bool                    // the kernel's stdout ended; guarded by mu
	seq      int                     // guarded by mu
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// startKernel starts the kernel binary in dir ("" for the test's own) through prefix (argv
// run before the kernel, e.g. a shell that changes signal dispositions), and stops it at the
// end of the test.
func startKernel(t testing.TB, dir string, prefix ...string) *kern {
	t.Helper()
	argv := append(append([]string{}, prefix...), kernelBin, "-shutdown-grace", "200ms")
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = dir
	k := &kern{t: t, cmd: cmd, stderr: &syncBuffer{}, exited: make(chan struct{}), queues: make(map[string][]wire.Frame)}
	k.cond = sync.NewCond(&k.mu)
	cmd.Stderr = k.stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	k.stdin, k.w = in, wire.NewWriter(in)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		k.stdin.Close()
		select {
		case <-k.exited:
		case <-time.After(10 * time.Second):
			t.Errorf("kernel still running 10s after its stdin closed; killing it")
			syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			cmd.Process.Kill()
			<-k.exited
		}
		if t.Failed() {
			t.Logf("kernel stderr:\n%s", k.stderr.String())
		}
	})
	go k.read(out)
	return k
}

// read routes every frame from the kernel: host requests to their queue, the rest by id.
func (k *kern) read(out io.Reader) {
	lines := wire.NewReader(out)
	for {
		line, err := lines.Next()
		if err != nil {
			break
		}
		f, err := wire.Decode(line.Bytes)
		if err != nil {
			k.t.Errorf("kernel wrote a line that is not a frame: %v: %.200q", err, line.Head)
			continue
		}
		k.mu.Lock()
		if f.Event == wire.EventHostRequest {
			k.hostReqs = append(k.hostReqs, f)
		} else {
			k.queues[f.ID] = append(k.queues[f.ID], f)
		}
		k.cond.Broadcast()
		k.mu.Unlock()
	}
	k.err = k.cmd.Wait()
	k.mu.Lock()
	k.eof = true
	k.cond.Broadcast()
	k.mu.Unlock()
	close(k.exited)
}

// send writes one frame to the kernel.
func (k *kern) send(f *wire.Frame) {
	k.t.Helper()
	k.wmu.Lock()
	defer k.wmu.Unlock()
	if err := k.w.Write(f); err != nil {
		k.t.Fatalf("writing to the kernel: %v", err)
	}
}

// sendLine writes raw bytes and a newline.
func (k *kern) sendLine(b []byte) {
	k.t.Helper()
	k.wmu.Lock()
	defer k.wmu.Unlock()
	if _, err := k.stdin.Write(append(b, '\n')); err != nil {
		k.t.Fatalf("writing to the kernel: %v", err)
	}
}

// request sends a request and returns its id.
func (k *kern) request(typ string, body any) string {
	k.t.Helper()
	k.mu.Lock()
	k.seq++
	id := "r" + strconv.Itoa(k.seq)
	k.mu.Unlock()
	var raw json.RawMessage
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			k.t.Fatal(err)
		}
		raw = b
	}
	k.send(&wire.Frame{Event: wire.EventRequest, ID: id, Type: typ, Body: raw})
	return id
}

// next waits for the next frame with id, at most d. ok is false on timeout or the kernel's end.
func (k *kern) next(id string, d time.Duration) (wire.Frame, bool) {
	// The deadline is set before the timer that wakes the wait at it: set after, it could
	// fall past the timer's one wake-up and the wait never end.
	deadline := time.Now().Add(d)
	timer := time.AfterFunc(d, func() {
		k.mu.Lock()
		k.cond.Broadcast()
		k.mu.Unlock()
	})
	defer timer.Stop()
	k.mu.Lock()
	defer k.mu.Unlock()
	for len(k.queues[id]) == 0 {
		if k.eof || !time.Now().Before(deadline) {
			return wire.Frame{}, false
		}
		k.cond.Wait()
	}
	f := k.queues[id][0]
	k.queues[id] = k.queues[id][1:]
	return f, true
}

// guard bounds a wait for what must come: a hang detector, never part of what is tested,
// and generous (race-built kernels started beside a busy machine's other work take seconds).
const guard = 2 * time.Minute

// hostRequest waits for the next host request, at most d.
func (k *kern) hostRequest(d time.Duration) (wire.Frame, bool) {
	// The deadline is set before the timer that wakes the wait at it: set after, it could
	// fall past the timer's one wake-up and the wait never end.
	deadline := time.Now().Add(d)
	timer := time.AfterFunc(d, func() {
		k.mu.Lock()
		k.cond.Broadcast()
		k.mu.Unlock()
	})
	defer timer.Stop()
	k.mu.Lock()
	defer k.mu.Unlock()
	for len(k.hostReqs) == 0 {
		if k.eof || !time.Now().Before(deadline) {
			return wire.Frame{}, false
		}
		k.cond.Wait()
	}
	f := k.hostReqs[0]
	k.hostReqs = k.hostReqs[1:]
	return f, true
}

// reply waits for the reply to id, failing the test on a stream frame or on timeout.
func (k *kern) reply(id string) wire.Frame {
	k.t.Helper()
	f, ok := k.next(id, guard)
	if !ok {
		k.t.Fatalf("no reply to %s", id)
	}
	if f.Event != wire.EventReply {
		k.t.Fatalf("frame %s before the reply to %s", f.Event, id)
	}
	return f
}

// call sends a request and decodes its ok reply into v.
func (k *kern) call(typ string, body, v any) {
	k.t.Helper()
	f := k.reply(k.request(typ, body))
	if f.Status != wire.StatusOK {
		k.t.Fatalf("%s: %s %v", typ, f.Status, f.Error)
	}
	if v != nil {
		if err := json.Unmarshal(f.Body, v); err != nil {
			k.t.Fatalf("%s reply body: %v", typ, err)
		}
	}
}

// callErr sends a request that must fail and returns its error.
func (k *kern) callErr(typ string, body any) *wire.Error {
	k.t.Helper()
	f := k.reply(k.request(typ, body))
	if f.Status != wire.StatusError || f.Error == nil {
		k.t.Fatalf("%s: want an error reply, got %s %s", typ, f.Status, f.Body)
	}
	return f.Error
}

// ran is what one exec gave: its statuses and each stream's bytes.
type ran struct {
	id       string
	statuses []wire.ExitStatus
	err      *wire.Error
	out      map[[2]int][]byte // by {step, fd}
	frames   int
}

func (r *ran) stdout(step int) string { return string(r.out[[2]int{step, 1}]) }
func (r *ran) stderr(step int) string { return string(r.out[[2]int{step, 2}]) }

// codes is the exit codes of an exec.
func (r *ran) codes() []int {
	var c []int
	for _, s := range r.statuses {
		c = append(c, s.Code)
	}
	return c
}

// startExec sends an exec; a nil Env gets the test's PATH.
func (k *kern) startExec(x wire.Exec) string {
	k.t.Helper()
	if x.Env == nil {
		x.Env = []string{"PATH=" + os.Getenv("PATH")}
	}
	return k.request(wire.TypeExec, x)
}

// wait collects an exec's stream frames up to its reply.
func (k *kern) wait(id string) *ran {
	k.t.Helper()
	r := &ran{id: id, out: make(map[[2]int][]byte)}
	for {
		f, ok := k.next(id, guard)
		if !ok {
			k.t.Fatalf("exec %s: no reply", id)
		}
		switch f.Event {
		case wire.EventStream:
			if len(f.Data) > 32<<10 {
				k.t.Errorf("stream frame of %d bytes, over 32 KiB", len(f.Data))
			}
			key := [2]int{f.Step, f.FD}
			r.out[key] = append(r.out[key], f.Data...)
			r.frames++
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

// run runs an exec to its end.
func (k *kern) run(x wire.Exec) *ran {
	k.t.Helper()
	return k.wait(k.startExec(x))
}

// pipeline builds an exec of commands, each an argv.
func pipeline(argvs ...[]string) wire.Exec {
	var x wire.Exec
	for _, a := range argvs {
		x.Commands = append(x.Commands, wire.Command{Argv: a})
	}
	return x
}

func argv(a ...string) []string { return a }

// shell is an exec of one script run by bash -c.
func shell(script string) wire.Exec {
	return wire.Exec{Shell: true, Commands: []wire.Command{{Argv: []string{script}}}}
}

// waitFor polls cond until it holds, failing the test after d.
func waitFor(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after %v: %s", d, what)
		}
		<-tick.C
	}
}

// pidsIn reads the pids a script wrote to a file, once it holds n of them.
func pidsIn(t testing.TB, path string, n int) []int {
	t.Helper()
	var pids []int
	waitFor(t, 10*time.Second, fmt.Sprintf("%s to hold %d pids", path, n), func() bool {
		b, _ := os.ReadFile(path)
		pids = pids[:0]
		sc := bufio.NewScanner(bytes.NewReader(b))
		for sc.Scan() {
			if p, err := strconv.Atoi(strings.TrimSpace(sc.Text())); err == nil {
				pids = append(pids, p)
			}
		}
		return len(pids) >= n && bytes.HasSuffix(b, []byte("\n"))
	})
	return pids
}

// alive reports whether a process exists, zombies included.
func alive(pid int) bool {
	_, err := os.Stat("/proc/" + strconv.Itoa(pid))
	return err == nil
}

// gone waits for every pid to have left the process table.
func gone(t testing.TB, pids []int) {
	t.Helper()
	waitFor(t, 10*time.Second, fmt.Sprintf("processes %v to be gone", pids), func() bool {
		for _, p := range pids {
			if alive(p) {
				return false
			}
		}
		return true
	})
}

// killLeft kills pids a failed test left behind.
func killLeft(t testing.TB, pids *[]int) {
	t.Cleanup(func() {
		for _, p := range *pids {
			syscall.Kill(p, syscall.SIGKILL)
		}
	})
}

func mustJSON(t testing.TB, v any) json.RawMessage {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// hello pings the kernel.
func (k *kern) hello() wire.Hello {
	k.t.Helper()
	var h wire.Hello
	k.call(wire.TypePing, nil, &h)
	return h
}

// closeAndWait closes the kernel's stdin and waits for it to exit.
func (k *kern) closeAndWait() error {
	k.t.Helper()
	k.stdin.Close()
	select {
	case <-k.exited:
		return k.err
	case <-time.After(10 * time.Second):
		k.t.Fatal("kernel still running 10s after its stdin closed")
		return nil
	}
}
