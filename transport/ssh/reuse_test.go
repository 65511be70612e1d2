package ssh_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/paddockhq/paddock/transport"
	"github.com/paddockhq/paddock/transport/ssh"
	"github.com/paddockhq/paddock/transport/ssh/sshtest"
)

// Sessions on one box share one connection; the kernel is uploaded once per content hash
// and reused by later sessions, even on a new connection; over SFTP and, on a box without
// it, over exec channels.
func TestConnectionSharedKernelUploadedOnce(t *testing.T) {
	for _, w := range ways {
		t.Run(w.name, func(t *testing.T) {
			b := newBoxWith(t, w.opts)
			bx, err := b.tr.Box(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if bx.SFTP != !w.opts.NoSFTP {
				t.Fatalf("Box().SFTP = %v on a box %s", bx.SFTP, w.name)
			}
			testKernelUploadedOnce(t, b)
		})
	}
}

func testKernelUploadedOnce(t *testing.T, b *box) {
	dir := t.TempDir()
	s1 := b.open(t, dir)
	s2 := b.open(t, dir)
	for _, s := range [](func() error){
		func() error { _, err := s1.Bash(context.Background(), "true"); return err },
		func() error { _, err := s2.Bash(context.Background(), "true"); return err },
	} {
		if err := s(); err != nil {
			t.Fatal(err)
		}
	}
	if n := b.pool.Conns(); n != 1 {
		t.Fatalf("%d connections for two sessions on one box; want 1", n)
	}
	ents, err := os.ReadDir(b.cache)
	if err != nil {
		t.Fatal(err)
	}
	if len(ents) != 1 || !strings.HasPrefix(ents[0].Name(), "paddock-kernel-") {
		t.Fatalf("kernel cache holds %v; want one kernel", ents)
	}
	kpath := filepath.Join(b.cache, ents[0].Name())
	before, _ := os.Stat(kpath)
	if before.Mode().Perm()&0o100 == 0 {
		t.Fatalf("kernel mode %v", before.Mode())
	}

	// A new pool (a new connection, a new host process) finds the kernel there.
	pool2 := &ssh.Pool{Dialer: b.srv.Dialer(), Idle: -1}
	defer pool2.Close()
	tr2 := &ssh.Transport{Host: b.tr.Host, Pool: pool2, KernelCache: b.tr.KernelCache, Kernels: b.tr.Kernels}
	b2 := &box{srv: b.srv, pool: pool2, tr: tr2, cache: b.cache}
	s3 := b2.open(t, dir)
	if _, err := s3.Bash(context.Background(), "true"); err != nil {
		t.Fatal(err)
	}
	after, _ := os.Stat(kpath)
	if !os.SameFile(before, after) || !after.ModTime().Equal(before.ModTime()) {
		t.Fatal("the kernel was uploaded again")
	}
	ents, _ = os.ReadDir(b.cache)
	if len(ents) != 1 {
		t.Fatalf("kernel cache holds %d files after reuse (a temporary left?)", len(ents))
	}
}

// Closing a session (the kernel's stdin) ends the kernel and every process group it
// started, even one that left its group for a session of its own.
func TestCloseEndsKernelAndGroups(t *testing.T) {
	b := newBox(t)
	dir := t.TempDir()
	s := b.open(t, dir)
	res, err := s.Bash(context.Background(), "sh -c 'setsid sleep 300 </dev/null >/dev/null 2>&1 & echo $!; sleep 301 </dev/null >/dev/null 2>&1 & echo $!'")
	if err != nil || res.End.Status != 0 || len(res.Steps) == 0 {
		t.Fatal(err, res)
	}
	var pids []int
	for _, f := range strings.Fields(res.Steps[0].Stdout.Text) {
		pid, err := strconv.Atoi(f)
		if err != nil {
			t.Fatalf("output %q", res.Steps[0].Stdout.Text)
		}
		pids = append(pids, pid)
	}
	if len(pids) != 2 {
		t.Fatalf("pids %v", pids)
	}
	for _, pid := range pids {
		if syscall.Kill(pid, 0) != nil {
			t.Fatalf("sleep %d is not running before the close", pid)
		}
	}
	kernels := kernelProcs(b.cache) // the session's, which answered
	if len(kernels) != 1 {
		t.Fatalf("kernels running: %v", kernels)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	ended(t, "the kernel's processes outlived the session", pids...)
	ended(t, "the kernel outlived the session", kernels...)
	if left := kernelProcs(b.cache); len(left) != 0 {
		t.Fatalf("kernel processes left: %v", left)
	}
}

// A server that allows two channels per connection (MaxSessions 2): a third kernel goes on
// a second connection, and both connections close when their kernels end. The channels that
// carry files (SFTP, or commands on a box without it) are closed before the kernel's opens.
func TestMaxSessionsOpensAnotherConnection(t *testing.T) {
	for _, w := range ways {
		t.Run(w.name, func(t *testing.T) {
			o := w.opts
			o.MaxSessions = 2
			testMaxSessions(t, sshtest.StartWith(t, o))
		})
	}
}

func testMaxSessions(t *testing.T, srv *sshtest.Server) {
	pool := &ssh.Pool{Dialer: srv.Dialer(), Idle: -1}
	defer pool.Close()
	cache := filepath.Join(srv.Dir, "kernel-cache")
	k := kernelPath(t)
	b := &box{srv: srv, pool: pool, cache: cache, tr: &ssh.Transport{
		Host: sshtest.Alias, Pool: pool, KernelCache: cache,
		Kernels: func(context.Context, string) (string, error) { return k, nil },
	}}
	dir := t.TempDir()
	var ks []transport.Kernel
	for i := 0; i < 3; i++ {
		ks = append(ks, startKernel(t, b, dir))
	}
	if n := pool.Conns(); n != 2 {
		t.Fatalf("%d connections for 3 kernels at 2 channels each; want 2", n)
	}
	for _, k := range ks {
		k.Kill()
		if err := k.Wait(); err != nil {
			t.Errorf("kernel: %v", err)
		}
	}
	eventually(t, 5*time.Second, "connections left open", func() bool { return pool.Conns() == 0 })
}

// A kernel cache others can write is refused: a program put there by another user would run
// as this one. The same whichever way files reach the box.
func TestKernelCacheMustBePrivate(t *testing.T) {
	for _, w := range ways {
		t.Run(w.name, func(t *testing.T) { testKernelCachePrivate(t, newBoxWith(t, w.opts)) })
	}
}

func testKernelCachePrivate(t *testing.T, b *box) {
	if err := os.Mkdir(b.cache, 0o777); err != nil {
		t.Fatal(err)
	}
	os.Chmod(b.cache, 0o777)
	_, err := b.tr.Start(context.Background(), transport.Spec{Kernel: kernelPath(t), Cwd: t.TempDir()})
	wantCode(t, err, ssh.CodeBox)
	if !strings.Contains(err.Error(), "writable by others") {
		t.Fatalf("error %v does not say why", err)
	}
	// Made private, it is used.
	os.Chmod(b.cache, 0o700)
	k := startKernel(t, b, t.TempDir())
	k.Kill()
}
