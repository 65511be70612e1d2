package sshfile_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/paddockhq/paddock/config"
	"github.com/paddockhq/paddock/internal/sshfile"
	"github.com/paddockhq/paddock/transport/ssh"
	"github.com/paddockhq/paddock/transport/ssh/sshtest"
)

func wantCode(t *testing.T, err error, code string) {
	t.Helper()
	if !errors.Is(err, &sshfile.Rejection{Code: code}) {
		t.Fatalf("error %v; want the rejection %s", err, code)
	}
}

func reader(t *testing.T, srv *sshtest.Server) *sshfile.Reader {
	pool := &ssh.Pool{Dialer: srv.Dialer(), Idle: time.Minute}
	t.Cleanup(func() { pool.Close() })
	return &sshfile.Reader{Hosts: []string{sshtest.Alias}, Pool: pool, Budget: 10 * time.Second}
}

func TestReadRejections(t *testing.T) {
	srv := sshtest.Start(t)
	r := reader(t, srv)
	ctx := context.Background()
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "text.txt"), []byte("hello\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "nul.bin"), []byte("he\x00llo"), 0o644)
	os.WriteFile(filepath.Join(dir, "latin1.txt"), []byte("caf\xe9\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "cut.txt"), []byte("ok \xe2\x82"), 0o644)
	url := func(p string) string { return "ssh://" + sshtest.Alias + p }

	res, err := r.Read(ctx, url(dir+"/text.txt"))
	if err != nil || res.Text != "hello\n" || res.Bytes != 6 || res.Dropped != 0 {
		t.Fatalf("%+v %v", res, err)
	}
	for _, tc := range []struct {
		url, code string
	}{
		{url(dir + "/missing"), sshfile.NotFound},
		{url(dir), sshfile.IsDirectory},
		{url("/~"), sshfile.IsDirectory},
		{url(dir + "/nul.bin"), sshfile.Binary},
		{url(dir + "/latin1.txt"), sshfile.Binary},
		{url(dir + "/cut.txt"), sshfile.Binary},
		{url("/.." + dir), sshfile.Escapes},
		{url("/~/../etc/passwd"), sshfile.Escapes},
		{"ssh://-box/etc/passwd", sshfile.Arguments},
		{"ssh://box:22/etc/passwd", sshfile.Arguments},
		{"ssh://box", sshfile.Arguments},
		{"ssh://elsewhere/etc/passwd", sshfile.NotAllowed},
		{"ssh://root@box/etc/passwd", sshfile.NotAllowed},
		{url("/dev/null"), sshfile.IO},
	} {
		_, err := r.Read(ctx, tc.url)
		if !errors.Is(err, &sshfile.Rejection{Code: tc.code}) {
			t.Errorf("%s: %v; want %s", tc.url, err, tc.code)
		}
	}
	// not_allowed names the setting.
	_, err = r.Read(ctx, "ssh://elsewhere/etc/passwd")
	if !strings.Contains(err.Error(), "ssh.hosts") {
		t.Errorf("not_allowed does not name ssh.hosts: %v", err)
	}
	// Off by default: no hosts, nothing is read.
	off := &sshfile.Reader{Pool: r.Pool}
	_, err = off.Read(ctx, url(dir+"/text.txt"))
	wantCode(t, err, sshfile.NotAllowed)
}

func TestReadHostRejections(t *testing.T) {
	srv := sshtest.Start(t)
	ctx := context.Background()
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "f"), []byte("x"), 0o644)
	kh := filepath.Join(t.TempDir(), "known_hosts")
	os.WriteFile(kh, nil, 0o600)

	// An unknown host key: host.
	d := srv.Dialer()
	d.KnownHosts = []string{kh}
	pool := &ssh.Pool{Dialer: d}
	defer pool.Close()
	r := &sshfile.Reader{Hosts: []string{sshtest.Alias}, Pool: pool}
	_, err := r.Read(ctx, "ssh://box"+dir+"/f")
	wantCode(t, err, sshfile.Host)

	// A key the box refuses: auth.
	d2 := srv.Dialer()
	d2.IdentityFiles = nil
	cfg := filepath.Join(t.TempDir(), "config")
	b, _ := os.ReadFile(srv.Config)
	os.WriteFile(cfg, []byte(strings.ReplaceAll(string(b), "IdentityFile "+srv.Identity, "IdentityFile none")), 0o600)
	d2.ConfigFile = cfg
	pool2 := &ssh.Pool{Dialer: d2}
	defer pool2.Close()
	r2 := &sshfile.Reader{Hosts: []string{sshtest.Alias}, Pool: pool2}
	_, err = r2.Read(ctx, "ssh://box"+dir+"/f")
	wantCode(t, err, sshfile.Auth)

	// A host no connection reaches (nothing listens there): host.
	cfg3 := filepath.Join(t.TempDir(), "config")
	os.WriteFile(cfg3, []byte("Host closed\n  HostName 127.0.0.1\n  Port 1\n"), 0o600)
	pool3 := &ssh.Pool{Dialer: &ssh.Dialer{ConfigFile: cfg3, AgentSocket: "none", Timeout: time.Second}}
	defer pool3.Close()
	r3 := &sshfile.Reader{Hosts: []string{"closed"}, Pool: pool3}
	_, err = r3.Read(ctx, "ssh://closed/etc/hostname")
	wantCode(t, err, sshfile.Host)
}

