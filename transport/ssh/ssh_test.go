package ssh_test

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/paddockhq/paddock/images"
	"github.com/paddockhq/paddock/orchestrator"
	"github.com/paddockhq/paddock/transport/pathmap"
	"github.com/paddockhq/paddock/transport/ssh"
	"github.com/paddockhq/paddock/transport/ssh/sshtest"
)

// kernelPath is the host's kernel binary, built once.
func kernelPath(t testing.TB) string {
	t.Helper()
	k, err := images.Default.Find(context.Background(), runtime.GOARCH)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// box is one server with a transport reaching it through its alias.
type box struct {
	srv   *sshtest.Server
	pool  *ssh.Pool
	tr    *ssh.Transport
	cache string
}

func newBox(t testing.TB) *box {
	t.Helper()
	return newBoxWith(t, sshtest.Options{})
}

// newBoxWith is newBox on a server started with options.
func newBoxWith(t testing.TB, o sshtest.Options) *box {
	t.Helper()
	srv := sshtest.StartWith(t, o)
	pool := &ssh.Pool{Dialer: srv.Dialer(), Idle: -1}
	t.Cleanup(func() { pool.Close() })
	cache := filepath.Join(srv.Dir, "kernel-cache")
	k := kernelPath(t)
	return &box{srv: srv, pool: pool, cache: cache, tr: &ssh.Transport{
		Host: sshtest.Alias, Pool: pool, KernelCache: cache,
		Kernels: func(context.Context, string) (string, error) { return k, nil },
		Stderr:  os.Stderr,
	}}
}

// ways are the two ways files reach a box: SFTP, and exec channels on a box with no sftp
// subsystem.
var ways = []struct {
	name string
	opts sshtest.Options
}{
	{"sftp", sshtest.Options{}},
	{"exec", sshtest.Options{NoSFTP: true}},
}

// open opens a session on the box in dir, a directory both sides see (the box is this
// machine: the same filesystem).
func (b *box) open(t testing.TB, dir string) *orchestrator.Session {
	t.Helper()
	m, err := pathmap.New(pathmap.Mount{Sandbox: dir, Host: dir})
	if err != nil {
		t.Fatal(err)
	}
	s, err := orchestrator.Open(context.Background(), orchestrator.Config{
		Workspace: dir, Transport: b.tr, PathMap: m,
		Env: []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + dir, "LC_ALL=C"},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestSessionOverSSH(t *testing.T) {
	b := newBox(t)
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "a.txt"), []byte("one\ntwo\n"), 0o644)
	s := b.open(t, dir)
	res, err := s.Bash(context.Background(), "cat a.txt | wc -l; echo $HOME; pwd")
	if err != nil {
		t.Fatal(err)
	}
	if res.End.Status != 0 {
		t.Fatalf("end %+v", res.End)
	}
	var out strings.Builder
	for _, st := range res.Steps {
		out.WriteString(st.Stdout.Text)
	}
	t.Logf("%q", out.String())
}
