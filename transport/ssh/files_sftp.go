package ssh

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/pkg/sftp"
	xssh "golang.org/x/crypto/ssh"
	"golang.org/x/sync/errgroup"
)

// sftpFiles moves files over an SFTP client, on a session channel of its own.
type sftpFiles struct {
	sc   *sftp.Client
	s    *xssh.Session
	once sync.Once
	err  error
}

// openSFTP opens an SFTP client on the connection. A box that refuses the subsystem, or
// whose subsystem ends before it answers (its sftp-server not installed), gives a
// *noSFTPError; the channel is closed either way.
func (c *Conn) openSFTP() (*sftpFiles, error) {
	s, err := c.NewSession()
	if err != nil {
		return nil, fmt.Errorf("sftp: open a session: %w", err)
	}
	w, err := s.StdinPipe()
	var r io.Reader
	if err == nil {
		r, err = s.StdoutPipe()
	}
	if err != nil {
		s.Close()
		return nil, fmt.Errorf("sftp: %w", err)
	}
	s.Stderr = io.Discard
	if err := s.RequestSubsystem("sftp"); err != nil {
		s.Close()
		if errors.Is(err, io.EOF) || c.Lost() != nil {
			return nil, fmt.Errorf("sftp: %w", err)
		}
		return nil, &noSFTPError{err}
	}
	sc, err := sftp.NewClientPipe(r, w, sftp.UseConcurrentWrites(true))
	if err != nil {
		s.Close()
		if (errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)) && c.Lost() == nil {
			return nil, &noSFTPError{fmt.Errorf("the sftp subsystem ended before it answered: %w", err)}
		}
		return nil, fmt.Errorf("sftp: %w", err)
	}
	return &sftpFiles{sc: sc, s: s}, nil
}

// close ends the client and waits for its channel to end, so that the server counts it no
// more when the next channel opens (its MaxSessions).
func (f *sftpFiles) close() error {
	f.once.Do(func() {
		f.err = f.sc.Close()
		f.s.Wait()
		f.s.Close()
	})
	return f.err
}

// guard closes the client when ctx ends; the operations under way then fail.
func (f *sftpFiles) guard(ctx context.Context) (stop func() bool) {
	return context.AfterFunc(ctx, func() { f.close() })
}

// ended returns ctx's error once it has ended, else err.
func ended(ctx context.Context, err error) error {
	if err != nil && ctx.Err() != nil {
		return ctx.Err()
	}
	return err
}

func (f *sftpFiles) lstat(ctx context.Context, mkdir string, mode fs.FileMode, paths ...string) ([]rstat, error) {
	defer f.guard(ctx)()
	if mkdir != "" {
		if _, err := f.sc.Lstat(mkdir); err != nil {
			err = f.sc.MkdirAll(mkdir)
			if err == nil {
				err = f.sc.Chmod(mkdir, mode)
			}
			if err != nil {
				return nil, ended(ctx, fmt.Errorf("mkdir %s: %w", mkdir, err))
			}
		}
	}
	out := make([]rstat, len(paths))
	for i, p := range paths {
		fi, err := f.sc.Lstat(p)
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			continue
		}
		out[i] = rstat{exists: true, mode: fi.Mode(), size: fi.Size(), uid: -1}
		if st, ok := fi.Sys().(*sftp.FileStat); ok {
			out[i].uid = int(st.UID)
		}
	}
	return out, nil
}

func (f *sftpFiles) put(ctx context.Context, local, remote string, size int64, sum string, mode fs.FileMode) error {
	defer f.guard(ctx)()
	var rnd [6]byte
	rand.Read(rnd[:])
	tmp := remote + ".tmp-" + hex.EncodeToString(rnd[:])
	w, err := f.sc.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL)
	if err != nil {
		return ended(ctx, err)
	}
	src, err := os.Open(local)
	if err != nil {
		w.Close()
		f.sc.Remove(tmp)
		return err
	}
	n, err := w.ReadFrom(src)
	src.Close()
	if err == nil && n != size {
		err = fmt.Errorf("%d bytes written, not %d", n, size)
	}
	if err == nil {
		err = w.Chmod(mode)
	}
	if cerr := w.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		if err = f.sc.PosixRename(tmp, remote); err != nil {
			err = f.sc.Rename(tmp, remote)
		}
	}
	if err != nil {
		f.sc.Remove(tmp)
	}
	return ended(ctx, err)
}

