package ssh_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/paddockhq/paddock/orchestrator"
	"github.com/paddockhq/paddock/transport/pathmap"
	"github.com/paddockhq/paddock/transport/ssh"
	"github.com/paddockhq/paddock/transport/ssh/sshtest"
)

// openClose opens a session on tr in dir, checks it answers, and closes it.
func openClose(b *testing.B, tr *ssh.Transport, dir string, m *pathmap.Map) {
	s, err := orchestrator.Open(context.Background(), orchestrator.Config{
		Workspace: dir, Transport: tr, PathMap: m, Env: []string{"PATH=/usr/bin:/bin"},
	})
	if err != nil {
		b.Fatal(err)
	}
	s.Close()
}

func runSSH(b *testing.B, args ...string) {
	if out, err := exec.Command("ssh", args...).CombinedOutput(); err != nil {
		b.Fatalf("ssh %v: %v: %s", args, err, out)
	}
}

// BenchmarkSessionReady: a session opened on a box and answering, against the ssh program
// running `true` in batch mode (a connection, a handshake, a command). "first" pays the
// connection (the kernel is already in the box's cache); "second" opens on the shared one.
func BenchmarkSessionReady(b *testing.B) {
	bx := newBox(b)
	dir := b.TempDir()
	m, _ := pathmap.New(pathmap.Mount{Sandbox: dir, Host: dir})
	openClose(b, bx.tr, dir, m) // the kernel uploaded once
	b.Run("paddock-first", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			pool := &ssh.Pool{Dialer: bx.srv.Dialer(), Idle: -1}
			tr := &ssh.Transport{Host: sshtest.Alias, Pool: pool, KernelCache: bx.cache, Kernels: bx.tr.Kernels}
			openClose(b, tr, dir, m)
			pool.Close()
		}
	})
	b.Run("paddock-second", func(b *testing.B) {
		pool := &ssh.Pool{Dialer: bx.srv.Dialer()}
		defer pool.Close()
		tr := &ssh.Transport{Host: sshtest.Alias, Pool: pool, KernelCache: bx.cache, Kernels: bx.tr.Kernels}
		openClose(b, tr, dir, m) // the connection, then reused
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			openClose(b, tr, dir, m)
		}
		if n := pool.Conns(); n != 1 {
			b.Fatalf("%d connections", n)
		}
	})
	b.Run("ssh-batchmode-true", func(b *testing.B) {
		args := append(bx.srv.SSHArgs(), sshtest.Alias, "true")
		for i := 0; i < b.N; i++ {
			runSSH(b, args...)
		}
	})
}

// BenchmarkTrueStep: one `/bin/true` step in an open session, against the ssh program
// running it per command, and through an OpenSSH ControlMaster connection.
func BenchmarkTrueStep(b *testing.B) {
	bx := newBox(b)
	dir := b.TempDir()
	b.Run("paddock", func(b *testing.B) {
		s := bx.open(b, dir)
		ctx := context.Background()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			res, err := s.Bash(ctx, "/bin/true")
			if err != nil || res.End.Status != 0 {
				b.Fatal(err, res)
			}
		}
	})
	b.Run("ssh-per-command", func(b *testing.B) {
		args := append(bx.srv.SSHArgs(), sshtest.Alias, "true")
		for i := 0; i < b.N; i++ {
			runSSH(b, args...)
		}
	})
	b.Run("ssh-controlmaster", func(b *testing.B) {
		sock := filepath.Join(bx.srv.Dir, "cm.sock")
		runSSH(b, append(bx.srv.SSHArgs(), "-o", "ControlMaster=yes", "-o", "ControlPath="+sock, "-o", "ControlPersist=yes", "-fN", sshtest.Alias)...)
		defer exec.Command("ssh", append(bx.srv.SSHArgs(), "-o", "ControlPath="+sock, "-O", "exit", sshtest.Alias)...).Run()
		if _, err := os.Stat(sock); err != nil {
			b.Fatal("no control socket:", err)
		}
		args := append(bx.srv.SSHArgs(), "-o", "ControlPath="+sock, sshtest.Alias, "true")
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			runSSH(b, args...)
		}
	})
}