// The cap keeps the first bytes, whole characters, and counts the rest exactly.
func TestReadCap(t *testing.T) {
	srv := sshtest.Start(t)
	r := reader(t, srv)
	dir := t.TempDir()
	body := strings.Repeat("é", 100) + strings.Repeat("x", 200000) // 200 + 200000 bytes
	os.WriteFile(filepath.Join(dir, "big.txt"), []byte(body), 0o644)
	r.Cap = 101 // inside the 51st é
	res, err := r.Read(context.Background(), "ssh://box"+dir+"/big.txt")
	if err != nil {
		t.Fatal(err)
	}
	if res.Text != strings.Repeat("é", 50) || res.Bytes != int64(len(body)) || res.Dropped != int64(len(body)-100) || res.Partial {
		t.Fatalf("kept %d bytes, bytes %d, dropped %d, partial %v", len(res.Text), res.Bytes, res.Dropped, res.Partial)
	}
	r.Cap = 0 // the default cap
	res, err = r.Read(context.Background(), "ssh://box"+dir+"/big.txt")
	if err != nil || len(res.Text) != sshfile.DefaultCap || res.Dropped != int64(len(body)-sshfile.DefaultCap) {
		t.Fatalf("default cap: kept %d dropped %d %v", len(res.Text), res.Dropped, err)
	}
}

// A path full of shell syntax names a file, which is read; nothing in it runs.
func TestReadShellSyntaxPath(t *testing.T) {
	srv := sshtest.Start(t)
	r := reader(t, srv)
	dir := t.TempDir()
	marker := filepath.Join(dir, "ran")
	for _, name := range []string{
		"$(touch " + marker + ")",
		"`touch " + marker + "`; touch " + marker + " 'q' \"d\" $HOME && x || y > z",
		"a;b|c&d<e>f*g?h[i]{j}~k#l!m\\n",
	} {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("content of "+name), 0o644); err != nil {
			t.Fatal(err)
		}
		res, err := r.Read(context.Background(), "ssh://box"+p)
		if err != nil || res.Text != "content of "+name {
			t.Fatalf("%q: %+v %v", name, res, err)
		}
		if _, err := os.Lstat(marker); err == nil {
			t.Fatalf("reading %q ran a command", name)
		}
	}
}

// The home root: ~ is the remote user's home.
func TestReadHome(t *testing.T) {
	srv := sshtest.Start(t)
	r := reader(t, srv)
	home, err := os.UserHomeDir()
	if err != nil {
		t.Skip("no home")
	}
	var rnd [4]byte
	rand.Read(rnd[:])
	sub := ".paddock-sshfile-test-" + hex.EncodeToString(rnd[:])
	if err := os.Mkdir(filepath.Join(home, sub), 0o700); err != nil {
		t.Skip("cannot write in the home: ", err)
	}
	defer os.RemoveAll(filepath.Join(home, sub))
	os.WriteFile(filepath.Join(home, sub, "n.txt"), []byte("at home\n"), 0o600)
	res, err := r.Read(context.Background(), "ssh://box/~/"+sub+"/./n.txt")
	if err != nil || res.Text != "at home\n" || res.Path != filepath.Join(home, sub, "n.txt") {
		t.Fatalf("%+v %v", res, err)
	}
}

