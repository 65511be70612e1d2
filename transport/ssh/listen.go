package ssh

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"path"
	"strings"
	"sync"
	"time"

	xssh "golang.org/x/crypto/ssh"

	"github.com/paddockhq/paddock/transport"
)

// A kernel on a box that outlives its host. Started with Spec.Listen, it listens on a unix
// socket in a private directory of its own on the box (remoteListen), its output going to a
// log there, not to the channel that started it: when the host dies and its connection
// with it, the kernel and what it runs go on (sshd ends no process of a session without a
// terminal). A host reaches the socket over the connection's direct-streamlocal channel:
// the first as it starts the kernel, a new one after the first died (Reattach). The box is
// the sandbox's, as a container is: the key goes in a 0600 file the kernel removes once
// read, and the socket serves only a connection that attaches with it.

var _ transport.Reattacher = (*Transport)(nil)

// listenRoot is where kernels listen on a box, under its home.
const listenRoot = "~/.cache/paddock/listen"

// remoteListen is the directory on the box of a kernel started with the host's spec.Listen.
func remoteListen(home, listen string) string {
	sum := sha256.Sum256([]byte(listen))
	return path.Join(cacheDir(listenRoot, home), hex.EncodeToString(sum[:12]))
}

// startListening starts a kernel listening on the box and attaches to it. A box that does
// not forward to unix sockets (AllowStreamLocalForwarding no) gets a kernel on its
// standard streams, as Start without Listen: the session works, and ends with its host.
func (t *Transport) startListening(ctx context.Context, spec transport.Spec) (transport.Kernel, error) {
	l, s, err := t.session(ctx, spec)
	if err != nil {
		return nil, err
	}
	fail := func(err error) (transport.Kernel, error) {
		s.Close()
		l.Release()
		if lost := l.Conn.Lost(); lost != nil {
			return nil, lost
		}
		if CodeOf(err) == "" {
			err = &Error{Code: CodeBox, Host: t.Host, Err: err}
		}
		return nil, err
	}
	b, err := l.Conn.probe(ctx)
	if err != nil {
		return fail(err)
	}
	dir := remoteListen(b.home, spec.Listen)
	sock := path.Join(dir, transport.ListenSocket)
	// Whether the box forwards to a unix socket: a dial to one that is not there yet is
	// refused as a failed connection; a server that forwards none refuses the channel
	// itself (prohibited, or a type it does not know).
	why := ""
	if len(sock) > maxSocketPath {
		why = fmt.Sprintf("its socket's path would be too long (%s)", sock)
	} else if c, err := l.Conn.Dial("unix", sock); err == nil {
		c.Close() // a kernel of an earlier start listens there: its directory is replaced below
	} else if oe := (*xssh.OpenChannelError)(nil); errors.As(err, &oe) && oe.Reason != xssh.ConnectionFailed {
		why = "the box forwards to no unix socket (" + oe.Message + ")"
	}
	if why != "" {
		s.Close()
		l.Release()
		if t.Stderr != nil {
			fmt.Fprintf(t.Stderr, "paddock: %s: the kernel on %s serves its channel, and ends with this host\n", why, t.Host)
		}
		spec.Listen, spec.Key = "", ""
		return t.Start(ctx, spec)
	}
	if err := run(ctx, l.Conn, shell(fmt.Sprintf("umask 077 && rm -rf %[1]s && mkdir -p %[1]s && cat > %[1]s/%[2]s",
		Quote(dir), transport.ListenKey)), spec.Key); err != nil {
		return fail(fmt.Errorf("listen: prepare %s: %w", dir, err))
	}
	args := []string{"-listen", sock, "-key-file", path.Join(dir, transport.ListenKey)}
	if t.OrphanAfter > 0 {
		args = append(args, "-orphan-after", t.OrphanAfter.String())
	}
	args = append(args, spec.Args...)
	cmd := shell(fmt.Sprintf("echo $$ > %[1]s/pid && %[2]s </dev/null >>%[1]s/log 2>&1", Quote(dir), kernelCommand(spec.Cwd, spec.Env, l.kernel, args)))
	if err := s.Start(cmd); err != nil {
		return fail(fmt.Errorf("start the kernel: %w", err))
	}
	r := &remote{host: t.Host, lease: l, dir: dir, watch: s, done: make(chan struct{})}
	go r.wait()
	return r.attach(ctx, spec.Key)
}

