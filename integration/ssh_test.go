package integration

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/paddockhq/paddock/transport/environ"
	"github.com/paddockhq/paddock/transport/pathmap"
	"github.com/paddockhq/paddock/transport/ssh"
	"github.com/paddockhq/paddock/transport/ssh/sshtest"
)

// sshSandboxEnv is the kernel's own environment on the box.
var sshSandboxEnv = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL=C"}

// The conformance suite over SSH: a real OpenSSH server on 127.0.0.1, reached through an
// ssh configuration alias with its own known_hosts and key. The box is this machine, so the
// workspace is a directory both sides see at the same path (a shared filesystem); the kernel
// is uploaded into the box's kernel cache and run on a session channel.
func TestConformanceSSH(t *testing.T) { conformanceSSH(t, sshtest.Options{}) }

// The conformance suite on a box with no sftp subsystem: the kernel goes over an exec
// channel.
func TestConformanceSSHNoSFTP(t *testing.T) { conformanceSSH(t, sshtest.Options{NoSFTP: true}) }

func conformanceSSH(t *testing.T, o sshtest.Options) {
	srv := sshtest.StartWith(t, o)
	kernel := kernelBinary(t)
	sum := fileSum(t, kernel)
	cache := filepath.Join(srv.Dir, "kernel-cache")
	onBox := filepath.Join(cache, "paddock-kernel-"+sum[:32])
	pool := &ssh.Pool{Dialer: srv.Dialer()}
	t.Cleanup(func() { pool.Close() })
	RunConformance(t, func(t *testing.T) Env {
		ws := t.TempDir()
		pm, err := pathmap.New(pathmap.Mount{Sandbox: ws, Host: ws})
		if err != nil {
			t.Fatal(err)
		}
		return Env{
			Transport:       &ssh.Transport{Host: sshtest.Alias, Pool: pool, KernelCache: cache, Stderr: testWriter{t}},
			Kernel:          kernel,
			KernelInSandbox: onBox,
			Workspace:       ws,
			PathMap:         pm,
			Environ: func(host, names []string) []string {
				env, _ := environ.Sandbox(host, names, sshSandboxEnv, pm)
				return env
			},
			Leftovers: func(_ context.Context, _ string, pids []int) []string {
				// The box is this machine: its pids are the host's. A kernel whose sshd
				// went away (an orphan) is left over too; one under its sshd is another
				// session's, still open.
				left := hostProcesses(pids)
				for pid, p := range sshtest.Procs() {
					if strings.HasPrefix(p.Exe, cache+"/") && p.PPid == 1 {
						left = append(left, fmt.Sprintf("orphaned kernel %d", pid))
					}
				}
				return left
			},
		}
	})
	if n := pool.Conns(); n > 1 {
		t.Errorf("the suite's sessions used %d connections to one box; want them shared", n)
	}
	if bx, err := (&ssh.Transport{Host: sshtest.Alias, Pool: pool}).Box(context.Background()); err != nil || bx.SFTP == o.NoSFTP {
		t.Errorf("Box() = %+v, %v; the box's files went the wrong way", bx, err)
	}
}

func fileSum(t *testing.T, name string) string {
	t.Helper()
	f, err := os.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(h.Sum(nil))
}
