package integration

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/creack/pty"

	"github.com/paddockhq/paddock/config"
	"github.com/paddockhq/paddock/internal/await"
	"github.com/paddockhq/paddock/orchestrator"
	"github.com/paddockhq/paddock/session"
)

// An egress test's sandbox: paddock run on one transport, in a workspace that holds the
// servers' CA, with one of the servers allowed by address in the trusted settings. paddock
// runs in a mount namespace of the test's own whose /etc/hosts names the host's address
// (asked.paddock.test, rebind.paddock.test) and a metadata address
// (metadata.paddock.test): names the proxy resolves as it would a DNS server's answers.
type egressBox struct {
	t     *testing.T
	bin   string
	ws    string
	conf  string // XDG_CONFIG_HOME: the trusted settings
	hosts string // the /etc/hosts paddock sees
	h     *netHost
	extra []string // run's flags for the transport
}

func newEgressBox(t *testing.T, kind string, extra ...string) *egressBox {
	t.Helper()
	if os.Geteuid() != 0 {
		needPeer(t, "the egress tests give paddock an /etc/hosts of their own in a mount namespace: they need root")
	}
	if _, err := exec.LookPath("unshare"); err != nil {
		needPeer(t, "no unshare (util-linux): %v", err)
	}
	b := &egressBox{t: t, bin: paddockBinary(t), ws: t.TempDir(), conf: t.TempDir(), extra: extra}
	b.h = startNetHost(t, b.ws)
	b.setAllow(b.h.https)
	b.hosts = filepath.Join(t.TempDir(), "hosts")
	hosts := fmt.Sprintf("127.0.0.1 localhost\n%s asked.paddock.test rebind.paddock.test\n169.254.169.254 metadata.paddock.test\n", b.h.addr)
	if err := os.WriteFile(b.hosts, []byte(hosts), 0o644); err != nil {
		t.Fatal(err)
	}
	if kind != "" {
		b.extra = append([]string{"--transport", kind}, b.extra...)
	}
	return b
}

// setAllow writes the trusted settings: network.allow and network.deny.
func (b *egressBox) setAllow(allow string, deny ...string) {
	b.t.Helper()
	os.MkdirAll(filepath.Join(b.conf, "paddock"), 0o700)
	settings := fmt.Sprintf("network:\n  allow: [%q]\n", allow)
	for _, d := range deny {
		settings += fmt.Sprintf("  deny: [%q]\n", d)
	}
	if err := os.WriteFile(filepath.Join(b.conf, "paddock", "settings.yaml"), []byte(settings), 0o600); err != nil {
		b.t.Fatal(err)
	}
}

// command is paddock run in the test's mount namespace; args come before the script.
func (b *egressBox) command(script string, args ...string) *exec.Cmd {
	argv := append(append(append([]string{"run"}, b.extra...), args...), "--", script)
	cmd := exec.Command("unshare", append([]string{"--mount", "--propagation", "private", "sh", "-c",
		`mount --bind "$0" /etc/hosts && exec "$@"`, b.hosts, b.bin}, argv...)...)
	cmd.Dir = b.ws
	cmd.Env = append(os.Environ(), "XDG_CONFIG_HOME="+b.conf)
	return cmd
}

// run runs a script with paddock run; args come before the script. The bound is a guard
// against a hang, not a measure.
func (b *egressBox) run(script string, args ...string) (stdout, stderr string, code int) {
	b.t.Helper()
	cmd := b.command(script, args...)
	var out, errOut strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errOut
	done := make(chan error, 1)
	if err := cmd.Start(); err != nil {
		b.t.Fatal(err)
	}
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(4 * time.Minute):
		cmd.Process.Kill()
		<-done
		b.t.Fatalf("paddock run %q did not end", script)
	}
	return out.String(), errOut.String(), cmd.ProcessState.ExitCode()
}

// expand puts the servers' addresses in a script: {HTTPS}, {HTTP}, {ECHO}, {PORT} (the
// HTTP server's port).
func (b *egressBox) expand(s string) string {
	_, port, _ := strings.Cut(b.h.http, ":")
	return strings.NewReplacer("{HTTPS}", b.h.https, "{HTTP}", b.h.http, "{ECHO}", b.h.echo, "{PORT}", port).Replace(s)
}

func TestEgressDocker(t *testing.T) {
	ensureHostImage(t, engine(t))
	runEgress(t, "docker")
}

func TestEgressContainerd(t *testing.T) {
	containerdDaemon(t)
	ensureHostImage(t, engine(t))
	runEgress(t, "containerd")
}

// A pool's warm sandbox, started before its session, carries the session's connections
// the same way.
func TestEgressDockerPool(t *testing.T) {
	ensureHostImage(t, engine(t))
	runEgress(t, "docker", "--pool", "1")
}