func (f *sftpFiles) mkTree(ctx context.Context, remote string) (int64, error) {
	defer f.guard(ctx)()
	if err := f.sc.MkdirAll(path.Dir(remote)); err != nil {
		return 0, ended(ctx, fmt.Errorf("%s: %w", path.Dir(remote), err))
	}
	if err := f.sc.Mkdir(remote); err != nil {
		return 0, ended(ctx, fmt.Errorf("%s (it must not exist): %w", remote, err))
	}
	fi, err := f.sc.Stat(remote)
	if err != nil {
		return 0, ended(ctx, err)
	}
	return fi.ModTime().Unix(), nil
}

// send makes the directories first, then writes the files (several at once) and symlinks,
// then gives the directories their modes (a read-only directory can be filled first).
func (f *sftpFiles) send(ctx context.Context, localRoot, remote string, items []item) error {
	defer f.guard(ctx)()
	var dirs []item
	for _, it := range items {
		if it.mode.IsDir() {
			if err := f.sc.Mkdir(path.Join(remote, it.rel)); err != nil {
				return ended(ctx, err)
			}
			dirs = append(dirs, it)
		}
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(8)
	for _, it := range items {
		if it.mode.IsDir() {
			continue
		}
		g.Go(func() error {
			if gctx.Err() != nil {
				return gctx.Err()
			}
			rp := path.Join(remote, it.rel)
			if it.mode&fs.ModeSymlink != 0 {
				return f.sc.Symlink(it.link, rp)
			}
			if err := f.putFile(filepath.Join(localRoot, filepath.FromSlash(it.rel)), rp, it); err != nil {
				return fmt.Errorf("%s: %w", it.rel, err)
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return ended(ctx, err)
	}
	for _, it := range slices.Backward(dirs) {
		if err := f.sc.Chmod(path.Join(remote, it.rel), it.mode.Perm()); err != nil {
			return ended(ctx, err)
		}
	}
	return nil
}

// putFile writes a local file to the box with its mode and modification time.
func (f *sftpFiles) putFile(local, remote string, it item) error {
	src, err := os.Open(local)
	if err != nil {
		return err
	}
	defer src.Close()
	w, err := f.sc.OpenFile(remote, os.O_WRONLY|os.O_CREATE|os.O_TRUNC)
	if err != nil {
		return err
	}
	_, err = w.ReadFrom(src)
	if err == nil {
		err = w.Chmod(it.mode.Perm())
	}
	if cerr := w.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		t := time.Unix(it.mtime, 0)
		err = f.sc.Chtimes(remote, t, t)
	}
	return err
}

func (f *sftpFiles) walk(ctx context.Context, remote string, fn func(listed) error) error {
	defer f.guard(ctx)()
	w := f.sc.Walk(remote)
	for w.Step() {
		if err := w.Err(); err != nil {
			return ended(ctx, err)
		}
		rel := strings.TrimPrefix(strings.TrimPrefix(w.Path(), remote), "/")
		if rel == "" {
			continue
		}
		fi := w.Stat()
		e := listed{rel: rel, mode: fi.Mode(), size: fi.Size(), mtime: fi.ModTime().Unix()}
		p := w.Path()
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			target, err := f.sc.ReadLink(p)
			if err != nil {
				return ended(ctx, err)
			}
			e.link = target
		case fi.Mode().IsRegular():
			e.open = func() (io.ReadCloser, error) { return f.sc.Open(p) }
		}
		if err := fn(e); err != nil {
			return ended(ctx, err)
		}
	}
	return nil
}

func (f *sftpFiles) removeAll(ctx context.Context, remote string) error {
	defer f.guard(ctx)()
	return ended(ctx, f.sc.RemoveAll(remote))
}
