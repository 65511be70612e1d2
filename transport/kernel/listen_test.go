//go:build linux

package kernel_test

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/paddockhq/paddock/transport/wire"
)

// listening is a kernel started with -listen, and the socket it serves.
type listening struct {
	sock string
	key  string // the key it was started with
	cmd  *exec.Cmd
	done chan struct{}
}

func startListening(t *testing.T, key string, flags ...string) *listening {
	t.Helper()
	dir, err := os.MkdirTemp("", "pk-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	keyFile := filepath.Join(dir, "key")
	if err := os.WriteFile(keyFile, []byte(key), 0o600); err != nil {
		t.Fatal(err)
	}
	l := &listening{sock: filepath.Join(dir, "kernel.sock"), key: key, done: make(chan struct{})}
	l.cmd = exec.Command(kernelBin, append([]string{"-listen", l.sock, "-key-file", keyFile, "-tmpdir", dir}, flags...)...)
	l.cmd.Stderr = os.Stderr
	if err := l.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { l.cmd.Wait(); close(l.done) }()
	t.Cleanup(func() {
		l.cmd.Process.Kill()
		<-l.done
	})
	waitFor(t, 10*time.Second, "the kernel's socket", func() bool {
		_, err := os.Stat(l.sock)
		return err == nil
	})
	if _, err := os.Stat(keyFile); !os.IsNotExist(err) {
		t.Errorf("the key file is still there: %v", err)
	}
	return l
}

// hostConn is one host connection to a listening kernel.
type hostConn struct {
	t      *testing.T
	c      net.Conn
	r      *wire.Reader
	w      *wire.Writer
	resume wire.Resume
}

// connect attaches with key and reads the resume frame.
func (l *listening) connect(t *testing.T, key string) *hostConn {
	t.Helper()
	c, err := net.Dial("unix", l.sock)
	if err != nil {
		t.Fatal(err)
	}
	h := &hostConn{t: t, c: c, r: wire.NewReader(c), w: wire.NewWriter(c)}
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	handshake(t, c, h.r, l.key, key)
	f, ok := h.next()
	if !ok || f.Event != wire.EventResume {
		t.Fatalf("first frame: %+v %v", f, ok)
	}
	if err := json.Unmarshal(f.Body, &h.resume); err != nil {
		t.Fatal(err)
	}
	return h
}

// handshake is the host's half of an attach on c with key, as transport.Attach makes it: a
// nonce, the kernel's challenge, whose proof must hold kernelKey (the one the kernel was
// started with), then the host's proof with key. The resume frame, if any, comes next on r.
func handshake(t *testing.T, c net.Conn, r *wire.Reader, kernelKey, key string) {
	t.Helper()
	w := wire.NewWriter(c)
	hn := wire.NewNonce()
	body, _ := json.Marshal(wire.Attach{Nonce: hn})
	if err := w.Write(&wire.Frame{Event: wire.EventAttach, Body: body}); err != nil {
		t.Fatal(err)
	}
	line, err := r.Next()
	if err != nil {
		t.Fatalf("no challenge: %v", err)
	}
	f, err := wire.Decode(line.Bytes)
	line.Release()
	var ch wire.Challenge
	if err != nil || f.Event != wire.EventChallenge || json.Unmarshal(f.Body, &ch) != nil || !wire.ValidNonce(ch.Nonce) {
		t.Fatalf("the answer to an attach: %+v %v", f, err)
	}
	if ch.Proof != wire.Proof(kernelKey, wire.ProofKernel, hn, ch.Nonce) {
		t.Fatal("the kernel's challenge does not prove its key")
	}
	body, _ = json.Marshal(wire.Prove{Proof: wire.Proof(key, wire.ProofHost, hn, ch.Nonce)})
	if err := w.Write(&wire.Frame{Event: wire.EventProve, Body: body}); err != nil {
		t.Fatal(err)
	}
}

// refused checks that a host proving key on a new connection to l gets no resume frame:
// the connection is closed after the kernel's challenge.
func refused(t *testing.T, l *listening, key string) {
	t.Helper()
	bad, err := net.Dial("unix", l.sock)
	if err != nil {
		t.Fatal(err)
	}
	defer bad.Close()
	bad.SetReadDeadline(time.Now().Add(5 * time.Second))
	r := wire.NewReader(bad)
	handshake(t, bad, r, l.key, key)
	if b, err := r.Next(); err == nil {
		t.Errorf("a connection proving key %q was answered: %q", key, b.Bytes)
	}
}

func (h *hostConn) next() (wire.Frame, bool) {
	line, err := h.r.Next()
	if err != nil {
		return wire.Frame{}, false
	}
	defer line.Release()
	f, err := wire.Decode(line.Bytes)
	if err != nil {
		h.t.Fatal(err)
	}
	return f, true
}

func (h *hostConn) send(f *wire.Frame) {
	if err := h.w.Write(f); err != nil {
		h.t.Fatal(err)
	}
}

func (h *hostConn) request(id, typ string, body any) {
	b, _ := json.Marshal(body)
	h.send(&wire.Frame{Event: wire.EventRequest, ID: id, Type: typ, Body: b})
}

func (h *hostConn) ack(seq uint64, done ...string) {
	b, _ := json.Marshal(wire.Ack{Seq: seq, Done: done})
	h.send(&wire.Frame{Event: wire.EventAck, Body: b})
}

// A listening kernel outlives its host: a job goes on while no host is connected, and the
// next host that attaches gets the job's whole output (what the first host had and
// acknowledged, what it never read, what came while none was there), each byte once and
// in order, then the job's end; a new exec runs; a connection without the key is closed
// unanswered.
func TestListenOutlivesItsHost(t *testing.T) {
	const key = "0123456789abcdef"
	l := startListening(t, key)

	a := l.connect(t, key)
	if a.resume.Last != 0 || a.resume.Replay != 0 || len(a.resume.Execs) != 0 {
		t.Fatalf("a fresh kernel's resume: %+v", a.resume)
	}
	// The job prints three lines, then waits for the gate go, which the test makes once the
	// first host is gone, prints the rest and says so with the file done.
	gate := t.TempDir()
	goFile, doneFile := filepath.Join(gate, "go"), filepath.Join(gate, "done")
	a.request("x1", wire.TypeExec, shell(fmt.Sprintf("for i in 1 2 3; do echo line$i; done; while [ ! -e %s ]; do sleep 0.01; done; "+
		"for i in $(seq 4 60); do echo line$i; done; echo err >&2; : > %s; exit 3", goFile, doneFile)))
	var first strings.Builder
	var n uint64
	for first.Len() < len("line1\nline2\nline3\n") {
		f, ok := a.next()
		if !ok {
			t.Fatal("the first host's connection ended")
		}
		n++
		if f.Event == wire.EventStream && f.FD == 1 {
			first.Write(f.Data)
		}
	}
	a.ack(n) // handled, but the exec is not released: the next host gets it again
	a.c.Close()

	// The job goes on with no host: the rest of its output comes while none is there.
	if err := os.WriteFile(goFile, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(30 * time.Second); ; {
		if _, err := os.Stat(doneFile); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the job did not go on with no host")
		}
		select {
		case <-l.done:
			t.Fatal("the kernel ended with its host")
		case <-time.After(10 * time.Millisecond):
		}
	}
	if _, err := net.Dial("unix", l.sock); err != nil {
		t.Fatal(err)
	}
	refused(t, l, "wrong")

	b := l.connect(t, key)
	if len(b.resume.Execs) != 1 || b.resume.Execs[0].ID != "x1" || b.resume.Execs[0].Skipped != 0 {
		t.Fatalf("the second host's resume: %+v", b.resume)
	}
	var out, errOut strings.Builder
	var res wire.ExecResult
	got := 0
	for {
		f, ok := b.next()
		if !ok {
			t.Fatal("the second host's connection ended")
		}
		got++
		if f.ID != "x1" {
			continue
		}
		if f.Event == wire.EventStream {
			map[int]*strings.Builder{1: &out, 2: &errOut}[f.FD].Write(f.Data)
			continue
		}
		if err := json.Unmarshal(f.Body, &res); err != nil {
			t.Fatal(err)
		}
		break
	}
	var want strings.Builder
	for i := 1; i <= 60; i++ {
		fmt.Fprintf(&want, "line%d\n", i)
	}
	if out.String() != want.String() || errOut.String() != "err\n" {
		t.Errorf("the job's output through the second host:\n%q\n%q", out.String(), errOut.String())
	}
	if len(res.Statuses) != 1 || res.Statuses[0].Code != 3 {
		t.Errorf("the job's end: %+v", res)
	}
	b.ack(b.resume.Last+uint64(max(0, got-b.resume.Replay)), "x1")

	b.request("x2", wire.TypeExec, shell("echo again"))
	var again string
	for {
		f, ok := b.next()
		if !ok {
			t.Fatal("the connection ended")
		}
		if f.ID == "x2" && f.Event == wire.EventStream {
			again += string(f.Data)
		}
		if f.ID == "x2" && f.Event == wire.EventReply {
			break
		}
	}
	if again != "again\n" {
		t.Errorf("a new exec: %q", again)
	}

	// A third host gets nothing of the released exec again.
	b.c.Close()
	c := l.connect(t, key)
	if len(c.resume.Execs) != 1 || c.resume.Execs[0].ID != "x2" || c.resume.Execs[0].Running {
		t.Errorf("the third host's resume: %+v", c.resume)
	}
	c.request("s", wire.TypeShutdown, struct{}{})
	select {
	case <-l.done:
	case <-time.After(10 * time.Second):
		t.Fatal("the kernel did not end at shutdown")
	}
	if _, err := os.Stat(l.sock); !os.IsNotExist(err) {
		t.Errorf("the socket is left: %v", err)
	}
}

// A listening kernel with an orphan bound lives on while a host is attached, however long,
// and once none has been for the bound it ends as a shutdown does: its programs with it.
func TestListenOrphanEnds(t *testing.T) {
	const key = "0123456789abcdef"
	l := startListening(t, key, "-orphan-after", "200ms")
	a := l.connect(t, key)
	gate := t.TempDir()
	pidFile := filepath.Join(gate, "pid")
	a.request("x1", wire.TypeExec, shell(fmt.Sprintf("echo $$ > %s; while :; do sleep 0.05; done", pidFile)))
	var pid int
	waitFor(t, 30*time.Second, "the job's pid", func() bool {
		b, err := os.ReadFile(pidFile)
		if err != nil {
			return false
		}
		pid, err = strconv.Atoi(strings.TrimSpace(string(b)))
		return err == nil
	})
	// Attached: the bound does not run. A ping answered after several bounds have passed
	// says the kernel is still there (each answer waits on the kernel, not on a clock).
	deadline := time.Now().Add(time.Second)
	for i := 0; time.Now().Before(deadline); i++ {
		a.request(fmt.Sprint("p", i), wire.TypePing, struct{}{})
		for {
			f, ok := a.next()
			if !ok {
				t.Fatal("the kernel ended while its host was attached")
			}
			if f.Event == wire.EventReply && f.ID == fmt.Sprint("p", i) {
				break
			}
		}
	}
	a.c.Close()
	<-l.done // the kernel ends once alone for the bound
	if err := syscall.Kill(pid, 0); err == nil {
		waitFor(t, 10*time.Second, "the job's end", func() bool { return syscall.Kill(pid, 0) != nil })
	}
}

// A kernel listening -once serves its host's frames as any listening kernel does, is not
// ended by connections that never prove the key, and ends with its host's connection as a
// kernel on its standard streams ends at their end: its programs with it.
func TestListenOnceEndsWithItsHost(t *testing.T) {
	const key = "0123456789abcdef"
	l := startListening(t, key, "-once")
	for _, k := range []string{"wrong", ""} {
		refused(t, l, k)
	}
	a := l.connect(t, key)
	// Attached, it takes no other connection, not even one to try a key on.
	if c, err := net.Dial("unix", l.sock); err == nil {
		c.Close()
		t.Error("a kernel listening once took a connection after its host's")
	}
	gate := t.TempDir()
	pidFile := filepath.Join(gate, "pid")
	a.request("x1", wire.TypeExec, shell(fmt.Sprintf("echo $$ > %s; while :; do sleep 0.05; done", pidFile)))
	var pid int
	waitFor(t, 30*time.Second, "the job's pid", func() bool {
		b, err := os.ReadFile(pidFile)
		if err != nil {
			return false
		}
		pid, err = strconv.Atoi(strings.TrimSpace(string(b)))
		return err == nil
	})
	a.request("p", wire.TypePing, struct{}{})
	for {
		f, ok := a.next()
		if !ok {
			t.Fatal("the kernel ended while its host was attached")
		}
		if f.Event == wire.EventReply && f.ID == "p" {
			break
		}
	}
	a.c.Close()
	<-l.done // no bound to wait out: the host's leaving ends it
	if err := syscall.Kill(pid, 0); err == nil {
		waitFor(t, 10*time.Second, "the job's end", func() bool { return syscall.Kill(pid, 0) != nil })
	}
}