// poolCases are the cases a pooled sandbox runs: the path differs from an unpooled one's
// only in where the proxy's directory is bound, which these reach.
var poolCases = map[string]bool{"NoInterface": true, "Curl": true, "UnlistedRefused": true, "BadInput": true}

// runEgress: a container sandbox has no network interface; curl, git, go and pip reach
// allowed servers through the host's proxy; a target nobody listed is refused with nobody
// attached; a listed name that resolves to a loopback address is refused; a direct
// connection finds no route; garbage, half-open connections, a CONNECT to port 0 and a
// 10 MB header are refused or closed, and the session goes on.
func runEgress(t *testing.T, kind string, extra ...string) {
	b := newEgressBox(t, kind, extra...)
	for _, tc := range []struct {
		name   string
		script string
		args   []string
		want   []string // in stdout, in order
	}{
		{"NoInterface", "ls /sys/class/net", nil, []string{"lo\n"}},
		{"Curl", "curl -sS --cacert ca.pem https://{HTTPS}/hello; curl -sS http://{HTTP}/hello", []string{"--allow-net", "{HTTP}"},
			[]string{helloText, helloText}},
		{"Git", "git -c http.sslCAInfo=$PWD/ca.pem clone -q https://{HTTPS}/repo.git /tmp/clone && cat /tmp/clone/README", nil,
			[]string{repoFile}},
		{"Go", "export GOPROXY=https://{HTTPS}/goproxy GOSUMDB=off GONOSUMDB= GOFLAGS=-mod=mod GOMODCACHE=/tmp/gomod GOCACHE=/tmp/gocache GOTOOLCHAIN=local SSL_CERT_FILE=$PWD/ca.pem; " +
			"go mod download -json " + modulePath + "@" + moduleVer + " | grep -c '\"Zip\"'", nil, []string{"1\n"}},
		{"Pip", "python3 -m pip download --no-deps --no-cache-dir --disable-pip-version-check --index-url https://{HTTPS}/simple/ --cert ca.pem -d /tmp/dl hello-pkg >/dev/null && ls /tmp/dl",
			nil, []string{packageName + "-1.0-py3-none-any.whl\n"}},
		// Nobody is attached to answer: the connection is refused as unanswered, and the step
		// that made it sees the proxy's refusal.
		{"UnlistedRefused", "curl -sS -w ' %{http_code}' http://{HTTP}/hello", nil, []string{"paddock: unanswered:", " 403"}},
		// Listed by name, resolved to the host's loopback, to a private or reserved address of
		// the host's, to a metadata address: never reached unless named by address, whatever
		// the name resolves to.
		{"NameToLoopbackRefused", "curl -sS -w ' %{http_code}' http://localhost:{PORT}/hello", []string{"--allow-net", "localhost"},
			[]string{"paddock: reserved_address:", " 403"}},
		{"NameToHostRefused", "curl -sS -w ' %{http_code}' http://rebind.paddock.test:{PORT}/hello", []string{"--allow-net", "rebind.paddock.test"},
			[]string{"paddock: reserved_address:", " 403"}},
		{"NameToMetadataRefused", "curl -sS -w ' %{http_code}' http://metadata.paddock.test/latest/meta-data/", []string{"--allow-net", "*.paddock.test"},
			[]string{"paddock: reserved_address:", " 403"}},
		// Named by address, the same address is reached through a name that resolves to it.
		{"NameToListedAddress", "curl -sS http://rebind.paddock.test:{PORT}/hello", []string{"--allow-net", "rebind.paddock.test,{HTTP}"},
			[]string{helloText}},
		{"DeniedWins", "curl -sS -w ' %{http_code}' http://{HTTP}/hello", []string{"--allow-net", "{HTTP}"},
			[]string{"paddock: net_denied:", " 403"}},
		// A program that ignores the proxy reaches nothing: there is no route.
		{"DirectFails", "curl --noproxy '*' -sS --max-time 60 http://{HTTP}/hello; echo rc=$?", []string{"--allow-net", "{HTTP}"},
			[]string{"rc=7\n"}},
		{"BadInput", "python3 bad.py {HTTP} && curl -sS http://{HTTP}/hello", []string{"--allow-net", "{HTTP}"},
			[]string{"garbage: HTTP/1.1 400", "port0: HTTP/1.1 400", "bigheader: ", "halfopen: 50 open", helloText}},
	} {
		if slices.Contains(extra, "--pool") && !poolCases[tc.name] {
			continue
		}
		t.Run(tc.name, func(t *testing.T) {
			b := *b
			b.t = t
			if tc.name == "DeniedWins" {
				b.conf = t.TempDir()
				b.setAllow(b.h.https, b.h.http)
			}
			if tc.name == "BadInput" {
				os.WriteFile(filepath.Join(b.ws, "bad.py"), []byte(badInput), 0o644)
			}
			var args []string
			for _, a := range tc.args {
				args = append(args, b.expand(a))
			}
			out, errOut, code := b.run(b.expand(tc.script), args...)
			rest := out
			for _, w := range tc.want {
				w = b.expand(w)
				i := strings.Index(rest, w)
				if i < 0 {
					t.Fatalf("status %d, stdout %q lacks %q (in order)\nstderr: %s", code, out, w, errOut)
				}
				rest = rest[i+len(w):]
			}
			if tc.name == "BadInput" && !strings.Contains(out, "bigheader: HTTP/1.1 431") && !strings.Contains(out, "bigheader: closed") {
				t.Errorf("a 10 MB header was neither refused (431) nor closed: %q", out)
			}
		})
	}
}

