// Package sshtest runs a real OpenSSH server for tests: sshd on 127.0.0.1 with its own
// configuration, port, throwaway host key and authorized key in a temporary directory, and
// the client files that reach it (an ssh configuration with an alias, known_hosts, an
// identity file).
package sshtest

import (
	"bufio"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/paddockhq/paddock/internal/peer"

	xssh "golang.org/x/crypto/ssh"

	"github.com/paddockhq/paddock/transport/ssh"
)

// Alias is the host alias the client configuration gives the server.
const Alias = "box"

// Sshd is where the server binary is looked for.
var Sshd = "/usr/sbin/sshd"

// Server is one running sshd.
type Server struct {
	Dir         string // holds every file below
	Port        int
	User        string      // the user that logs in: the test's own
	HostKey     xssh.Signer // the server's host key
	KnownHosts  string      // known_hosts holding the host key for [127.0.0.1]:Port
	Identity    string      // the client's private key file (no passphrase)
	ClientKey   xssh.Signer // its key
	Config      string      // ssh client configuration: Host box -> the server
	cmd         *exec.Cmd
	exited      chan struct{}
	maxSessions int
	opts        Options
}

// Addr is the server's address.
func (s *Server) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.Port)) }

// Skip skips the test with the reason, or fails it when PADDOCK_REQUIRE_INTEGRATION=1.
func Skip(t testing.TB, reason string) {
	t.Helper()
	peer.Missing(t, "%s", reason)
}

// Options change the server Start makes.
type Options struct {
	// User is the user that logs in; "": the test's own. Another user needs the test to run
	// as root.
	User string
	// MaxSessions is how many channels one connection may open at once; 0: 64.
	MaxSessions int
	// NoSFTP leaves the Subsystem line out: the server refuses SFTP, as a hardened box does.
	NoSFTP bool
	// SFTP is the sftp subsystem's command; "": internal-sftp.
	SFTP string
	// Path, when set, is the whole PATH every command runs with (whatever the login shell's
	// startup files make of it): a box that lacks some program, or has another one. It is
	// set by a ForceCommand, which takes the sftp subsystem's requests too: use it with
	// NoSFTP.
	Path string
	// NoRemoteForward refuses to forward ports of the box back to the client (`ssh -R`),
	// as a box with AllowTcpForwarding local does.
	NoRemoteForward bool
}

// Start starts a server for the test; it is stopped, with every process it started, when
// the test ends. It skips the test (see Skip) when sshd cannot run here.
func Start(t testing.TB) *Server {
	t.Helper()
	return StartWith(t, Options{})
}

// StartWith starts a server with options.
func StartWith(t testing.TB, o Options) *Server {
	t.Helper()
	if _, err := os.Stat(Sshd); err != nil {
		Skip(t, "no OpenSSH server ("+Sshd+"); install Debian's openssh-server")
	}
	u, err := user.Current()
	if err != nil {
		Skip(t, "no current user: "+err.Error())
	}
	if u.Uid == "0" {
		// sshd running as root needs its privilege separation directory.
		if err := os.MkdirAll("/run/sshd", 0o755); err != nil {
			Skip(t, "cannot make /run/sshd: "+err.Error())
		}
	}
	dir, err := os.MkdirTemp("", "paddock-sshd-")
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(dir, 0o755)
	t.Cleanup(func() { os.RemoveAll(dir) })
	s := &Server{Dir: dir, User: u.Username, maxSessions: o.MaxSessions, opts: o}
	if s.maxSessions <= 0 {
		s.maxSessions = 64
	}
	if o.User != "" && o.User != u.Username {
		if u.Uid != "0" {
			Skip(t, "logging in as "+o.User+" needs the test to run as root")
		}
		if _, err := user.Lookup(o.User); err != nil {
			Skip(t, "no user "+o.User+" on this machine")
		}
		s.User = o.User
	}
	var hostPriv, userPriv ed25519.PrivateKey
	if s.HostKey, hostPriv, err = newKey(); err != nil {
		t.Fatal(err)
	}
	if s.ClientKey, userPriv, err = newKey(); err != nil {
		t.Fatal(err)
	}
	must := func(err error) {
		if err != nil {
			t.Fatal(err)
		}
	}
	must(writeKey(filepath.Join(dir, "host_ed25519"), hostPriv))
	s.Identity = filepath.Join(dir, "id_ed25519")
	must(writeKey(s.Identity, userPriv))
	must(os.WriteFile(filepath.Join(dir, "authorized_keys"), xssh.MarshalAuthorizedKey(s.ClientKey.PublicKey()), 0o644))

	var lastErr string
	for try := 0; try < 5; try++ {
		port, err := freePort()
		if err != nil {
			t.Fatal(err)
		}
		s.Port = port
		must(s.writeFiles())
		ok, msg := s.start(t)
		if ok {
			return s
		}
		lastErr = msg
		if !strings.Contains(msg, "Address already in use") {
			break
		}
	}
	Skip(t, "sshd did not start: "+lastErr)
	return nil
}

