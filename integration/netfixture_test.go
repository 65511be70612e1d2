package integration

import (
	"archive/zip"
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// netHost is what a sandbox's steps reach through the host's proxy in the egress tests: an
// HTTP and an HTTPS server on an address of the host that is not loopback (a sandbox's own
// loopback is its own, and Go's HTTP client never sends a loopback target to a proxy),
// serving a page, a git repository (git's dumb HTTP protocol), a Go module proxy and a
// Python package index; and the certificate authority of the HTTPS server, in the
// workspace for the sandbox's programs to trust.
type netHost struct {
	addr  netip.Addr
	http  string // host:port of the HTTP server
	https string // host:port of the HTTPS server
	ca    string // the CA's PEM, a file of the workspace
	echo  string // host:port of a TCP echo server
}

// Fixtures the servers give.
const (
	helloText   = "hello from the host\n"
	repoFile    = "fetched through the proxy\n"
	modulePath  = "example.com/hello"
	moduleVer   = "v1.0.0"
	packageName = "hello_pkg"
)

// hostAddress is an address of this machine outside loopback, on an interface that is up.
func hostAddress(t testing.TB) netip.Addr {
	t.Helper()
	ifs, err := net.Interfaces()
	if err != nil {
		t.Fatal(err)
	}
	for _, i := range ifs {
		if i.Flags&net.FlagUp == 0 || i.Flags&net.FlagLoopback != 0 {
			continue
		}
		addrs, _ := i.Addrs()
		for _, a := range addrs {
			p, err := netip.ParsePrefix(a.String())
			if err == nil && p.Addr().Is4() {
				return p.Addr()
			}
		}
	}
	needPeer(t, "no IPv4 address of this machine outside loopback for the egress tests' servers")
	return netip.Addr{}
}

// startNetHost starts the servers for a test; ws receives the CA's certificate as ca.pem.
func startNetHost(t testing.TB, ws string) *netHost {
	t.Helper()
	h := &netHost{addr: hostAddress(t), ca: filepath.Join(ws, "ca.pem")}
	caPEM, cert := certificates(t, h.addr)
	if err := os.WriteFile(h.ca, caPEM, 0o644); err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/hello", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, helloText) })
	mux.HandleFunc("/big/{n}", func(w http.ResponseWriter, r *http.Request) {
		var n int64
		fmt.Sscan(r.PathValue("n"), &n)
		w.Header().Set("Content-Length", fmt.Sprint(n))
		io.CopyN(w, zeros{}, n)
	})
	mux.Handle("/repo.git/", http.StripPrefix("/repo.git/", http.FileServer(http.Dir(bareRepo(t)))))
	serveModule(t, mux)
	servePackage(t, mux)
	serve := func(tc *tls.Config) string {
		l, err := net.Listen("tcp", netip.AddrPortFrom(h.addr, 0).String())
		if err != nil {
			t.Fatal(err)
		}
		if tc != nil {
			l = tls.NewListener(l, tc)
		}
		srv := &http.Server{Handler: mux, ReadHeaderTimeout: time.Minute}
		go srv.Serve(l)
		t.Cleanup(func() { srv.Close() })
		return l.Addr().String()
	}
	h.http = serve(nil)
	h.https = serve(&tls.Config{Certificates: []tls.Certificate{cert}})
	echo, err := net.Listen("tcp", netip.AddrPortFrom(h.addr, 0).String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { echo.Close() })
	go func() {
		for {
			c, err := echo.Accept()
			if err != nil {
				return
			}
			go func() { io.Copy(c, c); c.Close() }()
		}
	}()
	h.echo = echo.Addr().String()
	return h
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

// certificates makes a CA and a server certificate for addr, signed by it.
func certificates(t testing.TB, addr netip.Addr) (caPEM []byte, cert tls.Certificate) {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	ca := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "paddock egress test CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	leaf := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: addr.String()},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour), IPAddresses: []net.IP{addr.AsSlice()},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, leaf, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// bareRepo makes a bare git repository of one commit, ready for git's dumb HTTP protocol.
func bareRepo(t testing.TB) string {
	t.Helper()
	dir := t.TempDir()
	work, bare := filepath.Join(dir, "work"), filepath.Join(dir, "repo.git")
	git := func(in string, args ...string) {
		t.Helper()
		cmd := exec.Command("git", args...)
		cmd.Dir = in
		cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null",
			"GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	os.MkdirAll(work, 0o755)
	git(work, "init", "-q", "-b", "main")
	os.WriteFile(filepath.Join(work, "README"), []byte(repoFile), 0o644)
	git(work, "add", "README")
	git(work, "commit", "-q", "-m", "one")
	git(dir, "clone", "-q", "--bare", work, bare)
	git(bare, "update-server-info")
	return bare
}

// serveModule serves a Go module proxy (GOPROXY protocol) of one module at /goproxy/.
func serveModule(t testing.TB, mux *http.ServeMux) {
	t.Helper()
	gomod := "module " + modulePath + "\n\ngo 1.21\n"
	var zb bytes.Buffer
	zw := zip.NewWriter(&zb)
	for name, body := range map[string]string{"go.mod": gomod, "hello.go": "package hello\n\nconst Hello = \"hello\"\n"} {
		w, err := zw.Create(modulePath + "@" + moduleVer + "/" + name)
		if err != nil {
			t.Fatal(err)
		}
		io.WriteString(w, body)
	}
	zw.Close()
	files := map[string][]byte{
		"list":              []byte(moduleVer + "\n"),
		moduleVer + ".info": fmt.Appendf(nil, `{"Version":%q,"Time":"2026-01-01T00:00:00Z"}`, moduleVer),
		moduleVer + ".mod":  []byte(gomod),
		moduleVer + ".zip":  zb.Bytes(),
	}
	mux.HandleFunc("/goproxy/"+modulePath+"/@v/{file}", func(w http.ResponseWriter, r *http.Request) {
		b, ok := files[r.PathValue("file")]
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Write(b)
	})
}

// servePackage serves a Python package index (PEP 503's simple API) of one wheel.
func servePackage(t testing.TB, mux *http.ServeMux) {
	t.Helper()
	wheel := packageName + "-1.0-py3-none-any.whl"
	info := packageName + "-1.0.dist-info/"
	var zb bytes.Buffer
	zw := zip.NewWriter(&zb)
	var record strings.Builder
	for _, f := range []struct{ name, body string }{
		{packageName + "/__init__.py", "HELLO = 'hello'\n"},
		{info + "METADATA", "Metadata-Version: 2.1\nName: hello-pkg\nVersion: 1.0\n"},
		{info + "WHEEL", "Wheel-Version: 1.0\nGenerator: paddock-test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"},
	} {
		w, err := zw.Create(f.name)
		if err != nil {
			t.Fatal(err)
		}
		io.WriteString(w, f.body)
		fmt.Fprintf(&record, "%s,,\n", f.name)
	}
	w, _ := zw.Create(info + "RECORD")
	io.WriteString(w, record.String()+info+"RECORD,,\n")
	zw.Close()
	mux.HandleFunc("/simple/hello-pkg/", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "<!DOCTYPE html><html><body><a href=\"/files/%s\">%s</a></body></html>\n", wheel, wheel)
	})
	mux.HandleFunc("/files/"+wheel, func(w http.ResponseWriter, r *http.Request) { w.Write(zb.Bytes()) })
}
