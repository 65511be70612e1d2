//go:build linux

package kernel

import (
	"encoding/json"
	"net"
	"os"
	"sync"
	"syscall"

	"github.com/paddockhq/paddock/script"
	"github.com/paddockhq/paddock/transport/wire"
)

// judges carries the judges of one exec's shells (shell.go) to the host and the host's
// verdicts back. Each shell numbers its own judges; the host sees one numbering per exec.
type judges struct {
	s    *server
	exec string

	mu      sync.Mutex
	next    int                  // guarded by mu: the last judge's number
	pending map[int]pendingJudge // guarded by mu: judges sent, by the host's number
	shells  map[*shellConn]bool  // guarded by mu
}

// pendingJudge is a judge waiting for its verdict: which shell asked it, under which number.
type pendingJudge struct {
	sh *shellConn
	n  int
}

// shellConn is the kernel's end of one shell's channel.
type shellConn struct {
	c   net.Conn
	wmu sync.Mutex
	w   *wire.Writer // guarded by wmu
}

func (c *shellConn) write(f *wire.Frame) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	return c.w.Write(f)
}

func newJudges(s *server, exec string) *judges {
	return &judges{s: s, exec: exec, pending: map[int]pendingJudge{}, shells: map[*shellConn]bool{}}
}

// shellChannel makes the channel of a shell about to start: the child's end, to be its
// descriptor ShellFD, and the kernel's.
func shellChannel() (child int, kernel *shellConn, err error) {
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, nil, err
	}
	f := os.NewFile(uintptr(fds[0]), "shell")
	c, err := net.FileConn(f)
	f.Close()
	if err != nil {
		syscall.Close(fds[1])
		return -1, nil, err
	}
	return fds[1], &shellConn{c: c, w: wire.NewWriter(c)}, nil
}

// serve sends a started shell its script, then carries its judges to the host until it
// ends. A judge the host no longer answers (the shell is gone) is dropped with it.
func (j *judges) serve(sh *shellConn, inv script.Invocation) {
	defer sh.c.Close()
	body, err := json.Marshal(inv)
	if err != nil || sh.write(&wire.Frame{Event: wire.EventRequest, Type: "shell", Body: body}) != nil {
		return
	}
	j.mu.Lock()
	j.shells[sh] = true
	j.mu.Unlock()
	defer func() {
		j.mu.Lock()
		delete(j.shells, sh)
		for n, p := range j.pending {
			if p.sh == sh {
				delete(j.pending, n)
			}
		}
		j.mu.Unlock()
	}()
	lines := wire.NewReader(sh.c)
	for {
		line, err := lines.Next()
		if err != nil {
			return
		}
		f, err := wire.Decode(line.Bytes)
		if err != nil || f.Event != wire.EventJudge || f.Step <= 0 {
			j.s.log.Warn("line from a shell ignored", "exec", j.exec)
			continue
		}
		j.mu.Lock()
		j.next++
		n := j.next
		j.pending[n] = pendingJudge{sh: sh, n: f.Step}
		j.mu.Unlock()
		j.s.out.write(&wire.Frame{Event: wire.EventJudge, ID: j.exec, Step: n, Body: f.Body})
	}
}

// deliver hands the host's verdict on judge n to the shell that asked it; false when none
// waits for it.
func (j *judges) deliver(n int, body json.RawMessage) bool {
	j.mu.Lock()
	p, ok := j.pending[n]
	delete(j.pending, n)
	j.mu.Unlock()
	if !ok {
		return false
	}
	p.sh.write(&wire.Frame{Event: wire.EventVerdict, Step: p.n, Body: body})
	return true
}

// ownEnv is what the kernel adds to every program's environment: where the host socket is.
func (s *server) ownEnv() []string {
	if s.socket == "" {
		return nil
	}
	return []string{HostSocketEnv + "=" + s.socket}
}
