package ssh_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	xssh "golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/agent"

	"github.com/paddockhq/paddock/internal/await"
	"github.com/paddockhq/paddock/transport"
	"github.com/paddockhq/paddock/transport/ssh"
	"github.com/paddockhq/paddock/transport/ssh/sshtest"
	"github.com/paddockhq/paddock/transport/wire"
)

func wantCode(t *testing.T, err error, code string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error; want %s", code)
	}
	if !errors.Is(err, &ssh.Error{Code: code}) {
		t.Fatalf("error %v (code %q); want code %s", err, ssh.CodeOf(err), code)
	}
}

func TestHostKeyUnknownRefused(t *testing.T) {
	srv := sshtest.Start(t)
	empty := filepath.Join(t.TempDir(), "known_hosts")
	os.WriteFile(empty, nil, 0o600)
	d := srv.Dialer()
	d.KnownHosts = []string{empty}
	_, err := d.Dial(context.Background(), sshtest.Alias)
	wantCode(t, err, ssh.CodeHostKeyUnknown)

	// No known_hosts file at all: every key is unknown, never accepted.
	d.KnownHosts = []string{filepath.Join(t.TempDir(), "missing")}
	_, err = d.Dial(context.Background(), sshtest.Alias)
	wantCode(t, err, ssh.CodeHostKeyUnknown)
}

func TestHostKeyChangedRefused(t *testing.T) {
	srv := sshtest.Start(t)
	_, other, _ := ed25519.GenerateKey(rand.Reader)
	pub, _ := xssh.NewPublicKey(other.Public())
	kh := filepath.Join(t.TempDir(), "known_hosts")
	os.WriteFile(kh, []byte(srv.KnownHostsLine(pub)), 0o600)
	d := srv.Dialer()
	d.KnownHosts = []string{kh}
	_, err := d.Dial(context.Background(), sshtest.Alias)
	wantCode(t, err, ssh.CodeHostKeyChanged)

	// The right key, known through a hashed entry, is accepted.
	d.KnownHosts = []string{srv.KnownHosts}
	c, err := d.Dial(context.Background(), sshtest.Alias)
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
}

func TestKeyRefusedByServer(t *testing.T) {
	srv := sshtest.Start(t)
	_, priv, _ := ed25519.GenerateKey(rand.Reader)
	b, _ := xssh.MarshalPrivateKey(priv, "")
	id := filepath.Join(t.TempDir(), "id_other")
	os.WriteFile(id, pem.EncodeToMemory(b), 0o600)
	cfg := filepath.Join(t.TempDir(), "config")
	os.WriteFile(cfg, []byte(strings.ReplaceAll(readFile(t, srv.Config), srv.Identity, id)), 0o600)
	d := srv.Dialer()
	d.ConfigFile = cfg
	_, err := d.Dial(context.Background(), sshtest.Alias)
	wantCode(t, err, ssh.CodeAuth)

	// A key with a passphrase is never prompted for: with no agent it is no key at all.
	enc, _ := xssh.MarshalPrivateKeyWithPassphrase(priv, "", []byte("secret"))
	os.WriteFile(id, pem.EncodeToMemory(enc), 0o600)
	_, err = d.Dial(context.Background(), sshtest.Alias)
	wantCode(t, err, ssh.CodeAuth)
}

func readFile(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestAgentKeys(t *testing.T) {
	srv := sshtest.Start(t)
	sock := filepath.Join(t.TempDir(), "agent.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	kr := agent.NewKeyring()
	priv := readPrivate(t, srv.Identity)
	if err := kr.Add(agent.AddedKey{PrivateKey: priv}); err != nil {
		t.Fatal(err)
	}
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() { agent.ServeAgent(kr, c); c.Close() }()
		}
	}()
	// The configuration names no identity file the client can read: only the agent's key.
	cfg := filepath.Join(t.TempDir(), "config")
	os.WriteFile(cfg, []byte(strings.ReplaceAll(strings.ReplaceAll(readFile(t, srv.Config), "IdentityFile "+srv.Identity, "IdentityFile none"), "IdentitiesOnly yes", "")), 0o600)
	d := srv.Dialer()
	d.ConfigFile, d.AgentSocket = cfg, sock
	c, err := d.Dial(context.Background(), sshtest.Alias)
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	d.AgentSocket = "none"
	_, err = d.Dial(context.Background(), sshtest.Alias)
	wantCode(t, err, ssh.CodeAuth)
}