// permission_denied: a file the remote user may not read (the server logs in as nobody).
func TestReadPermissionDenied(t *testing.T) {
	dir := t.TempDir()
	os.Chmod(dir, 0o755)
	secret := filepath.Join(dir, "secret.txt")
	os.WriteFile(secret, []byte("no"), 0o600)
	var srv *sshtest.Server
	if os.Getuid() == 0 {
		srv = sshtest.StartWith(t, sshtest.Options{User: "nobody"})
		os.Chown(secret, 0, 0)
	} else {
		srv = sshtest.Start(t)
		os.Chmod(secret, 0)
	}
	r := reader(t, srv)
	_, err := r.Read(context.Background(), "ssh://box"+secret)
	wantCode(t, err, sshfile.PermissionDenied)
}

// The blocking budget ends a read that cannot finish: a box that stopped answering.
func TestReadTimeout(t *testing.T) {
	srv := sshtest.Start(t)
	r := reader(t, srv)
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "f"), []byte("x"), 0o644)
	if _, err := r.Read(context.Background(), "ssh://box"+dir+"/f"); err != nil {
		t.Fatal(err) // the connection is now pooled
	}
	t.Cleanup(func() { srv.Signal(syscall.SIGCONT) })
	srv.Signal(syscall.SIGSTOP)
	r.Budget = 300 * time.Millisecond
	start := time.Now()
	_, err := r.Read(context.Background(), "ssh://box"+dir+"/f")
	wantCode(t, err, sshfile.Timeout)
	if el := time.Since(start); el > 3*time.Second {
		t.Fatalf("the read ended after %v; the budget is 300ms", el)
	}
}

// The budget ends a read after the cap is filled: the kept bytes are the result, the rest
// counted from the file's size, marked partial.
func TestReadBudgetAfterCap(t *testing.T) {
	srv := sshtest.Start(t)
	r := reader(t, srv)
	dir := t.TempDir()
	size := 64 << 20
	t0 := time.Now()
	body := []byte(strings.Repeat("0123456789abcdef", size/16))
	os.WriteFile(filepath.Join(dir, "huge.txt"), body, 0o644)
	t.Log("file written in", time.Since(t0))
	t.Cleanup(func() { srv.Signal(syscall.SIGCONT); sshfile.SetOnFull(nil) })
	sshfile.SetOnFull(func() { srv.Signal(syscall.SIGSTOP) }) // the box stops once the cap is full
	r.Cap, r.Budget = 1000, time.Second
	start := time.Now()
	res, err := r.Read(context.Background(), "ssh://box"+dir+"/huge.txt")
	if err != nil {
		t.Fatal(err)
	}
	if el := time.Since(start); el > 4*time.Second {
		t.Fatalf("the read took %v; the budget is 1s", el)
	}
	if !res.Partial || res.Text != string(body[:1000]) || res.Bytes != int64(size) || res.Dropped != int64(size-1000) {
		t.Fatalf("partial %v, kept %d, bytes %d, dropped %d", res.Partial, len(res.Text), res.Bytes, res.Dropped)
	}
}

// ssh.hosts comes from the global settings only: a project's settings listing a host do
// not open it to reads.
func TestHostsFromGlobalSettingsOnly(t *testing.T) {
	srv := sshtest.Start(t)
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "f.txt"), []byte("x"), 0o644)
	project := t.TempDir()
	os.MkdirAll(filepath.Join(project, ".paddock"), 0o755)
	os.WriteFile(filepath.Join(project, ".paddock", "settings.yaml"), []byte("ssh:\n  hosts: [box]\n"), 0o644)
	global := filepath.Join(t.TempDir(), "settings.yaml")
	os.WriteFile(global, []byte("output:\n  bytes: 100\n"), 0o644)

	l, err := config.Load(config.Options{GlobalFile: global, Workspace: project})
	if err != nil {
		t.Fatal(err)
	}
	r := reader(t, srv)
	r.Hosts = l.Settings.SSH.Hosts
	_, err = r.Read(context.Background(), "ssh://box"+dir+"/f.txt")
	wantCode(t, err, sshfile.NotAllowed)

	os.WriteFile(global, []byte("ssh:\n  hosts: [box]\n"), 0o644)
	if l, err = config.Load(config.Options{GlobalFile: global, Workspace: project}); err != nil {
		t.Fatal(err)
	}
	r.Hosts = l.Settings.SSH.Hosts
	if res, err := r.Read(context.Background(), "ssh://box"+dir+"/f.txt"); err != nil || res.Text != "x" {
		t.Fatalf("a host in the global ssh.hosts: %+v %v", res, err)
	}
}
