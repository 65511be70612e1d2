package ssh_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/paddockhq/paddock/internal/await"
	"github.com/paddockhq/paddock/orchestrator"
	"github.com/paddockhq/paddock/transport"
	"github.com/paddockhq/paddock/transport/pathmap"
	"github.com/paddockhq/paddock/transport/ssh"
)

// A kernel started with Listen outlives its host's connections: once they are gone, as
// when the host dies, a new host's transport reattaches to the same kernel (the same
// process, what it was doing still there) and the session goes on; once that session is
// closed, the kernel has ended and its directory on the box is gone, and a reattach
// finds nothing (ErrGone).
func TestKernelOutlivesItsHost(t *testing.T) {
	b := newBox(t)
	ws := t.TempDir()
	m, err := pathmap.New(pathmap.Mount{Sandbox: ws, Host: ws})
	if err != nil {
		t.Fatal(err)
	}
	cfg := orchestrator.Config{Workspace: ws, Transport: b.tr, PathMap: m, Kernel: kernelPath(t),
		Env:    []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + ws, "LC_ALL=C"},
		Listen: filepath.Join(t.TempDir(), "kernel"), Key: strings.Repeat("k", 32)}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	first, err := orchestrator.Open(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	at := first.Listening()
	if at.Key != cfg.Key || at.Listen != cfg.Listen {
		t.Fatalf("the kernel does not say it listens: %+v", at)
	}
	pid := func(s *orchestrator.Session) string {
		t.Helper()
		// The step's shell is the kernel's child. ($PPID of a step of the grammar would be
		// expanded on the host, where it is unset.)
		r, err := s.Bash(ctx, "sh -c 'echo $PPID'")
		if err != nil || r.End.Status != 0 {
			t.Fatalf("%v %+v", err, r)
		}
		if pid := strings.TrimSpace(r.Steps[0].Stdout.Text); pid == "" || pid == "1" {
			t.Fatalf("the kernel's pid: %q", pid)
		}
		return r.Steps[0].Stdout.Text
	}
	before := pid(first)
	b.pool.Close() // the host's connections go, as with a host that died

	pool := &ssh.Pool{Dialer: b.srv.Dialer(), Idle: -1}
	defer pool.Close()
	tr := ssh.Transport{Host: b.tr.Host, Pool: pool, KernelCache: b.tr.KernelCache, Kernels: b.tr.Kernels, Stderr: b.tr.Stderr}
	k, err := tr.Reattach(ctx, at)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Transport = &tr
	again, err := orchestrator.Reopen(ctx, cfg, k, nil)
	if err != nil {
		t.Fatal(err)
	}
	if after := pid(again); after != before {
		t.Errorf("reattached to kernel %q, the first was %q", after, before)
	}
	if err := again.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := tr.Reattach(ctx, at); !errors.Is(err, transport.ErrGone) {
		t.Errorf("a reattach once the kernel ended: %v", err)
	}
	box, err := tr.Box(ctx)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256([]byte(cfg.Listen)) // the box's directory is named for the host's
	if _, err := os.Stat(filepath.Join(box.Home, ".cache", "paddock", "listen", hex.EncodeToString(sum[:12]))); !os.IsNotExist(err) {
		t.Errorf("the kernel's directory is left on the box: %v", err)
	}
}

// A kernel listening on a box with an orphan bound ends once its host has been gone for it:
// a daemon that never comes back leaves nothing running there. A new host then finds it
// gone. (The box is this machine: the kernel's process is watched directly, so that no
// reattach resets its bound.)
func TestKernelOrphanedOnTheBox(t *testing.T) {
	b := newBox(t)
	ws := t.TempDir()
	m, err := pathmap.New(pathmap.Mount{Sandbox: ws, Host: ws})
	if err != nil {
		t.Fatal(err)
	}
	b.tr.OrphanAfter = 300 * time.Millisecond
	cfg := orchestrator.Config{Workspace: ws, Transport: b.tr, PathMap: m, Kernel: kernelPath(t),
		Env:    []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + ws, "LC_ALL=C"},
		Listen: filepath.Join(t.TempDir(), "kernel"), Key: strings.Repeat("k", 32)}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s, err := orchestrator.Open(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	at := s.Listening()
	r, err := s.Bash(ctx, "sleep 1; sh -c 'echo $PPID'")
	if err != nil || r.End.Status != 0 {
		t.Fatalf("attached past the bound: %v %+v", err, r)
	}
	kpid := strings.TrimSpace(r.Steps[1].Stdout.Text)
	if _, err := os.Stat("/proc/" + kpid); err != nil {
		t.Fatalf("the kernel's pid %q: %v", kpid, err)
	}
	b.pool.Close() // the host goes, and does not come back
	pid, _ := strconv.Atoi(kpid)
	if err := await.Exit(ctx, pid); err != nil {
		t.Fatalf("the orphaned kernel did not end: %v", err)
	}
	pool := &ssh.Pool{Dialer: b.srv.Dialer(), Idle: -1}
	defer pool.Close()
	tr := ssh.Transport{Host: b.tr.Host, Pool: pool, KernelCache: b.tr.KernelCache, Kernels: b.tr.Kernels}
	if _, err := tr.Reattach(ctx, at); !errors.Is(err, transport.ErrGone) {
		t.Errorf("a reattach once the kernel ended: %v", err)
	}
}
