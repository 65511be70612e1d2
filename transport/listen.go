package transport

import (
	"bufio"
	"context"
	"crypto/hmac"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/paddockhq/paddock/transport/wire"
)

// A listening kernel's files, in its listening directory.
const (
	ListenDir    = "/.paddock/run" // where a container transport binds Spec.Listen
	ListenSocket = "kernel.sock"
	ListenKey    = "key" // the key file; the kernel removes it once read
)

// ListenArgs are the arguments for spec's kernel to listen in ListenDir.
func ListenArgs(spec Spec) []string {
	args := []string{"-listen", ListenDir + "/" + ListenSocket, "-key-file", ListenDir + "/" + ListenKey}
	if spec.Once {
		args = append(args, "-once")
	}
	return args
}

// ListenAs says whether a kernel that runs as uid (-1: not known) can listen in a private
// directory this process makes: one of its own uid, or of any uid when this process is root
// (the directory is then given to the kernel's uid). A transport whose kernel cannot listen
// starts it on its standard streams: the session works, but does not outlive its host.
func ListenAs(uid int) bool { return uid >= 0 && (uid == os.Getuid() || os.Getuid() == 0) }

// PrepareListen writes the key file for a kernel started with ListenArgs into spec.Listen.
// uid is the sandbox user the kernel runs as (ListenAs): the directory and the file become
// its own.
func PrepareListen(spec Spec, uid, gid int) error {
	if spec.Key == "" {
		return errors.New("listen: no key")
	}
	// The directory is the sandbox's to write: whatever an earlier sandbox left there (a
	// symlink named like the key, say) goes, and the key is written only as a new file.
	if err := os.RemoveAll(spec.Listen); err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	if err := os.MkdirAll(spec.Listen, 0o700); err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	key := filepath.Join(spec.Listen, ListenKey)
	f, err := os.OpenFile(key, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	_, err = f.Write([]byte(spec.Key))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	if uid != os.Getuid() {
		for _, p := range []string{spec.Listen, key} {
			if err := os.Chown(p, uid, gid); err != nil {
				return fmt.Errorf("listen: the kernel runs as uid %d and cannot use %s: %w", uid, spec.Listen, err)
			}
		}
	}
	return nil
}

// maxResume bounds the resume frame's line.
const maxResume = 64 << 10

// Attach connects to the kernel listening in dir and attaches with key, trying again while
// the socket is not there yet, until ctx ends or ended is closed (the sandbox ended). It
// returns the connection with the resume frame read.
func Attach(ctx context.Context, dir, key string, ended <-chan struct{}) (*Attached, error) {
	a, err := AttachBy(ctx, func() (Conn, error) { return dialIn(dir, ListenSocket) }, key, ended)
	if err != nil && ctx.Err() != nil {
		return nil, fmt.Errorf("the kernel does not listen in %s: %w", dir, err)
	}
	return a, err
}

// Conn is a connection to a listening kernel: a unix socket's, or a channel's to one on a
// remote box (ssh's direct-streamlocal).
type Conn interface {
	net.Conn
	CloseWrite() error
}

// AttachBy is Attach over the connections dial makes: it tries again while dial fails (the
// socket is not there yet), until ctx ends or ended is closed.
func AttachBy(ctx context.Context, dial func() (Conn, error), key string, ended <-chan struct{}) (*Attached, error) {
	// A kernel just started listens within milliseconds: look often at first, then less.
	wait := time.Millisecond
	for {
		c, err := dial()
		if err == nil {
			a, err := attach(ctx, c, key)
			if err != nil {
				c.Close()
				return nil, err
			}
			return a, nil
		}
		select {
		case <-ctx.Done():
			return nil, err
		case <-ended:
			return nil, fmt.Errorf("the sandbox ended before its kernel listened: %w", ErrGone)
		case <-time.After(wait):
		}
		wait = min(2*wait, 20*time.Millisecond)
	}
}

// dialIn connects to the socket name in dir. The directory is the sandbox's to write, so
// the name is opened without following a symlink and must be a socket; the connection goes
// through that descriptor, so nothing can be swapped in between (and a path too long for a
// socket address is no matter).
func dialIn(dir, name string) (*net.UnixConn, error) {
	p := filepath.Join(dir, name)
	fd, err := unix.Open(p, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: p, Err: err}
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, &os.PathError{Op: "stat", Path: p, Err: err}
	}
	if st.Mode&unix.S_IFMT != unix.S_IFSOCK {
		return nil, fmt.Errorf("%s is not a socket", p)
	}
	return net.DialUnix("unix", nil, &net.UnixAddr{Name: fmt.Sprintf("/proc/self/fd/%d", fd), Net: "unix"})
}

