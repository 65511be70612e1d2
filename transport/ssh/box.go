package ssh

import (
	"bytes"
	"context"
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
	kernels map[string]string // guarded by the Conn's boxMu; content hash -> remote path of a kernel known to be there
	noSFTP  error             // why the box takes no SFTP (files then go over exec channels); nil: it does
	sftp    *sftpFiles        // guarded by the Conn's mu; the probe's client, until the first use takes it
}

// Box describes the box at the end of a connection.
type Box struct {
	Arch string // the Go architecture of `uname -m`
	Home string // the remote user's home directory
	// SFTP says whether files reach the box over SFTP; when not (the box has no sftp
	// subsystem), they go over exec channels: cat for the kernel, tar for a synced workspace.
	SFTP bool
}

// probe learns the box's architecture (uname -m), its home (over SFTP; from the same
// command where there is no SFTP) and whether it takes SFTP, once per connection.
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
		f    *sftpFiles
		home string
		err  error
	}
	homeCh := make(chan homeOf, 1)
	go func() {
		f, err := c.openSFTP()
		if err != nil {
			homeCh <- homeOf{err: err}
			return
		}
		stop := f.guard(ctx)
		defer stop()
		home, err := f.sc.Getwd()
		if err != nil {
			f.close()
			homeCh <- homeOf{err: fmt.Errorf("home directory: %w", ended(ctx, err))}
			return
		}
		homeCh <- homeOf{f, home, nil}
	}()
	arch, home, err := c.machine(ctx)
	h := <-homeCh
	var no *noSFTPError
	if errors.As(h.err, &no) {
		h.err = nil
	} else {
		home, no = h.home, nil
	}
	if err != nil || h.err != nil {
		if h.f != nil {
			h.f.close()
		}
		if err == nil {
			err = h.err
		}
		return fail(err)
	}
	b = &box{arch: arch, home: home, kernels: map[string]string{}, sftp: h.f}
	if no != nil {
		b.noSFTP = no
	}
	c.mu.Lock()
	c.box = b
	c.mu.Unlock()
	return b, nil
}

// machine runs uname -m on the box and returns its Go architecture, and the directory the
// command ran in (the home, where the box has no SFTP to say it).
func (c *Conn) machine(ctx context.Context) (arch, home string, err error) {
	s, err := c.NewSession()
	if err != nil {
		return "", "", fmt.Errorf("open a session: %w", err)
	}
	var out, errOut bytes.Buffer
	s.Stdout, s.Stderr = &out, &errOut
	if err := runCtx(ctx, s, "uname -m && pwd -P"); err != nil {
		return "", "", fmt.Errorf("uname -m: %v: %s", err, strings.TrimSpace(errOut.String()))
	}
	machine, home, _ := strings.Cut(strings.TrimSuffix(out.String(), "\n"), "\n")
	arch = goArch(machine)
	if arch == "" {
		return "", "", fmt.Errorf("no kernel for machine %q", strings.TrimSpace(machine))
	}
	return arch, home, nil
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

// SFTP opens an SFTP client on the connection; the caller closes it. A box with no SFTP
// subsystem gives an error.
func (c *Conn) SFTP() (*sftp.Client, error) {
	f, err := c.openSFTP()
	if err != nil {
		return nil, err
	}
	return f.sc, nil
}

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
// temporary name and renamed, so no session ever sees a part of one.
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
	li, err := os.Stat(local)
	if err != nil {
		return fail(err)
	}
	fx, err := c.files(b)
	if err != nil {
		return fail(err)
	}
	defer fx.close()
	st, err := fx.lstat(ctx, dir, 0o700, dir, remote, b.home)
	if err != nil {
		return fail(fmt.Errorf("kernel cache %s: %w", dir, err))
	}
	// A kernel found in the cache is run as the remote user: the cache and the file must be
	// the user's alone, or someone else could have put another program at the name.
	if err := private(dir, st[0], st[2], true); err != nil {
		return fail(err)
	}
	if cached(st[1], li.Size()) {
		if err := private(remote, st[1], st[2], false); err != nil {
			return fail(err)
		}
		b.kernels[sum] = remote
		return remote, nil
	}
	if err := fx.put(ctx, local, remote, li.Size(), sum, 0o755); err != nil {
		if ctx.Err() != nil {
			return fail(ctx.Err())
		}
		return fail(fmt.Errorf("upload the kernel to %s: %w", remote, err))
	}
	b.kernels[sum] = remote
	return remote, nil
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
