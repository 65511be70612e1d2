package daemon_test

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/paddockhq/paddock/internal/peer"

	"github.com/paddockhq/paddock/daemon"
	"github.com/paddockhq/paddock/errdefs"
)

// otherUID is the second uid the tests make peers and owners of: nobody's.
const otherUID = 65534

func requireRoot(t *testing.T, why string) {
	t.Helper()
	if os.Getuid() == 0 {
		return
	}
	peer.Missing(t, "%s needs root (to make a second uid)", why)
}

// TestMain doubles as the peer of another uid: with PADDOCK_TEST_DIAL set, the binary
// connects to that socket, writes a request, and prints what it reads.
func TestMain(m *testing.M) {
	if sock := os.Getenv("PADDOCK_TEST_DIAL"); sock != "" {
		os.Exit(dial(sock))
	}
	os.Exit(m.Run())
}

func dial(sock string) int {
	c, err := net.Dial("unix", sock)
	if err != nil {
		fmt.Println("dial:", err)
		return 2
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second)) // a peer left open would otherwise hang
	fmt.Fprintf(c, "GET /v1/health HTTP/1.1\r\nHost: paddock\r\n\r\n")
	b, err := io.ReadAll(c)
	fmt.Printf("read %d bytes: %q err=%v\n", len(b), b, err)
	return 0
}

// law: socket_dir_owned
// law: socket_dir_progress
// Real directories, as the daemon finds them: each refused one stops the start with an error
// naming the directory, the fault and the fix.
func TestSocketDirChecks(t *testing.T) {
	base := t.TempDir()
	mk := func(name string, mode os.FileMode) string {
		p := filepath.Join(base, name)
		if err := os.Mkdir(p, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil { // exact bits, whatever the umask
			t.Fatal(err)
		}
		return p
	}
	file := filepath.Join(base, "file")
	os.WriteFile(file, nil, 0o600)
	link := filepath.Join(base, "link")
	os.Symlink(mk("target", 0o700), link)
	cases := []struct {
		dir   string
		fault string
	}{
		{mk("private", 0o700), ""},
		{mk("readable", 0o755), ""}, // others may read and search, never write
		{mk("groupwrite", 0o720), daemon.FaultMode},
		{mk("otherwrite", 0o703), daemon.FaultMode},
		{mk("world", 0o777), daemon.FaultMode},
		{link, daemon.FaultSymlink},
		{file, daemon.FaultNotDir},
		{filepath.Join(file, "under"), daemon.FaultMissing},
	}
	if os.Getuid() == 0 {
		owned := mk("owned", 0o700)
		if err := os.Chown(owned, otherUID, otherUID); err != nil {
			t.Fatal(err)
		}
		cases = append(cases, struct{ dir, fault string }{owned, daemon.FaultOwner})
		// / is root's: the daemon may use it only when it runs as root.
		cases = append(cases, struct{ dir, fault string }{"/", ""})
	} else {
		cases = append(cases, struct{ dir, fault string }{"/", daemon.FaultOwner})
	}
	for _, tc := range cases {
		err := daemon.PrepareDir(tc.dir)
		if tc.fault == "" {
			if err != nil {
				t.Errorf("%s: %v", tc.dir, err)
			}
			continue
		}
		var de *daemon.DirError
		if !errors.As(err, &de) || de.Fault != tc.fault {
			t.Errorf("%s: %v, want fault %s", tc.dir, err, tc.fault)
			continue
		}
		msg := err.Error()
		if !strings.Contains(msg, tc.dir) || !strings.Contains(msg, "fix:") {
			t.Errorf("%s: the error names neither the directory nor the fix: %s", tc.dir, msg)
		}
		// The daemon does not start there.
		if _, err := daemon.Listen(filepath.Join(tc.dir, daemon.SocketName), nil); !errors.As(err, &de) {
			t.Errorf("%s: Listen: %v", tc.dir, err)
		}
	}
	// The decision on / for a daemon of another uid: owner.
	if f := daemon.DirFault(factsOf(t, "/"), otherUID); f != daemon.FaultOwner {
		t.Errorf("/ for uid %d: %q", otherUID, f)
	}
	if _, err := os.Stat(filepath.Join(base, "world", daemon.SocketName)); err == nil {
		t.Error("a socket was made in a refused directory")
	}
}

func factsOf(t *testing.T, p string) daemon.DirFacts {
	fi, err := os.Lstat(p)
	if err != nil {
		t.Fatal(err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	return daemon.DirFacts{Symlink: fi.Mode()&os.ModeSymlink != 0, Dir: fi.IsDir(), UID: st.Uid, Mode: fi.Mode().Perm()}
}

// law: socket_dir_created
// law: socket_dir_created_used
// A missing directory and its missing parents are made 0700, and pass the check; the socket
// is 0600.
func TestSocketDirCreated(t *testing.T) {
	old := syscall.Umask(0)
	defer syscall.Umask(old)
	base := t.TempDir()
	sock := filepath.Join(base, "a", "b", "c", daemon.SocketName)
	l, err := daemon.Listen(sock, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for _, d := range []string{"a", "a/b", "a/b/c"} {
		fi, err := os.Lstat(filepath.Join(base, d))
		if err != nil || !fi.IsDir() || fi.Mode().Perm() != 0o700 {
			t.Errorf("%s: %v %v", d, fi.Mode(), err)
		}
	}
	fi, err := os.Lstat(sock)
	if err != nil || fi.Mode()&os.ModeSocket == 0 || fi.Mode().Perm() != 0o600 {
		t.Errorf("socket: %v %v", fi.Mode(), err)
	}
	if err := daemon.PrepareDir(filepath.Dir(sock)); err != nil {
		t.Errorf("a directory the daemon made fails its check: %v", err)
	}
	// A second daemon on the same socket is refused; a stale socket is replaced.
	if _, err := daemon.Listen(sock, nil); err == nil {
		t.Error("a second daemon listened on a live socket")
	}
	l.Close()
	os.Remove(sock)
	stale, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	stale.(*net.UnixListener).SetUnlinkOnClose(false)
	stale.Close()
	l2, err := daemon.Listen(sock, nil)
	if err != nil {
		t.Fatalf("stale socket: %v", err)
	}
	l2.Close()
}

// law: peer_same_uid
// law: peer_own_accepted
// A peer of a real second uid is closed before a byte is read, with a warning naming its
// uid; a peer of the daemon's uid is served.
func TestPeerOfAnotherUIDRefused(t *testing.T) {
	requireRoot(t, "a peer of another uid")
	// A directory and socket the other uid can reach, so that only the uid check stands
	// between it and the daemon.
	dir, err := os.MkdirTemp("", "paddock-peer-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	os.Chmod(dir, 0o755)
	sock := filepath.Join(dir, "s.sock")
	ul, err := net.ListenUnix("unix", &net.UnixAddr{Name: sock, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(sock, 0o666)
	logs := &logBuffer{}
	l := &daemon.PeerListener{UnixListener: ul, UID: uint32(os.Getuid()), Log: slog.New(slog.NewTextHandler(logs, nil))}
	defer l.Close()
	accepted := make(chan net.Conn, 4)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				close(accepted)
				return
			}
			accepted <- c
		}
	}()

	// The test binary, copied where the other uid can run it.
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "peer")
	b, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, b, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin)
	cmd.Env = []string{"PADDOCK_TEST_DIAL=" + sock}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: otherUID, Gid: otherUID}}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("peer: %v\n%s", err, out)
	}
	if !strings.HasPrefix(string(out), "read 0 bytes") || strings.Contains(string(out), "timeout") {
		t.Errorf("the other uid's peer got an answer: %s", out)
	}
	if !strings.Contains(logs.String(), fmt.Sprintf("uid=%d", otherUID)) {
		t.Errorf("no warning naming uid %d: %q", otherUID, logs.String())
	}
	select {
	case c := <-accepted:
		t.Errorf("a peer of uid %d was accepted: %v", otherUID, c.RemoteAddr())
	default:
	}

	// The daemon's own uid is accepted.
	c, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprint(c, "ping\n")
	got := <-accepted
	defer got.Close()
	line, err := bufio.NewReader(got).ReadString('\n')
	if err != nil || line != "ping\n" {
		t.Errorf("own peer: %q %v", line, err)
	}
}