// badInput is a sandbox program that sends the proxy what no client should: its argument is
// an allowed host:port.
const badInput = `import socket, sys
P = ("127.0.0.1", 3128)
target = sys.argv[1]

def talk(data):
    s = socket.create_connection(P)
    s.settimeout(120)
    try:
        s.sendall(data)
    except OSError:
        pass
    out = b""
    try:
        while True:
            b = s.recv(65536)
            if not b:
                break
            out += b
    except OSError:
        pass
    s.close()
    line = out.split(b"\r\n", 1)[0].decode(errors="replace")
    return line or "closed"

print("garbage:", talk(b"\x00\xff\xfe\x7f not http at all\r\n\r\n"))
print("port0:", talk(("CONNECT %s:0 HTTP/1.1\r\nHost: x\r\n\r\n" % target.split(":")[0]).encode()))
print("bigheader:", talk(("GET http://%s/hello HTTP/1.1\r\nHost: %s\r\nX-Big: " % (target, target)).encode() + b"a" * (10 << 20) + b"\r\n\r\n"))
half = []
for i in range(50):
    s = socket.create_connection(P)
    s.sendall(b"CONNECT " + target.encode())
    if i % 2:
        s.shutdown(socket.SHUT_WR)
    half.append(s)
print("halfopen: %d open" % len(half))
`

// A terminal attached to paddock run is asked about a connection nobody listed (a name
// that resolves to an address the settings list, for the dial to be allowed once a person
// said yes): no refuses it, yes lets it through, and the question names the target.
func TestEgressAskedOnTerminal(t *testing.T) {
	ensureHostImage(t, engine(t))
	b := newEgressBox(t, "docker")
	b.setAllow(b.h.http)
	for _, tc := range []struct {
		answer, want string
	}{
		{"n", "paddock: denied: asked.paddock.test:{PORT} is not in network.allow and was not approved (denied)\n 403"},
		{"y", helloText + " 200"},
	} {
		t.Run(tc.answer, func(t *testing.T) {
			cmd := b.command(b.expand("curl -sS -w ' %{http_code}' http://asked.paddock.test:{PORT}/hello"))
			tty, err := pty.Start(cmd)
			if err != nil {
				t.Fatal(err)
			}
			defer tty.Close()
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			t.Cleanup(func() { cmd.Process.Kill() })
			var seen strings.Builder
			buf := make([]byte, 4096)
			asked := false
			for {
				tty.SetReadDeadline(time.Now().Add(3 * time.Minute)) // a guard against a hang, not a measure
				n, err := tty.Read(buf)
				seen.Write(buf[:n])
				if !asked && strings.Contains(seen.String(), "Allow it?") {
					if !strings.Contains(seen.String(), b.expand("asks to connect to asked.paddock.test:{PORT} [net]")) {
						t.Errorf("the question does not name the target:\n%s", seen.String())
					}
					fmt.Fprintf(tty, "%s\n", tc.answer)
					asked = true
				}
				if err != nil {
					break
				}
			}
			<-done
			if !asked {
				t.Fatalf("no question was asked:\n%s", seen.String())
			}
			if want := b.expand(tc.want); !strings.Contains(strings.ReplaceAll(seen.String(), "\r\n", "\n"), want) {
				t.Errorf("answered %s; the terminal shows:\n%s\nwant %q", tc.answer, seen.String(), want)
			}
		})
	}
}