func newKey() (xssh.Signer, ed25519.PrivateKey, error) {
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	s, err := xssh.NewSignerFromKey(priv)
	return s, priv, err
}

func writeKey(name string, priv ed25519.PrivateKey) error {
	b, err := xssh.MarshalPrivateKey(priv, "")
	if err != nil {
		return err
	}
	return os.WriteFile(name, pem.EncodeToMemory(b), 0o600)
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// KnownHostsLine is the known_hosts line of key for the server.
func (s *Server) KnownHostsLine(key xssh.PublicKey) string {
	return fmt.Sprintf("[127.0.0.1]:%d %s", s.Port, xssh.MarshalAuthorizedKey(key))
}

func (s *Server) writeFiles() error {
	cfg := fmt.Sprintf(`Port %d
ListenAddress 127.0.0.1
HostKey %s
PidFile none
AuthorizedKeysFile %s
StrictModes no
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
PermitRootLogin prohibit-password
MaxSessions %d
MaxStartups 64:30:128
ClientAliveInterval 0
PrintMotd no
LogLevel ERROR
`, s.Port, filepath.Join(s.Dir, "host_ed25519"), filepath.Join(s.Dir, "authorized_keys"), s.maxSessions)
	switch {
	case s.opts.NoSFTP:
	case s.opts.SFTP != "":
		cfg += "Subsystem sftp " + s.opts.SFTP + "\n"
	default:
		cfg += "Subsystem sftp internal-sftp\n"
	}
	if s.opts.NoRemoteForward {
		cfg += "AllowTcpForwarding local\n"
	}
	if s.opts.Path != "" {
		cfg += "ForceCommand PATH=" + ssh.Quote(s.opts.Path) + "; export PATH; exec /bin/sh -c \"$SSH_ORIGINAL_COMMAND\"\n"
	}
	if err := os.WriteFile(filepath.Join(s.Dir, "sshd_config"), []byte(cfg), 0o644); err != nil {
		return err
	}
	s.KnownHosts = filepath.Join(s.Dir, "known_hosts")
	if err := os.WriteFile(s.KnownHosts, []byte(s.KnownHostsLine(s.HostKey.PublicKey())), 0o644); err != nil {
		return err
	}
	s.Config = filepath.Join(s.Dir, "ssh_config")
	client := fmt.Sprintf(`Host %s
  HostName 127.0.0.1
  Port %d
  User %s
  IdentityFile %s
  IdentitiesOnly yes
  UserKnownHostsFile %s
  GlobalKnownHostsFile /dev/null
  BatchMode yes
  StrictHostKeyChecking yes
  LogLevel ERROR
`, Alias, s.Port, s.User, s.Identity, s.KnownHosts)
	return os.WriteFile(s.Config, []byte(client), 0o644)
}

// start runs sshd -D -e and waits, with a deadline, until it answers with an SSH banner.
func (s *Server) start(t testing.TB) (bool, string) {
	cmd := exec.Command(Sshd, "-D", "-e", "-f", filepath.Join(s.Dir, "sshd_config"))
	logName := filepath.Join(s.Dir, "sshd.log")
	logf, err := os.Create(logName)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return false, err.Error()
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	s.cmd, s.exited = cmd, exited
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-exited:
			b, _ := os.ReadFile(logName)
			return false, strings.TrimSpace(string(b))
		default:
		}
		if banner(s.Addr()) {
			t.Cleanup(s.stop)
			return true, ""
		}
		select {
		case <-exited:
		case <-time.After(20 * time.Millisecond):
		}
	}
	s.stop()
	return false, "no SSH banner within 10s"
}

