package ssh

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"strings"

	"github.com/pkg/sftp"
)

// box is what is known of the box at the end of a connection, learnt once per connection.
type box struct {
	arch    string            // Go architecture
	home    string            // the remote user's home
	kernels map[string]string // content hash -> remote path of a kernel known to be there
	sftp    *sftp.Client      // the probe's client, until the first upload takes it
}

// Box describes the box at the end of a connection.
type Box struct {
	Arch string // the Go architecture of `uname -m`
	Home string // the remote user's home directory
}

// probe learns the box's architecture (uname -m) and home (over SFTP), once per connection.
func (c *Conn) probe(ctx context.Context) (*box, error) {
	c.boxMu.Lock()
	defer c.boxMu.Unlock()
	c.mu.Lock()
	b := c.box
	c.mu.Unlock()
	if b != nil {
		return b, nil
	}
	fail := func(err error) (*box, error) {
		if lost := c.Lost(); lost != nil {
			return nil, lost
		}
		return nil, &Error{Code: CodeBox, Host: c.Target.Name, Err: err}
	}
	// uname -m on a session and the home over SFTP, at once: each costs the box a process.
	// The SFTP client stays open for the kernel's upload, which follows.
	type homeOf struct {
		sc   *sftp.Client
		home string
		err  error
	}
	homeCh := make(chan homeOf, 1)
	go func() {
		sc, err := c.sftp()
		if err != nil {
			homeCh <- homeOf{err: err}
			return
		}
		stop := context.AfterFunc(ctx, func() { sc.Close() })
		defer stop()
		home, err := sc.Getwd()
		if err != nil {
			sc.Close()
			homeCh <- homeOf{err: fmt.Errorf("home directory: %w", err)}
			return
		}
		homeCh <- homeOf{sc, home, nil}
	}()
	arch, err := c.machine(ctx)
	h := <-homeCh
	if err != nil || h.err != nil {
		if h.sc != nil {
			h.sc.Close()
		}
		if err == nil {
			err = h.err
		}
		return fail(err)
	}
	b = &box{arch: arch, home: h.home, kernels: map[string]string{}, sftp: h.sc}
	c.mu.Lock()
	c.box = b
	c.mu.Unlock()
	return b, nil
}

// machine runs uname -m on the box and returns its Go architecture.
func (c *Conn) machine(ctx context.Context) (string, error) {
	s, err := c.NewSession()
	if err != nil {
		return "", fmt.Errorf("open a session: %w", err)
	}
	var out, errOut bytes.Buffer
	s.Stdout, s.Stderr = &out, &errOut
	if err := runCtx(ctx, s, "uname -m"); err != nil {
		return "", fmt.Errorf("uname -m: %v: %s", err, strings.TrimSpace(errOut.String()))
	}
	arch := goArch(out.String())
	if arch == "" {
		return "", fmt.Errorf("no kernel for machine %q", strings.TrimSpace(out.String()))
	}
	return arch, nil
}

// runCtx runs cmd on s, closing s when ctx ends first.
func runCtx(ctx context.Context, s interface {
	Run(string) error
	Close() error
}, cmd string) error {
	stop := context.AfterFunc(ctx, func() { s.Close() })
	defer stop()
	err := s.Run(cmd)
	s.Close()
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return err
}

// sftp opens an SFTP client on the connection.
func (c *Conn) sftp() (*sftp.Client, error) {
	sc, err := sftp.NewClient(c.Client, sftp.UseConcurrentWrites(true))
	if err != nil {
		return nil, fmt.Errorf("sftp: %w", err)
	}
	return sc, nil
}

// SFTP opens an SFTP client on the connection; the caller closes it.
func (c *Conn) SFTP() (*sftp.Client, error) { return c.sftp() }

// cacheDir is the remote kernel cache: dir as set ("~/..." and relative paths under the
// home), or ~/.cache/paddock/kernel.
func cacheDir(dir, home string) string {
	switch {
	case dir == "":
		return path.Join(home, ".cache", "paddock", "kernel")
	case dir == "~":
		return home
	case strings.HasPrefix(dir, "~/"):
		return path.Join(home, dir[2:])
	case !path.IsAbs(dir):
		return path.Join(home, dir)
	}
	return path.Clean(dir)
}