// attach attaches to the kernel at the other end of c: a nonce of the host's, the kernel's
// challenge, whose proof of the key is checked before the host proves it holds the key too.
// The key never crosses the connection: its other end may be a program of the sandbox's (a
// socket it swapped in), which learns nothing it could attach with, and is refused here.
func attach(ctx context.Context, c Conn, key string) (*Attached, error) {
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(10 * time.Second)
	}
	c.SetDeadline(deadline)
	w := wire.NewWriter(c)
	hostNonce := wire.NewNonce()
	body, _ := json.Marshal(wire.Attach{Nonce: hostNonce})
	if err := w.Write(&wire.Frame{Event: wire.EventAttach, Body: body}); err != nil {
		return nil, fmt.Errorf("attach: %w", err)
	}
	br := bufio.NewReaderSize(c, maxResume)
	line, err := br.ReadSlice('\n')
	if err != nil {
		return nil, fmt.Errorf("attach: no challenge from the kernel: %w", err)
	}
	ch, err := ParseChallenge(line)
	if err != nil {
		return nil, err
	}
	if !hmac.Equal([]byte(ch.Proof), []byte(wire.Proof(key, wire.ProofKernel, hostNonce, ch.Nonce))) {
		return nil, &wire.ProtocolFault{Reason: "what listens does not hold the kernel's key: not the session's kernel"}
	}
	body, _ = json.Marshal(wire.Prove{Proof: wire.Proof(key, wire.ProofHost, hostNonce, ch.Nonce)})
	if err := w.Write(&wire.Frame{Event: wire.EventProve, Body: body}); err != nil {
		return nil, fmt.Errorf("attach: %w", err)
	}
	line, err = br.ReadSlice('\n')
	if err != nil {
		return nil, fmt.Errorf("attach: no resume frame from the kernel: %w", err)
	}
	res, err := ParseResume(line)
	if err != nil {
		return nil, err
	}
	c.SetDeadline(time.Time{})
	return &Attached{Conn: c, resume: res, r: &rest{b: br, c: c}}, nil
}

// ParseChallenge reads a kernel's challenge, the answer to an attach. It comes from the
// sandbox: anything but a well-formed one is a protocol fault.
func ParseChallenge(line []byte) (wire.Challenge, error) {
	f, err := wire.Decode(line)
	if err != nil {
		return wire.Challenge{}, err
	}
	var ch wire.Challenge
	switch {
	case f.Event != wire.EventChallenge:
		return ch, &wire.ProtocolFault{Reason: fmt.Sprintf("the answer to an attach is %q, not challenge", f.Event)}
	case json.Unmarshal(f.Body, &ch) != nil:
		return ch, &wire.ProtocolFault{Reason: "the challenge's body does not decode"}
	case !wire.ValidNonce(ch.Nonce):
		return ch, &wire.ProtocolFault{Reason: "the challenge's nonce is malformed"}
	}
	return ch, nil
}

// ParseResume reads a kernel's resume frame. It comes from the sandbox: anything but a
// well-formed one is a protocol fault.
func ParseResume(line []byte) (wire.Resume, error) {
	f, err := wire.Decode(line)
	if err != nil {
		return wire.Resume{}, err
	}
	var res wire.Resume
	switch {
	case f.Event != wire.EventResume:
		return res, &wire.ProtocolFault{Reason: fmt.Sprintf("the first frame is %q, not resume", f.Event)}
	case json.Unmarshal(f.Body, &res) != nil:
		return res, &wire.ProtocolFault{Reason: "the resume frame's body does not decode"}
	case res.Replay < 0 || uint64(res.Replay) > res.Last:
		return res, &wire.ProtocolFault{Reason: fmt.Sprintf("the resume frame replays %d frames of %d", res.Replay, res.Last)}
	}
	seen := map[string]bool{}
	for _, x := range res.Execs {
		if x.ID == "" || seen[x.ID] || x.Skipped < 0 {
			return res, &wire.ProtocolFault{Reason: "the resume frame's execs are malformed"}
		}
		seen[x.ID] = true
	}
	return res, nil
}

// Attached is the connection to a listening kernel, from after its resume frame.
type Attached struct {
	Conn   Conn
	resume wire.Resume
	r      io.Reader
}

// Resume is the resume frame the kernel opened the connection with.
func (a *Attached) Resume() (wire.Resume, bool) { return a.resume, true }

// Stdout reads the frames after the resume frame.
func (a *Attached) Stdout() io.Reader { return a.r }

// Stdin writes frames; closing it ends the connection's writing half: the kernel lives on.
func (a *Attached) Stdin() io.WriteCloser { return halfClose{a.Conn} }

// Listening is a listening kernel as a Kernel: its frames go over a's connection, and
// sandbox waits for and ends the sandbox it runs in (its container), as Kernel says.
func Listening(a *Attached, sandbox interface {
	Wait() error
	Kill() error
}) Kernel {
	return listening{a, sandbox}
}

type listening struct {
	*Attached
	sandbox interface {
		Wait() error
		Kill() error
	}
}

func (l listening) Wait() error { return l.sandbox.Wait() }
func (l listening) Kill() error { return l.sandbox.Kill() }

type halfClose struct{ c Conn }

func (h halfClose) Write(p []byte) (int, error) { return h.c.Write(p) }
func (h halfClose) Close() error                { return h.c.CloseWrite() }

// rest reads what a bufio.Reader holds, then the connection itself.
type rest struct {
	b *bufio.Reader
	c net.Conn
}

func (r *rest) Read(p []byte) (int, error) {
	if r.b != nil {
		if r.b.Buffered() > 0 {
			return r.b.Read(p)
		}
		r.b = nil
	}
	return r.c.Read(p)
}