// banner reports whether addr answers with an SSH version line.
func banner(addr string) bool {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return false
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(2 * time.Second))
	line, err := bufio.NewReader(c).ReadString('\n')
	return err == nil && strings.HasPrefix(line, "SSH-")
}

// stop ends the listener and every sshd process under it.
func (s *Server) stop() {
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	procs := s.Processes()
	s.Signal(syscall.SIGCONT)
	s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.exited:
	case <-time.After(5 * time.Second):
		s.cmd.Process.Kill()
		<-s.exited
	}
	for _, pid := range procs {
		syscall.Kill(pid, syscall.SIGKILL)
	}
}

// Log returns what sshd has logged.
func (s *Server) Log() string {
	b, _ := os.ReadFile(filepath.Join(s.Dir, "sshd.log"))
	return string(b)
}

// Signal sends sig to every sshd process of the server: the listener and each process
// serving a connection (not the programs those run). It returns how many it signalled.
func (s *Server) Signal(sig syscall.Signal) int {
	n := 0
	for _, pid := range s.Processes() {
		if syscall.Kill(pid, sig) == nil {
			n++
		}
	}
	return n
}

// Kill kills the server at once, as a crash would: every sshd process of it, SIGKILL.
// The connections it served drop.
func (s *Server) Kill() int {
	n := s.Signal(syscall.SIGKILL)
	if s.exited != nil {
		<-s.exited
	}
	return n
}

// Processes lists the pids of the server's sshd processes: the listener and its sshd
// descendants.
func (s *Server) Processes() []int {
	if s.cmd == nil || s.cmd.Process == nil {
		return nil
	}
	root := s.cmd.Process.Pid
	procs := Procs()
	var out []int
	for pid, p := range procs {
		if pid != root && !strings.HasPrefix(p.Comm, "sshd") {
			continue
		}
		if pid == root || Descends(procs, pid, root) {
			out = append(out, pid)
		}
	}
	return out
}

// Proc is one process of /proc.
type Proc struct {
	PPid int
	Comm string
	Exe  string
}

// Procs reads every process's parent, name and executable from /proc.
func Procs() map[int]Proc {
	out := map[int]Proc{}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		st := string(b)
		open, close := strings.IndexByte(st, '('), strings.LastIndexByte(st, ')')
		if open < 0 || close < open {
			continue
		}
		f := strings.Fields(st[close+1:])
		if len(f) < 2 || f[0] == "Z" {
			continue
		}
		ppid, _ := strconv.Atoi(f[1])
		exe, _ := os.Readlink(filepath.Join("/proc", e.Name(), "exe"))
		out[pid] = Proc{PPid: ppid, Comm: st[open+1 : close], Exe: exe}
	}
	return out
}

// Descends reports whether pid is a descendant of anc.
func Descends(procs map[int]Proc, pid, anc int) bool {
	for i := 0; i < 64 && pid > 1; i++ {
		p, ok := procs[pid]
		if !ok {
			return false
		}
		if p.PPid == anc {
			return true
		}
		pid = p.PPid
	}
	return false
}

// Dialer returns a dialer that reaches the server as the alias Alias through the client
// configuration, with no agent.
func (s *Server) Dialer() *ssh.Dialer {
	return &ssh.Dialer{ConfigFile: s.Config, AgentSocket: "none", Timeout: 5 * time.Second}
}

// SSHArgs are the arguments that make the ssh program reach the server as Alias in batch
// mode: ssh SSHArgs... Alias COMMAND.
func (s *Server) SSHArgs() []string {
	return []string{"-F", s.Config, "-o", "BatchMode=yes"}
}

// Home makes a fresh home whose ~/.ssh/config reaches the server as "box", and points
// HOME, XDG_CONFIG_HOME and XDG_CACHE_HOME into it (no agent: SSH_AUTH_SOCK empty), so that
// what the test runs finds the box as a user's ssh would. It returns the home.
func (s *Server) Home(t testing.TB) string {
	t.Helper()
	home := t.TempDir()
	b, err := os.ReadFile(s.Config)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(home, ".ssh"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(home, ".ssh", "config"), b, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("HOME", home)
	t.Setenv("XDG_CONFIG_HOME", filepath.Join(home, ".config"))
	t.Setenv("XDG_CACHE_HOME", filepath.Join(home, ".cache"))
	t.Setenv("SSH_AUTH_SOCK", "")
	return home
}
