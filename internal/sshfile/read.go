package sshfile

import (
	"context"
	"errors"
	"io"
	"os"
	"path"
	"slices"
	"sync"
	"time"

	"github.com/pkg/sftp"

	"github.com/paddockhq/paddock/transport/ssh"
)

// Defaults of a Reader.
const (
	DefaultCap    = 50 << 10
	DefaultBudget = 30 * time.Second
)

// Reader reads ssh:// URLs.
type Reader struct {
	// Hosts are the hosts that may be read: the global setting ssh.hosts, matched exactly
	// as written in the URL. None: every read is refused.
	Hosts []string
	// Pool connects to the hosts; it holds the ssh configuration and known_hosts to use.
	Pool *ssh.Pool
	// Cap is how many bytes of the file the result keeps; 0: DefaultCap.
	Cap int
	// Budget is how long a read may block; 0: DefaultBudget.
	Budget time.Duration
}

// Result is a file read.
type Result struct {
	URL  string `json:"url"`  // canonical
	Path string `json:"path"` // the file's path on the box
	Text string `json:"text"` // the first bytes, up to the cap, whole characters
	// Bytes is the file's size as read; Dropped how many of them Text does not hold.
	Bytes   int64 `json:"bytes"`
	Dropped int64 `json:"dropped"`
	// Partial: the budget ended after the cap was filled, before the end of the file; the
	// rest was not read, and Bytes and Dropped take the rest's size from the file's size.
	Partial bool `json:"partial,omitempty"`
}

// Read reads the file an ssh:// URL names. Every refusal is a *Rejection.
func (r *Reader) Read(ctx context.Context, raw string) (*Result, error) {
	u, err := Parse(raw)
	if err != nil {
		return nil, err
	}
	if !slices.Contains(r.Hosts, u.Host) {
		return nil, reject(NotAllowed, "host %s is not in the setting ssh.hosts (global settings only)", u.Host)
	}
	budget := r.Budget
	if budget <= 0 {
		budget = DefaultBudget
	}
	limit := r.Cap
	if limit <= 0 {
		limit = DefaultCap
	}
	ctx, cancel := context.WithTimeout(ctx, budget)
	defer cancel()
	pool := r.Pool
	if pool == nil {
		pool = &ssh.Pool{}
		defer pool.Close()
	}
	timedOut := func() error {
		return reject(Timeout, "the read of %s did not finish within %v", u, budget)
	}
	l, err := pool.Get(ctx, u.Host)
	if err != nil {
		if ctx.Err() != nil {
			return nil, timedOut()
		}
		return nil, connectRejection(u.Host, err)
	}
	defer l.Release()
	sc, err := openSFTP(ctx, l.Conn)
	if err != nil {
		if ctx.Err() != nil {
			return nil, timedOut()
		}
		return nil, reject(IO, "%s: no SFTP on the box: %v", u.Host, err)
	}
	// Closing waits for the box's answer: after the budget, it goes on its own.
	defer closeSoon(ctx, sc)
	// The budget's end closes the SFTP channel, which ends any call blocked on it.
	stop := context.AfterFunc(ctx, func() { sc.Close() })
	defer stop()

	p := u.Path
	if u.Home {
		home, err := sc.Getwd()
		if err != nil {
			if ctx.Err() != nil {
				return nil, timedOut()
			}
			return nil, reject(IO, "%s: the remote home: %v", u.Host, err)
		}
		p = path.Join(home, u.Path)
	}
	res := &Result{URL: u.String(), Path: p}
	fileErr := func(err error) error {
		switch {
		case ctx.Err() != nil:
			return timedOut()
		case errors.Is(err, os.ErrNotExist):
			return reject(NotFound, "%s: no such file", u)
		case errors.Is(err, os.ErrPermission):
			return reject(PermissionDenied, "%s: permission denied", u)
		}
		return reject(IO, "%s: %v", u, err)
	}
	fi, err := sc.Stat(p)
	if err != nil {
		return nil, fileErr(err)
	}
	switch {
	case fi.IsDir():
		return nil, reject(IsDirectory, "%s is a directory", u)
	case !fi.Mode().IsRegular():
		return nil, reject(IO, "%s is not a regular file (%v)", u, fi.Mode().Type())
	}
	f, err := sc.Open(p)
	if err != nil {
		return nil, fileErr(err)
	}
	defer closeSoon(ctx, f)
	h := newHead(limit)
	h.onFull = onFull
	lw := &lockedHead{h: h}
	// The sftp file's WriteTo reads ahead concurrently; h stops it at the first byte that
	// is not text. The copy runs on its own so that the budget's end returns at once even
	// from a box that stopped answering; the copy then ends with the channel.
	copied := make(chan error, 1)
	go func() {
		_, err := io.Copy(lw, f)
		copied <- err
	}()
	select {
	case err = <-copied:
	case <-ctx.Done():
		err = ctx.Err()
	}
	lw.mu.Lock()
	defer lw.mu.Unlock()
	lw.stopped = true
	switch {
	case errors.Is(err, errBinary) || h.binary:
		return nil, reject(Binary, "%s is not text (not UTF-8, or it holds a NUL byte)", u)
	case err != nil && ctx.Err() != nil && h.full:
		// The cap is filled: what the read keeps is there; the rest is counted from the
		// file's size.
		res.Text, res.Dropped = h.text()
		res.Bytes = max(h.total, fi.Size())
		res.Dropped += res.Bytes - h.total
		res.Partial = true
		return res, nil
	case err != nil:
		return nil, fileErr(err)
	}
	h.close()
	if h.binary {
		return nil, reject(Binary, "%s is not text (not UTF-8, or it holds a NUL byte)", u)
	}
	res.Text, res.Dropped = h.text()
	res.Bytes = h.total
	return res, nil
}