// Reattach connects to the kernel an earlier host started with spec.Listen on the box, and
// that still runs; ErrGone when it does not.
func (t *Transport) Reattach(ctx context.Context, spec transport.Spec) (transport.Kernel, error) {
	l, err := t.pool().Get(ctx, t.Host)
	if err != nil {
		return nil, err
	}
	b, err := l.Conn.probe(ctx)
	if err != nil {
		l.Release()
		return nil, err
	}
	dir := remoteListen(b.home, spec.Listen)
	var out bytes.Buffer
	if err := runOut(ctx, l.Conn, shell(kernelPid(dir)+` && echo "$p"`), &out); err != nil {
		l.Release()
		if lost := l.Conn.Lost(); lost != nil {
			return nil, lost
		}
		return nil, fmt.Errorf("ssh: the kernel of session %s on %s does not run: %w", spec.Session, t.Host, transport.ErrGone)
	}
	s, err := l.Conn.NewSession()
	if err != nil {
		l.Release()
		return nil, &Error{Code: CodeBox, Host: t.Host, Err: err}
	}
	// The kernel is no child of this host's: a channel that lives as long as it does says
	// when it has ended.
	if err := s.Start(shell("while " + kernelPid(dir) + "; do sleep 1; done")); err != nil {
		s.Close()
		l.Release()
		return nil, &Error{Code: CodeBox, Host: t.Host, Err: err}
	}
	r := &remote{host: t.Host, lease: l, dir: dir, watch: s, done: make(chan struct{})}
	go r.wait()
	return r.attach(ctx, spec.Key)
}

// maxSocketPath is the longest socket path a kernel listens on: a unix socket's address
// holds 108 bytes, its end included.
const maxSocketPath = 100

// kernelPid is a script that sets p to the pid of the kernel listening in dir, and fails
// when none runs: the pid file's pid must run, with the directory's socket on its command
// line, so that a pid a box's reboot gave another process (the file in the home outlives
// it) is never taken for the kernel's.
func kernelPid(dir string) string {
	sock := Quote(path.Join(dir, transport.ListenSocket))
	return fmt.Sprintf(`p=$(cat %s) && kill -0 "$p" 2>/dev/null && tr '\0' '\n' < /proc/"$p"/cmdline | grep -qxF -- %s`, Quote(path.Join(dir, "pid")), sock)
}

// remote is a listening kernel on a box: watch is a channel that ends when it does (its
// own, or one that waits for it).
type remote struct {
	host  string
	lease *Lease
	dir   string
	watch *xssh.Session

	done chan struct{}
	err  error // set before done closes

	killOnce sync.Once
}

func (r *remote) wait() {
	if err := r.watch.Wait(); err != nil {
		if lost := r.lease.Conn.Lost(); lost != nil {
			err = lost
		}
		r.err = fmt.Errorf("ssh: kernel on %s: %w", r.host, err)
	}
	r.watch.Close()
	close(r.done)
}

// attach connects to the kernel's socket over the connection.
func (r *remote) attach(ctx context.Context, key string) (transport.Kernel, error) {
	actx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	sock := path.Join(r.dir, transport.ListenSocket)
	a, err := transport.AttachBy(actx, func() (transport.Conn, error) {
		c, err := r.lease.Conn.Dial("unix", sock)
		if err != nil {
			return nil, err
		}
		hc, ok := c.(transport.Conn)
		if !ok {
			c.Close()
			return nil, errors.New("ssh: a forwarded connection cannot close its writing half")
		}
		return hc, nil
	}, key, r.done)
	if err != nil {
		var tail bytes.Buffer
		runOut(context.Background(), r.lease.Conn, shell("tail -n 5 "+Quote(path.Join(r.dir, "log"))), &tail)
		r.Kill()
		return nil, &Error{Code: CodeBox, Host: r.host, Err: fmt.Errorf("the kernel does not listen in %s: %w (it said: %s)", r.dir, err, strings.TrimSpace(tail.String()))}
	}
	return transport.Listening(a, r), nil
}

func (r *remote) Wait() error {
	<-r.done
	return r.err
}

// Kill ends the kernel as a container's end does: TERM to it (it then ends what it
// started), KILL to its process group when it has not ended within Grace, and its
// directory goes.
func (r *remote) Kill() error {
	r.killOnce.Do(func() {
		defer r.lease.Release()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		select {
		case <-r.done: // it has ended: no pid of its is signalled, which may be another's now
		default:
			run(ctx, r.lease.Conn, shell(kernelPid(r.dir)+` && kill -TERM "$p"`), "")
			t := time.NewTimer(Grace + 5*time.Second) // the kernel's own grace for what it started
			defer t.Stop()
			select {
			case <-r.done:
			case <-t.C:
				run(ctx, r.lease.Conn, shell(kernelPid(r.dir)+` && kill -KILL -- -"$p"`), "")
				r.watch.Close()
				<-r.done
			}
		}
		run(ctx, r.lease.Conn, shell("rm -rf "+Quote(r.dir)), "")
	})
	return nil
}

// run runs cmd on a channel of its own with stdin as its input.
func run(ctx context.Context, c *Conn, cmd, stdin string) error {
	s, err := c.NewSession()
	if err != nil {
		return err
	}
	var errOut bytes.Buffer
	s.Stdin, s.Stderr = strings.NewReader(stdin), &errOut
	if err := runCtx(ctx, s, cmd); err != nil {
		return fmt.Errorf("%w: %s", err, strings.TrimSpace(errOut.String()))
	}
	return nil
}

// runOut runs cmd on a channel of its own, its output into out.
func runOut(ctx context.Context, c *Conn, cmd string, out *bytes.Buffer) error {
	s, err := c.NewSession()
	if err != nil {
		return err
	}
	s.Stdout = out
	return runCtx(ctx, s, cmd)
}
