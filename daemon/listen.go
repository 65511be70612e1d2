package daemon

import (
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/paddockhq/paddock/errdefs"
	"github.com/paddockhq/paddock/internal/place"
)

// SocketName is the socket's name in its directory.
const SocketName = place.SocketName

// DefaultDir is the default socket directory: $TMPDIR/paddock-<uid>, /tmp when TMPDIR is
// unset (place.SocketDir).
func DefaultDir() string { return place.SocketDir() }

// DefaultSocket is the default socket path.
func DefaultSocket() string { return place.Socket() }

// SocketPath is the socket a daemon's address names: a path (made absolute), or
// unix://PATH. A daemon serves only a unix socket, whose directory and peers it can check;
// any other address (tcp://…) is an invalid argument, not taken for a directory "tcp:".
func SocketPath(addr string) (string, error) {
	s := addr
	if p, ok := strings.CutPrefix(s, "unix://"); ok {
		s = p
	} else if scheme, _, ok := strings.Cut(s, "://"); ok {
		return "", errdefs.New(errdefs.InvalidArgument, "usage", fmt.Sprintf("--socket %s: the daemon listens on a unix socket only (a path, or unix://PATH), not %s://", addr, scheme))
	}
	if s == "" || !filepath.IsAbs(s) {
		abs, err := filepath.Abs(s)
		if err != nil || s == "" {
			return "", errdefs.New(errdefs.InvalidArgument, "usage", fmt.Sprintf("--socket %q: a unix socket's path", s))
		}
		s = abs
	}
	return s, nil
}

// PrepareDir makes the socket directory when it is missing (0700, missing parents too, in
// one step), then checks it: a *DirError when it may not be used.
func PrepareDir(dir string) error {
	uid := uint32(os.Getuid())
	mkErr := os.MkdirAll(dir, 0o700) // a path that exists as something else is judged below
	facts, err := dirFacts(dir)
	if err != nil {
		if mkErr != nil {
			err = mkErr
		}
		return &DirError{Dir: dir, Fault: FaultMissing, UID: uid, Err: err}
	}
	if f := DirFault(facts, uid); f != "" {
		return &DirError{Dir: dir, Fault: f, Facts: facts, UID: uid}
	}
	return nil
}

// dirFacts lstats a path: the facts DirFault decides on.
func dirFacts(p string) (DirFacts, error) {
	fi, err := os.Lstat(p)
	if err != nil {
		return DirFacts{}, err
	}
	f := DirFacts{Symlink: fi.Mode()&os.ModeSymlink != 0, Dir: fi.IsDir(), Mode: fi.Mode().Perm()}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		f.UID = st.Uid
	}
	return f, nil
}

// Listen prepares the socket's directory, removes a stale socket, binds, makes the socket
// 0600 (a failed chmod fails the bind) and returns a listener that closes every peer of
// another uid before a byte is read.
func Listen(path string, log *slog.Logger) (net.Listener, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if err := PrepareDir(filepath.Dir(path)); err != nil {
		return nil, err
	}
	if fi, err := os.Lstat(path); err == nil {
		if fi.Mode()&os.ModeSocket == 0 {
			return nil, fmt.Errorf("socket %s: a file that is not a socket is in the way", path)
		}
		if c, err := net.Dial("unix", path); err == nil {
			c.Close()
			return nil, fmt.Errorf("socket %s: a daemon already listens there", path)
		}
		if err := os.Remove(path); err != nil {
			return nil, fmt.Errorf("socket %s: remove the stale socket: %w", path, err)
		}
	}
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return nil, err
	}
	if err := os.Chmod(path, 0o600); err != nil {
		l.Close()
		return nil, fmt.Errorf("socket %s: chmod 0600: %w", path, err)
	}
	return &PeerListener{UnixListener: l, UID: uint32(os.Getuid()), Log: log}, nil
}

// PeerListener accepts only peers whose uid (SO_PEERCRED) is UID; any other peer, or one
// whose uid cannot be read, is closed before a byte is read, with a warning naming its uid.
type PeerListener struct {
	*net.UnixListener
	UID uint32
	Log *slog.Logger
}

// Accept returns the next peer of the daemon's uid.
func (l *PeerListener) Accept() (net.Conn, error) {
	for {
		c, err := l.AcceptUnix()
		if err != nil {
			return nil, err
		}
		uid, err := PeerUID(c)
		if PeerAllowed(uid, err, l.UID) {
			return c, nil
		}
		if err != nil {
			l.Log.Warn("peer refused: its uid cannot be read", "error", err)
		} else {
			l.Log.Warn("peer refused: another uid", "uid", uid, "daemon_uid", l.UID)
		}
		c.Close()
	}
}

// PeerUID reads a unix connection's peer uid with SO_PEERCRED.
func PeerUID(c *net.UnixConn) (uint32, error) {
	raw, err := c.SyscallConn()
	if err != nil {
		return 0, err
	}
	var cred *unix.Ucred
	var cerr error
	if err := raw.Control(func(fd uintptr) {
		cred, cerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return 0, err
	}
	if cerr != nil {
		return 0, cerr
	}
	return cred.Uid, nil
}