// upload puts the kernel at local (whose content hash is sum) into the box's cache, once:
// the name holds the hash, so a file there is that kernel; a new one is written to a
// temporary name and renamed into place, so no session ever sees a part of one.
func (c *Conn) upload(ctx context.Context, b *box, local, sum, cache string) (string, error) {
	c.boxMu.Lock()
	defer c.boxMu.Unlock()
	if p, ok := b.kernels[sum]; ok {
		return p, nil
	}
	fail := func(err error) (string, error) {
		if lost := c.Lost(); lost != nil {
			return "", lost
		}
		return "", &Error{Code: CodeBox, Host: c.Target.Name, Err: err}
	}
	dir := cacheDir(cache, b.home)
	remote := path.Join(dir, "paddock-kernel-"+sum[:32])
	sc := b.sftp
	b.sftp = nil
	if sc == nil {
		var err error
		if sc, err = c.sftp(); err != nil {
			return fail(err)
		}
	}
	defer sc.Close()
	stop := context.AfterFunc(ctx, func() { sc.Close() })
	defer stop()
	li, err := os.Stat(local)
	if err != nil {
		return fail(err)
	}
	if _, err := sc.Lstat(dir); err != nil {
		if err := sc.MkdirAll(dir); err != nil {
			return fail(fmt.Errorf("kernel cache %s: %w", dir, err))
		}
		if err := sc.Chmod(dir, 0o700); err != nil {
			return fail(fmt.Errorf("kernel cache %s: %w", dir, err))
		}
	}
	// A kernel found in the cache is run as the remote user: the cache and the file must be
	// the user's alone, or someone else could have put another program at the name.
	if err := private(sc, dir, b.home, true); err != nil {
		return fail(err)
	}
	if ri, err := sc.Lstat(remote); err == nil && ri.Mode().IsRegular() && ri.Size() == li.Size() && ri.Mode()&0o100 != 0 {
		if err := private(sc, remote, b.home, false); err != nil {
			return fail(err)
		}
		b.kernels[sum] = remote
		return remote, nil
	}
	var rnd [6]byte
	rand.Read(rnd[:])
	tmp := remote + ".tmp-" + hex.EncodeToString(rnd[:])
	f, err := sc.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL)
	if err != nil {
		return fail(fmt.Errorf("kernel cache %s: %w", dir, err))
	}
	src, err := os.Open(local)
	if err != nil {
		f.Close()
		sc.Remove(tmp)
		return fail(err)
	}
	_, err = f.ReadFrom(src)
	src.Close()
	if err == nil {
		err = f.Chmod(0o755)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = sc.PosixRename(tmp, remote)
		if err != nil {
			err = sc.Rename(tmp, remote)
		}
	}
	if err != nil {
		sc.Remove(tmp)
		if ctx.Err() != nil {
			return fail(ctx.Err())
		}
		return fail(fmt.Errorf("upload the kernel to %s: %w", remote, err))
	}
	b.kernels[sum] = remote
	return remote, nil
}

// private checks that p (a directory when dir) is owned by the owner of home and writable
// by no one else.
func private(sc *sftp.Client, p, home string, dir bool) error {
	fi, err := sc.Lstat(p)
	if err != nil {
		return err
	}
	var hs *sftp.FileStat
	ok1 := false
	if hi, err := sc.Stat(home); err == nil {
		hs, ok1 = hi.Sys().(*sftp.FileStat)
	}
	fs, ok2 := fi.Sys().(*sftp.FileStat)
	switch {
	case dir && !fi.IsDir():
		return fmt.Errorf("kernel cache %s is not a directory", p)
	case fi.Mode().Perm()&0o022 != 0:
		return fmt.Errorf("kernel cache %s is writable by others (mode %v); it must be the user's alone", p, fi.Mode().Perm())
	case ok1 && ok2 && hs.UID != fs.UID:
		return fmt.Errorf("kernel cache %s is owned by uid %d, not the user (uid %d)", p, fs.UID, hs.UID)
	}
	return nil
}

// hashFile returns the hex SHA-256 of a file's content.
func hashFile(name string) (string, error) {
	f, err := os.Open(name)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

var errNoKernel = errors.New("no kernel binary")