func readPrivate(t *testing.T, name string) any {
	t.Helper()
	k, err := xssh.ParseRawPrivateKey([]byte(readFile(t, name)))
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// A host that accepts the TCP connection but never speaks is refused when the connect
// timeout ends, not later.
func TestNoAnswerWithinTimeout(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	var mu sync.Mutex
	var held []net.Conn
	defer func() {
		mu.Lock()
		defer mu.Unlock()
		for _, c := range held {
			c.Close()
		}
	}()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			held = append(held, c) // never answers
			mu.Unlock()
		}
	}()
	d := &ssh.Dialer{ConfigFile: "none", AgentSocket: "none", Timeout: 500 * time.Millisecond, KnownHosts: []string{"/dev/null"}}
	start := time.Now()
	_, err = d.Dial(context.Background(), l.Addr().String())
	wantCode(t, err, ssh.CodeConnectTimeout)
	if el := time.Since(start); el > 3*time.Second {
		t.Fatalf("refused after %v; the timeout is 500ms", el)
	}
	// The context's end is a timeout too.
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	d.Timeout = time.Minute
	start = time.Now()
	_, err = d.Dial(ctx, l.Addr().String())
	wantCode(t, err, ssh.CodeConnectTimeout)
	if el := time.Since(start); el > 3*time.Second {
		t.Fatalf("refused after %v; the context ended at 200ms", el)
	}

	// Nothing listening: unreachable.
	l2, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := l2.Addr().String()
	l2.Close()
	_, err = d.Dial(context.Background(), addr)
	wantCode(t, err, ssh.CodeUnreachable)
}

// kernelExe is the executable of a process.
func kernelExe(pid int) string {
	exe, _ := os.Readlink("/proc/" + strconv.Itoa(pid) + "/exe")
	return exe
}

// kernelProcs lists live processes running a kernel from dir.
func kernelProcs(dir string) []int {
	var out []int
	for pid, p := range sshtest.Procs() {
		if strings.HasPrefix(p.Exe, dir+"/") {
			out = append(out, pid)
		}
	}
	return out
}

// eventually waits until cond holds. It is for what no event announces (a count of
// goroutines, of a pool's connections): a bounded poll.
func eventually(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	if await.Poll(ctx, 20*time.Millisecond, cond) != nil {
		t.Fatalf("after %v: %s", within, what)
	}
}

// ended waits for the processes pids to end, on their pidfds.
func ended(t *testing.T, what string, pids ...int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, pid := range pids {
		if err := await.Exit(ctx, pid); err != nil {
			t.Fatalf("%s: %d still runs: %v", what, pid, err)
		}
	}
}

// ping sends a kernel a ping and reads its reply: the kernel runs.
func ping(t *testing.T, k transport.Kernel) {
	t.Helper()
	if err := wire.NewWriter(k.Stdin()).Write(&wire.Frame{Event: wire.EventRequest, ID: "ping", Type: wire.TypePing, Body: []byte("{}")}); err != nil {
		t.Fatal(err)
	}
	r := wire.NewReader(k.Stdout())
	for {
		l, err := r.Next()
		if err != nil {
			t.Fatalf("the kernel's reply to ping: %v", err)
		}
		if f, err := wire.Decode(l.Bytes); err == nil && f.ID == "ping" {
			return
		}
	}
}