// A thousand connections at once through a container's kernel and the host's proxy, some
// closed, some half-closed, some left to the session's end, leave nothing behind: no
// connection open through the proxy, no descriptor in the kernel, no goroutine or
// descriptor in the host process once the session has closed.
func TestEgressThousandConnections(t *testing.T) {
	ensureHostImage(t, engine(t))
	ws, conf := t.TempDir(), t.TempDir()
	h := startNetHost(t, ws)
	settings := filepath.Join(conf, "settings.yaml")
	os.WriteFile(settings, []byte("kernelTransport:\n  kind: docker\n"), 0o600)
	os.WriteFile(filepath.Join(ws, "many.py"), []byte(manyConnections), 0o644)
	g0, f0 := runtime.NumGoroutine(), openFDs(t)
	ctx := context.Background()
	l, err := session.Load(config.Options{Workspace: ws, GlobalFile: settings})
	if err != nil {
		t.Fatal(err)
	}
	s, p, err := session.Open(ctx, session.Options{Workspace: ws, Settings: l, Transport: session.Transport{AllowNet: []string{h.echo}}})
	if err != nil {
		t.Fatal(err)
	}
	fds := func() int {
		r, err := s.Bash(ctx, "ls /proc/1/fd | wc -l")
		if err != nil || r.End.Status != 0 {
			t.Fatalf("%v %+v", err, r)
		}
		n, _ := strconv.Atoi(strings.TrimSpace(r.Steps[1].Stdout.Text))
		return n
	}
	kernel0 := fds()
	r, err := s.Run(ctx, orchestrator.Call{Script: "python3 many.py " + h.echo})
	if err != nil {
		t.Fatal(err)
	}
	if out := r.Steps[0].Stdout.Text; r.End.Status != 0 || out != "1000 echoed\n" {
		t.Fatalf("status %d, out %q, err %q", r.End.Status, out, r.Steps[0].Stderr.Text)
	}
	// The sandbox's program has ended: every connection through the proxy ends, and the
	// kernel holds what it held before.
	for s.EgressOpen() != 0 {
		runtime.Gosched()
	}
	for fds() > kernel0 {
		runtime.Gosched()
	}
	s.Close()
	p.Finish(ctx)
	settleProcess(t, g0, f0)
}

const manyConnections = `import socket, sys, selectors
target = sys.argv[1].encode()
conns = []
for i in range(1000):
    s = socket.create_connection(("127.0.0.1", 3128))
    s.sendall(b"CONNECT " + target + b" HTTP/1.1\r\nHost: " + target + b"\r\n\r\n")
    conns.append(s)
ok = 0
for i, s in enumerate(conns):
    head = b""
    while b"\r\n\r\n" not in head:
        b = s.recv(1)
        if not b:
            raise SystemExit("closed before the answer: %r" % head)
        head += b
    if not head.startswith(b"HTTP/1.1 200"):
        raise SystemExit("refused: %r" % head)
    s.sendall(b"ping %d\n" % i)
for i, s in enumerate(conns):
    want = b"ping %d\n" % i
    got = b""
    while len(got) < len(want):
        b = s.recv(len(want) - len(got))
        if not b:
            break
        got += b
    if got == want:
        ok += 1
for i, s in enumerate(conns):
    if i % 3 == 0:
        s.close()
    elif i % 3 == 1:
        s.shutdown(socket.SHUT_WR)
        while s.recv(4096):
            pass
        s.close()
print("%d echoed" % ok)
`

// openFDs counts this process's open descriptors.
func openFDs(t testing.TB) int {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

// settleProcess waits for the goroutines and descriptors a test made to end. Nothing
// announces their end: a bounded poll.
func settleProcess(t *testing.T, goroutines, fds int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var g, f int
	if err := await.Poll(ctx, 5*time.Millisecond, func() bool {
		g, f = runtime.NumGoroutine(), openFDs(t)
		return g <= goroutines && f <= fds
	}); err != nil {
		t.Fatalf("leaked: %d goroutines (began with %d), %d descriptors (began with %d)", g, goroutines, f, fds)
	}
}

// A local kernel reaches the network itself: with --egress proxy its steps are given the
// variables of a proxy on the host's loopback that judges what comes through it (a token
// keeps other programs of the host out), and paddock says the variables are advisory.
func TestEgressLocalProxy(t *testing.T) {
	b := newEgressBox(t, "local", "--egress", "proxy")
	out, errOut, code := b.run(b.expand("curl -sS --cacert ca.pem https://{HTTPS}/hello; curl -sS -w ' %{http_code}' http://{HTTP}/hello; printenv HTTPS_PROXY"))
	if code != 0 || !strings.HasPrefix(out, helloText+"paddock: unanswered:") || !strings.Contains(out, " 403") {
		t.Errorf("status %d, stdout %q, stderr %q", code, out, errOut)
	}
	if !strings.Contains(out, "http://paddock:") || !strings.Contains(errOut, "ignore") {
		t.Errorf("the proxy's URL carries no token, or paddock did not say the variables are advisory: %q %q", out, errOut)
	}
	// Without --egress proxy, an allow list cannot apply to a local kernel: said, not ignored.
	b.extra = []string{"--transport", "local"}
	_, errOut, _ = b.run("true", "--allow-net", "example.com")
	if !strings.Contains(errOut, "--egress proxy") {
		t.Errorf("--allow-net on a local kernel without the proxy: stderr %q", errOut)
	}
}
