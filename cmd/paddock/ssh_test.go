package main

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/paddockhq/paddock/client"
	"github.com/paddockhq/paddock/daemon"
	"github.com/paddockhq/paddock/images"
	"github.com/paddockhq/paddock/transport/ssh/sshtest"
)

// sshHome makes a home whose ~/.ssh/config reaches the test's sshd as "box", with no
// settings file; the kernel is the one found before the home changed.
func sshHome(t *testing.T) (srv *sshtest.Server, cache string) {
	t.Helper()
	return sshHomeWith(t, sshtest.Options{})
}

// sshHomeWith is sshHome on a server started with options.
func sshHomeWith(t *testing.T, o sshtest.Options) (srv *sshtest.Server, cache string) {
	t.Helper()
	if _, err := images.Default.Find(context.Background(), runtime.GOARCH); err != nil {
		t.Fatal(err)
	}
	srv = sshtest.StartWith(t, o)
	srv.Home(t)
	return srv, filepath.Join(srv.Dir, "kernel-cache")
}

func TestRunOverSSH(t *testing.T) {
	_, cache := sshHome(t)
	ws := fixture(t)
	out, errOut, code := paddock(t, ws, "run", "--transport", "ssh", "--host", "box", "--kernel-cache", cache, "--", "cat a.txt | wc -l; pwd")
	if code != 0 || out != "3\n"+ws+"\n" {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	// No host: a usage error naming the flag and the setting.
	_, errOut, code = paddock(t, ws, "run", "--transport", "ssh", "--", "true")
	if code != exitUsage || !strings.Contains(errOut, "--host") || !strings.Contains(errOut, "kernelTransport.ssh.host") {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
}

// --sync: the workspace goes to the box and what the script changed there comes back.
func TestRunOverSSHSync(t *testing.T) {
	_, cache := sshHome(t)
	ws := fixture(t)
	out, errOut, code := paddock(t, ws, "run", "--transport", "ssh", "--host", "box", "--kernel-cache", cache, "--sync", "--", "pwd; echo changed > a.txt; rm b.txt; echo new > n.txt")
	if code != 0 || strings.TrimSpace(out) == ws {
		t.Fatalf("exit %d, stdout %q (the script must run in the box's copy), stderr %q", code, out, errOut)
	}
	if !strings.Contains(errOut, "handed back") {
		t.Fatalf("stderr %q does not report the hand-back", errOut)
	}
	for name, want := range map[string]string{"a.txt": "changed\n", "n.txt": "new\n", "c.go": "package c\n"} {
		if b, err := os.ReadFile(filepath.Join(ws, name)); err != nil || string(b) != want {
			t.Errorf("%s: %q %v; want %q", name, b, err, want)
		}
	}
	if _, err := os.Stat(filepath.Join(ws, "b.txt")); !os.IsNotExist(err) {
		t.Errorf("b.txt, removed on the box, is still there: %v", err)
	}
	if _, err := os.Stat(strings.TrimSpace(out)); !os.IsNotExist(err) {
		t.Errorf("the box's copy %s is left: %v", strings.TrimSpace(out), err)
	}
}

// --sync with a path changed on both sides: the hand-back keeps the local version, saves
// the box's, and the run exits 3. (The box is this machine, so the script can change the
// local workspace behind the copy's back.)
func TestRunOverSSHSyncConflict(t *testing.T) {
	_, cache := sshHome(t)
	ws := fixture(t)
	script := "echo box > a.txt; echo local > " + filepath.Join(ws, "a.txt")
	_, errOut, code := paddock(t, ws, "run", "--transport", "ssh", "--host", "box", "--kernel-cache", cache, "--sync", "--", script)
	if code != exitConflicts || !strings.Contains(errOut, "conflicts: 1") {
		t.Fatalf("exit %d, stderr %q; want %d and the conflict named", code, errOut, exitConflicts)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "a.txt")); string(b) != "local\n" {
		t.Fatalf("a.txt = %q, want the local version kept", b)
	}
}

// A box with no sftp subsystem: the run says once that files go over exec channels, and
// --sync works there as elsewhere.
func TestRunOverSSHNoSFTP(t *testing.T) {
	_, cache := sshHomeWith(t, sshtest.Options{NoSFTP: true})
	ws := fixture(t)
	out, errOut, code := paddock(t, ws, "run", "--transport", "ssh", "--host", "box", "--kernel-cache", cache, "--sync", "--", "echo changed > a.txt; cat a.txt")
	if code != 0 || out != "changed\n" {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	note := "ssh box box has no sftp subsystem; files are copied over exec channels"
	if strings.Count(errOut, note) != 1 || !strings.Contains(errOut, "handed back") {
		t.Fatalf("stderr %q; want the note once and the hand-back", errOut)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "a.txt")); string(b) != "changed\n" {
		t.Fatalf("a.txt = %q after the hand-back", b)
	}
	// With SFTP, no note.
	_, cache = sshHome(t)
	_, errOut, code = paddock(t, ws, "run", "--transport", "ssh", "--host", "box", "--kernel-cache", cache, "--", "true")
	if code != 0 || strings.Contains(errOut, "sftp") {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
}

// The same run through a daemon: the hand-back is the session's close result there, said as
// an embedded run says it, and the conflict is exit 3 as there.
func TestRunHostedOverSSHSyncConflict(t *testing.T) {
	_, cache := sshHome(t)
	t.Setenv(client.HostEnv, "unix://"+serveSocket(t, ""))
	ws := fixture(t)
	script := "echo box > a.txt; echo local > " + filepath.Join(ws, "a.txt")
	_, errOut, code := paddock(t, ws, "run", "--transport", "ssh", "--host", "box", "--kernel-cache", cache, "--sync", "--", script)
	if code != exitConflicts || !strings.Contains(errOut, "handed back: 0 changes taken, 1 conflicts") || !strings.Contains(errOut, "conflict: a.txt") {
		t.Fatalf("exit %d, stderr %q; want %d and the conflict named", code, errOut, exitConflicts)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "a.txt")); string(b) != "local\n" {
		t.Fatalf("a.txt = %q, want the local version kept", b)
	}
}

// serveSocket starts a daemon in this process with the given global settings, opening its
// sessions as paddock serve does, and returns its socket.
func serveSocket(t *testing.T, settings string) string {
	t.Helper()
	k, err := images.Default.Find(context.Background(), runtime.GOARCH)
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("PADDOCK_KERNEL", k)
	cfgDir := t.TempDir()
	t.Setenv("XDG_CONFIG_HOME", cfgDir)
	os.MkdirAll(filepath.Join(cfgDir, "paddock"), 0o700)
	if err := os.WriteFile(filepath.Join(cfgDir, "paddock", "settings.yaml"), []byte(settings), 0o600); err != nil {
		t.Fatal(err)
	}
	srv, err := daemon.New(daemon.Config{Open: daemon.OpenRequest, StateDir: filepath.Join(t.TempDir(), "state")})
	if err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(t.TempDir(), "s", daemon.SocketName)
	l, err := daemon.Listen(sock, nil)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(l) }()
	t.Cleanup(func() {
		srv.Close()
		<-done
	})
	return sock
}
