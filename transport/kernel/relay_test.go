//go:build linux

package kernel_test

import (
	"bufio"
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/paddockhq/paddock/transport/wire"
)

func TestPing(t *testing.T) {
	k := startKernel(t, "")
	h := k.hello()
	if h.PID != k.cmd.Process.Pid || h.OS != "linux" || h.Arch == "" || h.Version == "" {
		t.Errorf("hello %+v", h)
	}
	fi, err := os.Lstat(h.HostSocket)
	if err != nil || fi.Mode()&os.ModeSocket == 0 {
		t.Fatalf("host socket %s: %v %v", h.HostSocket, fi, err)
	}
	di, err := os.Lstat(filepath.Dir(h.HostSocket))
	if err != nil || !di.IsDir() || di.Mode().Perm() != 0o700 {
		t.Errorf("socket directory: %v %v", di.Mode(), err)
	}
}

// answer plays the host: it takes the next host request and replies to it.
func (k *kern) answer(t *testing.T, wantType string, reply func(wire.Frame) *wire.Frame) wire.Frame {
	t.Helper()
	f, ok := k.hostRequest(guard)
	if !ok {
		t.Fatal("no host request")
	}
	if f.Type != wantType || f.ID == "" {
		t.Fatalf("host request %+v", f)
	}
	k.send(reply(f))
	return f
}

func okReply(body string) func(wire.Frame) *wire.Frame {
	return func(f wire.Frame) *wire.Frame {
		return &wire.Frame{Event: wire.EventReply, ID: f.ID, Status: wire.StatusOK, Body: json.RawMessage(body)}
	}
}

// A program in the sandbox reaches the host through the kernel, and the host's answer comes
// back to it: `paddock-kernel host` prints the body, or the error with exit 1.
func TestHostClientThroughTheKernel(t *testing.T) {
	k := startKernel(t, "")
	id := k.startExec(pipeline(argv(kernelBin, "host", "fs.read", `{"path":"/w/x"}`)))
	req := k.answer(t, "fs.read", okReply(`{"content":"hi"}`))
	if string(req.Body) != `{"path":"/w/x"}` {
		t.Errorf("relayed body %s", req.Body)
	}
	r := k.wait(id)
	if r.codes()[0] != 0 || r.stdout(0) != `{"content":"hi"}`+"\n" {
		t.Errorf("ok: %+v %q %q", r.statuses, r.stdout(0), r.stderr(0))
	}

	id = k.startExec(pipeline(argv(kernelBin, "host", "fs.write", `{}`)))
	k.answer(t, "fs.write", func(f wire.Frame) *wire.Frame {
		return wire.ErrorReply(f.ID, wire.StatusError, "denied", "not allowed here")
	})
	r = k.wait(id)
	if r.codes()[0] != 1 || r.stderr(0) != "denied: not allowed here\n" || r.stdout(0) != "" {
		t.Errorf("error: %+v %q %q", r.statuses, r.stdout(0), r.stderr(0))
	}

	// The body from standard input.
	x := wire.Exec{Commands: []wire.Command{
		{Argv: []string{"echo", `{"n":1}`}},
		{Argv: []string{kernelBin, "host", "session.spawn", "-"}},
	}}
	id = k.startExec(x)
	req = k.answer(t, "session.spawn", okReply(`null`))
	if string(req.Body) != `{"n":1}` {
		t.Errorf("body from stdin %s", req.Body)
	}
	if r = k.wait(id); r.codes()[1] != 0 || r.stdout(1) != "null\n" {
		t.Errorf("stdin body: %+v %q", r.statuses, r.stdout(1))
	}

	// A bad body is a usage error, and nothing reaches the host.
	r = k.run(pipeline(argv(kernelBin, "host", "fs.read", `{not json`)))
	if r.codes()[0] != 2 {
		t.Errorf("bad JSON: %+v", r.statuses)
	}
	if f, ok := k.hostRequest(50 * time.Millisecond); ok {
		t.Errorf("host request for a usage error: %+v", f)
	}
}

// Requests in flight at once are answered each with its own reply, whatever the order the
// host answers in.
func TestHostRequestsInFlight(t *testing.T) {
	k := startKernel(t, "")
	const n = 5
	ids := make([]string, n)
	for i := range n {
		ids[i] = k.startExec(pipeline(argv(kernelBin, "host", "fs.read", `{"i":`+string(rune('0'+i))+`}`)))
	}
	var reqs []wire.Frame
	for range n {
		f, ok := k.hostRequest(guard)
		if !ok {
			t.Fatal("host requests missing")
		}
		reqs = append(reqs, f)
	}
	seen := make(map[string]bool)
	for i := len(reqs) - 1; i >= 0; i-- { // last asked, first answered
		if seen[reqs[i].ID] {
			t.Fatalf("id %s used twice", reqs[i].ID)
		}
		seen[reqs[i].ID] = true
		k.send(&wire.Frame{Event: wire.EventReply, ID: reqs[i].ID, Status: wire.StatusOK, Body: reqs[i].Body})
	}
	for i, id := range ids {
		if r := k.wait(id); r.stdout(0) != `{"i":`+string(rune('0'+i))+"}\n" {
			t.Errorf("exec %d got %q", i, r.stdout(0))
		}
	}
}