// law: peer_same_uid
func TestPeerAllowedDecision(t *testing.T) {
	for _, tc := range []struct {
		peer, own uint32
		err       error
		ok        bool
	}{
		{1000, 1000, nil, true},
		{0, 1000, nil, false},
		{1001, 1000, nil, false},
		{1000, 1000, errors.New("no credentials"), false},
		{0, 0, nil, true},
	} {
		if got := daemon.PeerAllowed(tc.peer, tc.err, tc.own); got != tc.ok {
			t.Errorf("%+v: %v", tc, got)
		}
	}
}

// The default socket directory: $TMPDIR/paddock-<uid>, /tmp when TMPDIR is unset.
func TestDefaultDir(t *testing.T) {
	uid := fmt.Sprint(os.Getuid())
	t.Setenv("TMPDIR", "/var/tmp/x")
	if got := daemon.DefaultDir(); got != "/var/tmp/x/paddock-"+uid {
		t.Errorf("TMPDIR set: %s", got)
	}
	os.Unsetenv("TMPDIR")
	if got := daemon.DefaultSocket(); got != "/tmp/paddock-"+uid+"/paddock.sock" {
		t.Errorf("TMPDIR unset: %s", got)
	}
}

// A daemon's address is a path or unix://PATH, made absolute; any other scheme, or none at
// all, is an invalid argument.
func TestSocketPath(t *testing.T) {
	t.Parallel()
	wd, _ := os.Getwd()
	for addr, want := range map[string]string{"/run/p.sock": "/run/p.sock", "unix:///run/p.sock": "/run/p.sock", "p.sock": filepath.Join(wd, "p.sock")} {
		if got, err := daemon.SocketPath(addr); err != nil || got != want {
			t.Errorf("%q: %q %v, want %q", addr, got, err, want)
		}
	}
	for _, addr := range []string{"tcp://127.0.0.1:1", "", "unix://"} {
		_, err := daemon.SocketPath(addr)
		if class, code := errdefs.Of(err); class != errdefs.InvalidArgument || code != "usage" {
			t.Errorf("%q: %v, want an invalid argument", addr, err)
		}
	}
}