// closeSoon closes c, in the background when ctx has ended (the box may not answer).
func closeSoon(ctx context.Context, c io.Closer) {
	if ctx.Err() != nil {
		go c.Close()
		return
	}
	c.Close()
}

// lockedHead is a head written by the copy and read by the reader once it stops waiting;
// after that it takes nothing more.
type lockedHead struct {
	mu      sync.Mutex
	h       *head // guarded by mu
	stopped bool  // guarded by mu
}

func (l *lockedHead) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.stopped {
		return 0, errStopped
	}
	return l.h.Write(p)
}

var errStopped = errors.New("the read stopped")

// onFull, when set (by tests), is called once a read's cap is filled.
var onFull func()

// connectRejection turns a connection failure into a rejection that names no local file.
func connectRejection(host string, err error) error {
	switch ssh.CodeOf(err) {
	case ssh.CodeAuth:
		return reject(Auth, "%s accepted none of the keys from the ssh agent or the identity files", host)
	case ssh.CodeHostKeyUnknown:
		return reject(Host, "%s: its host key is in no known_hosts file", host)
	case ssh.CodeHostKeyChanged:
		return reject(Host, "%s: its host key differs from the one in known_hosts", host)
	case ssh.CodeConnectTimeout:
		return reject(Host, "%s did not answer within the connect timeout", host)
	case ssh.CodeConfig:
		return reject(Host, "%s: the ssh configuration cannot be used for it", host)
	}
	return reject(Host, "%s cannot be reached", host)
}

// openSFTP opens an SFTP client on c, giving up when ctx ends: a box that stopped answering
// never answers the channel's opening. The abandoned opening closes what it gets once it
// ends (at the latest when the connection's keepalives find it dead).
func openSFTP(ctx context.Context, c *ssh.Conn) (*sftp.Client, error) {
	type opened struct {
		sc  *sftp.Client
		err error
	}
	ch := make(chan opened, 1)
	go func() {
		sc, err := c.SFTP()
		ch <- opened{sc, err}
	}()
	select {
	case o := <-ch:
		return o.sc, o.err
	case <-ctx.Done():
		go func() {
			if o := <-ch; o.sc != nil {
				o.sc.Close()
			}
		}()
		return nil, ctx.Err()
	}
}