// On one connection, requests go one after another, each answered on it.
func TestHostSocketOneConnection(t *testing.T) {
	k := startKernel(t, "")
	c, err := net.Dial("unix", k.hello().HostSocket)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	rd := bufio.NewReader(c)
	for i, typ := range []string{"fs.glob", "fs.grep"} {
		if _, err := c.Write([]byte(`{"type":"` + typ + `","body":{"q":` + string(rune('1'+i)) + "}}\n")); err != nil {
			t.Fatal(err)
		}
		k.answer(t, typ, okReply(`"answer `+typ+`"`))
		line, err := rd.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		f, err := wire.Decode([]byte(strings.TrimSuffix(line, "\n")))
		if err != nil || f.Status != wire.StatusOK || string(f.Body) != `"answer `+typ+`"` {
			t.Errorf("reply %q: %v", line, err)
		}
	}
	// A line that is not a request is refused on the connection, without reaching the host;
	// so is one that is not UTF-8, in its type or its body, and the connection goes on.
	c.SetReadDeadline(time.Now().Add(10 * time.Second)) // a refusal that never comes fails
	for _, bad := range []string{"{\"body\":1}", "{\"type\":\"fs.glob\xff\"}", "{\"type\":\"fs.glob\",\"body\":{\"q\":\"\xc3\"}}"} {
		c.Write([]byte(bad + "\n"))
		line, err := rd.ReadString('\n')
		if err != nil || !strings.Contains(line, `"bad_request"`) {
			t.Errorf("refusal of %q: %q %v", bad, line, err)
		}
	}
	if f, ok := k.hostRequest(50 * time.Millisecond); ok {
		t.Errorf("a bad request reached the host: %+v", f)
	}
	c.Write([]byte(`{"type":"fs.glob","body":{"q":"é"}}` + "\n"))
	req := k.answer(t, "fs.glob", okReply(`"after"`))
	if string(req.Body) != `{"q":"é"}` {
		t.Errorf("relayed body %s", req.Body)
	}
	if line, err := rd.ReadString('\n'); err != nil || !strings.Contains(line, `"after"`) {
		t.Errorf("reply after the refusals %q %v", line, err)
	}
}

// The client's exit codes when the host cannot be reached, and on a wrong command line.
func TestHostClientExitCodes(t *testing.T) {
	dir := t.TempDir()
	cases := []struct {
		name string
		env  []string
		args []string
		code int
	}{
		{"no type", nil, nil, 2},
		{"too many", nil, []string{"a", "{}", "x"}, 2},
		{"bad json", []string{"PADDOCK_HOST_SOCKET=" + filepath.Join(dir, "s")}, []string{"fs.read", "{"}, 2},
		{"no socket variable", nil, []string{"fs.read", "{}"}, 3},
		{"no socket there", []string{"PADDOCK_HOST_SOCKET=" + filepath.Join(dir, "s")}, []string{"fs.read", "{}"}, 3},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cmd := exec.Command(kernelBin, append([]string{"host"}, c.args...)...)
			cmd.Env = append([]string{"PATH=" + os.Getenv("PATH")}, c.env...)
			err := cmd.Run()
			code := 0
			if ee, ok := err.(*exec.ExitError); ok {
				code = ee.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			if code != c.code {
				t.Errorf("exit %d, want %d", code, c.code)
			}
		})
	}
}

// A program waiting on the host when the kernel ends gets an error, not a hang.
func TestHostRequestAtShutdown(t *testing.T) {
	k := startKernel(t, "")
	c, err := net.Dial("unix", k.hello().HostSocket)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.Write([]byte(`{"type":"fs.read"}` + "\n"))
	if _, ok := k.hostRequest(guard); !ok {
		t.Fatal("no host request")
	}
	k.stdin.Close()
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil || !strings.Contains(line, `"io"`) {
		t.Errorf("reply at shutdown %q %v", line, err)
	}
}

// A sandbox with more programs asking at once than the host serves at once: the kernel keeps
// at most wire.MaxHostRequests waiting for their replies and holds the rest until a reply
// comes, so none is refused busy by the host; every program gets its own answer.
// law: request_not_held_back
func TestHostRequestsBoundedByTheKernel(t *testing.T) {
	k := startKernel(t, "")
	sock := k.hello().HostSocket
	const n = wire.MaxHostRequests + 16
	conns := make([]net.Conn, n)
	for i := range conns {
		c, err := net.Dial("unix", sock)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if _, err := c.Write([]byte(`{"type":"fs.read","body":{"i":` + strconv.Itoa(i) + "}}\n")); err != nil {
			t.Fatal(err)
		}
		conns[i] = c
	}
	var waiting []wire.Frame
	for len(waiting) < wire.MaxHostRequests {
		f, ok := k.hostRequest(guard)
		if !ok {
			t.Fatalf("%d host requests came, want %d", len(waiting), wire.MaxHostRequests)
		}
		waiting = append(waiting, f)
	}
	// Absence can only be seen by waiting: under load this passes when it should not, never
	// the other way.
	if f, ok := k.hostRequest(300 * time.Millisecond); ok {
		t.Fatalf("host request %s sent with %d already waiting", f.ID, len(waiting))
	}
	for answered := 0; answered < n; answered++ {
		f := waiting[0]
		waiting = waiting[1:]
		k.send(&wire.Frame{Event: wire.EventReply, ID: f.ID, Status: wire.StatusOK, Body: f.Body})
		if answered+len(waiting)+1 < n {
			next, ok := k.hostRequest(guard)
			if !ok {
				t.Fatalf("no host request after %d answers", answered+1)
			}
			waiting = append(waiting, next)
		}
	}
	for i, c := range conns {
		line, err := bufio.NewReader(c).ReadString('\n')
		if err != nil || !strings.Contains(line, `"body":{"i":`+strconv.Itoa(i)+"}") {
			t.Errorf("program %d got %q, %v", i, line, err)
		}
	}
}
