//go:build linux

package kernel

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// HostSocketEnv names the variable that gives every exec the host socket's path.
const HostSocketEnv = "PADDOCK_HOST_SOCKET"

// Options tune a kernel; the zero value is the default.
type Options struct {
	Version       string        // reported by ping; default: the build's module version
	Grace         time.Duration // a TERM signal's wait before KILL; default 2s
	ShutdownGrace time.Duration // at exit, the wait between TERM and KILL; default 500ms
	TempDir       string        // where the host socket's directory is made; default $TMPDIR, else /tmp
	Log           *slog.Logger  // diagnostics; default text on standard error
	// OrphanAfter, for a listening kernel (Listen), ends it as a shutdown does once no host
	// has been attached for this long: a kernel whose host never comes back (a daemon gone
	// for good) does not run, nor leave its programs running, forever. 0: never.
	OrphanAfter time.Duration
	// Once, for a listening kernel, serves one host only: it ends as a shutdown does when
	// that host's connection ends, as a kernel on its standard streams ends at their end (a
	// host that listens for its frames' speed, not to be taken up again). Until the host
	// attaches, OrphanAfter bounds the wait (default onceWait).
	Once bool
}

// onceWait bounds a once-listening kernel's wait for its host when OrphanAfter is not set.
const onceWait = time.Minute

func (o *Options) fill() {
	if o.Version == "" {
		o.Version = BuildVersion()
	}
	if o.Grace <= 0 {
		o.Grace = 2 * time.Second
	}
	if o.ShutdownGrace <= 0 {
		o.ShutdownGrace = 500 * time.Millisecond
	}
	if o.TempDir == "" {
		o.TempDir = os.TempDir()
	}
	if o.Log == nil {
		o.Log = slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
}

// BuildVersion is the kernel's version as its build recorded it: the module version, or
// "dev" for a build from a work tree.
func BuildVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "dev"
}

// Run is the kernel: it serves the frames read from stdin, writing frames to stdout, until
// stdin ends, a shutdown request, SIGTERM or SIGHUP, or ctx's end; then it kills what it
// started, removes its socket directory and returns nil. It acts on the whole process (its
// process group, the subreaper flag, signal dispositions, waiting for every child), so a
// process runs one kernel at a time.
func Run(ctx context.Context, stdin io.Reader, stdout io.Writer, opts Options) error {
	opts.fill()
	var s *server
	out := newOutput(stdout, func(err error) {
		opts.Log.Error("writing to the host failed; ending", "err", err)
		s.shutdown()
	})
	s = newServer(opts, out)
	return run(ctx, s, func() {
		s.serve(stdin)
		s.shutdown()
	}, func() bool {
		// The reading goroutine ends with stdin. When stdin can take a deadline, end it
		// now; else it is left blocked in its read, and the process exit ends it.
		d, ok := stdin.(interface{ SetReadDeadline(time.Time) error })
		return ok && d.SetReadDeadline(time.Now()) == nil
	})
}

// run serves a kernel: input reads the host's frames until it ends, stopInput ends it early
// (false: it cannot be, and is left to the process exit).
func run(ctx context.Context, s *server, input func(), stopInput func() bool) error {
	log := s.log

	// Own process group, so the host can end the kernel and everything in it at once.
	if syscall.Getpgrp() != os.Getpid() {
		if err := syscall.Setpgid(0, 0); err != nil && !errors.Is(err, syscall.EPERM) {
			log.Warn("setpgid", "err", err)
		}
	}
	// Orphans of the pipelines come back to the kernel, so none outlives it.
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		log.Warn("cannot become a child subreaper; orphans may outlive the kernel", "err", err)
	}
	// A child gets the default disposition of every signal the kernel handles, but keeps
	// one the kernel ignores, and the runtime leaves SIGINT ignored when the kernel was
	// started so (as a shell starts a background job). Handling SIGPIPE, SIGINT and SIGQUIT
	// here, never ignoring them, gives every child their defaults: `yes | head` ends, INT
	// stops a step. The kernel itself ends on none of them (a broken standard output is
	// an error on write, not a SIGPIPE death).
	quiet := make(chan os.Signal, 1)
	signal.Notify(quiet, syscall.SIGPIPE, syscall.SIGINT, syscall.SIGQUIT)
	defer signal.Stop(quiet)
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(stop)

	s.reaper = newReaper()
	rel, err := listenRelay(s.opts.TempDir, s.out, log)
	if err != nil {
		s.reaper.close()
		return err
	}
	s.relay = rel
	s.socket = rel.path

	read := make(chan struct{})
	go func() {
		defer close(read)
		input()
	}()
	select {
	case <-s.stopping:
	case <-ctx.Done():
	case sig := <-stop:
		log.Info("ending on signal", "signal", sig.String())
	}
	s.finish()
	if stopInput() {
		<-read
	}
	return nil
}