func startKernel(t *testing.T, b *box, dir string) transport.Kernel {
	t.Helper()
	k, err := b.tr.Start(context.Background(), transport.Spec{
		Kernel: kernelPath(t), Cwd: dir, Env: []string{"PATH=/usr/bin:/bin"},
	})
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// A server killed mid-session ends the session with a typed error within the timeout, and
// leaves no kernel process and no goroutine behind.
func TestServerKilledMidSession(t *testing.T) {
	base := runtime.NumGoroutine()
	b := newBox(t)
	b.pool.Dialer.KeepAlive = 200 * time.Millisecond
	b.pool.Dialer.Timeout = time.Second
	dir := t.TempDir()
	s := b.open(t, dir)
	k := startKernel(t, b, dir)
	if res, err := s.Bash(context.Background(), "true"); err != nil || res.End.Status != 0 {
		t.Fatal(err, res)
	}
	ping(t, k)
	kernels := kernelProcs(b.cache) // the session's and k, both answering
	if len(kernels) != 2 {
		t.Fatalf("kernels running: %v", kernels)
	}
	// A call in flight when the server dies ends with an error, never hangs. Its process
	// says it runs through a named pipe.
	started := filepath.Join(dir, "started")
	if err := syscall.Mkfifo(started, 0o600); err != nil {
		t.Fatal(err)
	}
	inFlight := make(chan error, 1)
	go func() {
		_, err := s.Bash(context.Background(), "sh -c 'echo $$ > started; exec sleep 60'")
		inFlight <- err
	}()
	said := make(chan []byte, 1)
	go func() {
		b, _ := os.ReadFile(started)
		said <- b
	}()
	select {
	case line := <-said:
		pid, _ := strconv.Atoi(strings.TrimSpace(string(line)))
		if p, ok := sshtest.Procs()[pid]; !ok || !strings.HasPrefix(kernelExe(p.PPid), b.cache) {
			t.Fatalf("the call's process %q is no kernel's child: %+v", line, p)
		}
	case <-time.After(2 * time.Minute):
		t.Fatal("the call's process did not start")
	}
	start := time.Now()
	if n := b.srv.Kill(); n < 2 {
		t.Fatalf("killed %d sshd processes; want the listener and the connection's", n)
	}
	werr := make(chan error, 1)
	go func() { werr <- k.Wait() }()
	select {
	case err := <-werr:
		wantCode(t, err, ssh.CodeConnectionLost)
	case <-time.After(3 * time.Second):
		t.Fatal("the kernel's Wait did not end within 3s of the server's death")
	}
	_, err := io.ReadAll(k.Stdout())
	wantCode(t, err, ssh.CodeConnectionLost)
	select {
	case err := <-inFlight:
		if err == nil {
			t.Fatal("the call in flight succeeded on a dead server")
		}
	case <-time.After(3 * time.Second):
		t.Fatal("the call in flight did not end within 3s of the server's death")
	}
	// The session: once it has seen its kernel end (the call in flight heard of it), a call
	// fails with the typed reason: the box cannot be reached to start another.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := s.Bash(ctx, "true"); err == nil {
		t.Fatal("a call on a session whose server died succeeded")
	} else if ssh.CodeOf(err) != ssh.CodeUnreachable {
		t.Fatalf("no typed error from the session: %v", err)
	}
	if el := time.Since(start); el > 4*time.Second {
		t.Fatalf("the session took %v to fail", el)
	}
	k.Kill()
	s.Close()
	ended(t, "a kernel process left on the box", kernels...)
	if left := kernelProcs(b.cache); len(left) != 0 {
		t.Fatalf("kernel processes left on the box: %v", left)
	}
	b.pool.Close()
	eventually(t, 5*time.Second, "goroutines left", func() bool { return runtime.NumGoroutine() <= base+2 })
}

// A server that stops answering (stopped, not closed: the connection stays up) is found out
// by the keepalives within the timeout.
func TestServerStopsAnswering(t *testing.T) {
	b := newBox(t)
	b.pool.Dialer.KeepAlive = 200 * time.Millisecond
	b.pool.Dialer.Timeout = time.Second
	dir := t.TempDir()
	k := startKernel(t, b, dir)
	t.Cleanup(func() { b.srv.Signal(syscall.SIGCONT) })
	b.srv.Signal(syscall.SIGSTOP)
	werr := make(chan error, 1)
	go func() { werr <- k.Wait() }()
	select {
	case err := <-werr:
		wantCode(t, err, ssh.CodeConnectionLost)
	case <-time.After(5 * time.Second):
		t.Fatal("the kernel's Wait did not end within 5s of the server stopping")
	}
	b.srv.Signal(syscall.SIGCONT)
	k.Kill()
}

// A start on a box that stopped answering gives up when its context ends.
func TestStartGivesUpWithContext(t *testing.T) {
	b := newBox(t)
	dir := t.TempDir()
	startKernel(t, b, dir).Kill() // the connection is pooled, the box probed
	l, err := b.pool.Get(context.Background(), sshtest.Alias)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release() // keep the connection in the pool
	t.Cleanup(func() { b.srv.Signal(syscall.SIGCONT) })
	b.srv.Signal(syscall.SIGSTOP)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err = b.tr.Start(ctx, transport.Spec{Kernel: kernelPath(t), Cwd: dir})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("start on a stopped box: %v", err)
	}
	if el := time.Since(start); el > 2*time.Second {
		t.Fatalf("the start gave up after %v; its context ended at 300ms", el)
	}
}
