package ssh_test

import (
	"bytes"
	"context"
	"fmt"
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
	// A daemon's session: the kernel listens on the box, its frames over a forwarded unix
	// socket rather than the channel's standard streams.
	b.Run("paddock-listening", func(b *testing.B) {
		m, _ := pathmap.New(pathmap.Mount{Sandbox: dir, Host: dir})
		s, err := orchestrator.Open(context.Background(), orchestrator.Config{Workspace: dir, Transport: bx.tr, PathMap: m,
			Env:    []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + dir, "LC_ALL=C"}, // as the open's above
			Listen: filepath.Join(b.TempDir(), "kernel"), Key: "bench-key-0123456789abcdef0123456789"})
		if err != nil {
			b.Fatal(err)
		}
		defer s.Close()
		if s.Listening().Key == "" {
			b.Fatal("the kernel does not listen")
		}
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

// BenchmarkFirstSession: a session opened on a new connection and answering, over SFTP and
// on a box without it (exec channels). "cached" finds the kernel in the box's cache;
// "upload" sends it first (a new cache each time).
func BenchmarkFirstSession(b *testing.B) {
	for _, w := range ways {
		bx := newBoxWith(b, w.opts)
		dir := b.TempDir()
		m, _ := pathmap.New(pathmap.Mount{Sandbox: dir, Host: dir})
		openClose(b, bx.tr, dir, m) // the kernel in the cache
		b.Run(w.name+"-cached", func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				pool := &ssh.Pool{Dialer: bx.srv.Dialer(), Idle: -1}
				tr := &ssh.Transport{Host: sshtest.Alias, Pool: pool, KernelCache: bx.cache, Kernels: bx.tr.Kernels}
				openClose(b, tr, dir, m)
				pool.Close()
			}
		})
		b.Run(w.name+"-upload", func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				pool := &ssh.Pool{Dialer: bx.srv.Dialer(), Idle: -1}
				cache := filepath.Join(bx.srv.Dir, fmt.Sprintf("cache-%s-%d-%d", w.name, b.N, i))
				tr := &ssh.Transport{Host: sshtest.Alias, Pool: pool, KernelCache: cache, Kernels: bx.tr.Kernels}
				openClose(b, tr, dir, m)
				pool.Close()
				b.StopTimer()
				os.RemoveAll(cache)
				b.StartTimer()
			}
		})
	}
}

// BenchmarkSync: a workspace of 200 files (4 MiB) sent to the box and handed back with one
// file changed there, over SFTP and over exec channels.
func BenchmarkSync(b *testing.B) {
	parent := b.TempDir()
	for i := 0; i < 200; i++ {
		p := filepath.Join(parent, fmt.Sprintf("d%d", i%10), fmt.Sprintf("f%d.txt", i))
		os.MkdirAll(filepath.Dir(p), 0o755)
		os.WriteFile(p, bytes.Repeat([]byte{byte(i)}, 20<<10), 0o644)
	}
	ctx := context.Background()
	for _, w := range ways {
		bx := newBoxWith(b, w.opts)
		b.Run(w.name, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				dir := filepath.Join(b.TempDir(), "ws")
				remote := filepath.Join(bx.srv.Dir, "work", fmt.Sprintf("ws-%d-%d", b.N, i))
				s, err := ssh.StartSync(ctx, ssh.SyncOptions{Host: bx.tr.Host, Pool: bx.pool, Parent: parent, Dir: dir, Remote: remote})
				if err != nil {
					b.Fatal(err)
				}
				os.WriteFile(filepath.Join(remote, "d0", "f0.txt"), []byte("changed\n"), 0o644)
				if _, err := s.Handback(ctx); err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				os.WriteFile(filepath.Join(parent, "d0", "f0.txt"), bytes.Repeat([]byte{0}, 20<<10), 0o644)
				b.StartTimer()
			}
		})
	}
}
