package ssh

import (
	"bytes"
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
	"golang.org/x/sync/errgroup"

	"github.com/paddockhq/paddock/transport/pathmap"
	"github.com/paddockhq/paddock/workspace"
)

// Sync is a workspace for a box with no shared filesystem: at the session's start the
// parent's files are cloned into an isolated workspace (workspace.Clone) and its copy sent
// to the box over SFTP; at the end the box's tree is fetched back into the copy, path by
// path where it changed, and handed back to the parent with the same copy-on-write merge
// as an isolated subagent (workspace.Handback): conflicts reported, the box's version of a
// conflicting path kept under conflicts/.
//
// A file on the box counts as unchanged when its size, mode and modification time (SFTP
// carries whole seconds) are those sent, and that time is older than the upload (by the
// box's clock); a file whose time falls in the upload's second or later is compared by
// content. A change that keeps a file's size, mode and an old modification time (say, one
// written and then touched back) is not seen, as in rsync's quick check.
type Sync struct {
	Host   string // the box
	Dir    string // the local workspace directory: base, copy, manifest
	Remote string // the copy's path on the box

	pool  *Pool
	stamp int64           // the box's clock (unix seconds) when the upload began
	sent  map[string]sent // what was sent, by slash path under the copy
	ended bool
}

type sent struct {
	mode  fs.FileMode
	size  int64
	mtime int64
}

// SyncOptions say what to sync where.
type SyncOptions struct {
	Host   string
	Pool   *Pool
	Parent string // the parent workspace on the host
	Dir    string // the local workspace directory; it must not exist or be empty
	// Remote is where the copy goes on the box ("~/" and relative paths are under the
	// remote home); it must not exist. "": ~/.cache/paddock/work/<the base name of Dir>.
	Remote string
	// Workspace adjusts the clone.
	Workspace workspace.Options
}

// StartSync clones the parent into o.Dir and sends the copy to the box. On failure nothing
// is left of either.
func StartSync(ctx context.Context, o SyncOptions) (s *Sync, err error) {
	if o.Pool == nil {
		return nil, errors.New("ssh: sync: no pool")
	}
	if _, err := workspace.Clone(ctx, o.Parent, o.Dir, o.Workspace); err != nil {
		return nil, err
	}
	dir, _ := filepath.Abs(o.Dir)
	defer func() {
		if err != nil {
			os.RemoveAll(dir)
		}
	}()
	l, err := o.Pool.Get(ctx, o.Host)
	if err != nil {
		return nil, err
	}
	defer l.Release()
	b, err := l.Conn.probe(ctx)
	if err != nil {
		return nil, err
	}
	remote := o.Remote
	if remote == "" {
		remote = path.Join(".cache", "paddock", "work", filepath.Base(dir))
	}
	remote = cacheDir(remote, b.home)
	sc, err := l.Conn.sftp()
	if err != nil {
		return nil, &Error{Code: CodeBox, Host: o.Host, Err: err}
	}
	defer sc.Close()
	stop := context.AfterFunc(ctx, func() { sc.Close() })
	defer stop()
	if err := sc.MkdirAll(path.Dir(remote)); err != nil {
		return nil, fmt.Errorf("ssh: sync: %s on %s: %w", path.Dir(remote), o.Host, err)
	}
	if err := sc.Mkdir(remote); err != nil {
		return nil, fmt.Errorf("ssh: sync: %s on %s (it must not exist): %w", remote, o.Host, err)
	}
	defer func() {
		if err != nil {
			sc.RemoveAll(remote)
		}
	}()
	fi, err := sc.Stat(remote)
	if err != nil {
		return nil, err
	}
	s = &Sync{Host: o.Host, Dir: dir, Remote: remote, pool: o.Pool, stamp: fi.ModTime().Unix(), sent: map[string]sent{}}
	if err := s.send(ctx, sc); err != nil {
		if ctx.Err() != nil {
			err = ctx.Err()
		}
		return nil, fmt.Errorf("ssh: sync: send the workspace to %s: %w", o.Host, err)
	}
	return s, nil
}

// PathMap is the map of a session on the synced workspace: the copy on the box is the
// copy on the host.
func (s *Sync) PathMap() (*pathmap.Map, error) {
	return pathmap.New(pathmap.Mount{Sandbox: s.Remote, Host: s.Copy()})
}

// Copy is the host path of the local copy.
func (s *Sync) Copy() string { return filepath.Join(s.Dir, workspace.CopyDir) }

// send copies the local copy to the box: directories first, then files (several at once)
// and symlinks, then the directories' modes (a read-only directory can be filled first).
func (s *Sync) send(ctx context.Context, sc *sftp.Client) error {
	root := s.Copy()
	type item struct {
		rel string
		fi  fs.FileInfo
	}
	var dirs, files []item
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if rel == "." {
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if err := sc.Mkdir(path.Join(s.Remote, rel)); err != nil {
				return err
			}
			dirs = append(dirs, item{rel, fi})
			return nil
		}
		files = append(files, item{rel, fi})
		return nil
	})
	if err != nil {
		return err
	}
	var mu sync.Mutex
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(8)
	for _, it := range files {
		g.Go(func() error {
			if gctx.Err() != nil {
				return gctx.Err()
			}
			rp := path.Join(s.Remote, it.rel)
			lp := filepath.Join(root, filepath.FromSlash(it.rel))
			if it.fi.Mode()&fs.ModeSymlink != 0 {
				target, err := os.Readlink(lp)
				if err != nil {
					return err
				}
				return sc.Symlink(target, rp)
			}
			if !it.fi.Mode().IsRegular() {
				return nil
			}
			if err := putFile(sc, lp, rp, it.fi); err != nil {
				return fmt.Errorf("%s: %w", it.rel, err)
			}
			mu.Lock()
			s.sent[it.rel] = sent{mode: it.fi.Mode().Perm(), size: it.fi.Size(), mtime: it.fi.ModTime().Unix()}
			mu.Unlock()
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	for _, it := range slices.Backward(dirs) {
		if err := sc.Chmod(path.Join(s.Remote, it.rel), it.fi.Mode().Perm()); err != nil {
			return err
		}
	}
	return nil
}

// putFile writes a local file to the box with its mode and modification time.
func putFile(sc *sftp.Client, local, remote string, fi fs.FileInfo) error {
	src, err := os.Open(local)
	if err != nil {
		return err
	}
	defer src.Close()
	f, err := sc.OpenFile(remote, os.O_WRONLY|os.O_CREATE|os.O_TRUNC)
	if err != nil {
		return err
	}
	_, err = f.ReadFrom(src)
	if err == nil {
		err = f.Chmod(fi.Mode().Perm())
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = sc.Chtimes(remote, fi.ModTime(), fi.ModTime())
	}
	return err
}

// ErrSyncEnded is the error of a second hand-back.
var ErrSyncEnded = errors.New("ssh: sync: already handed back")

// Handback fetches what changed on the box into the local copy, merges the copy into the
// parent (workspace.Handback), and removes the copy from the box. The session on the box
// must have ended.
func (s *Sync) Handback(ctx context.Context) (*workspace.Report, error) {
	if s.ended {
		return nil, ErrSyncEnded
	}
	l, err := s.pool.Get(ctx, s.Host)
	if err != nil {
		return nil, err
	}
	defer l.Release()
	sc, err := l.Conn.sftp()
	if err != nil {
		return nil, &Error{Code: CodeBox, Host: s.Host, Err: err}
	}
	defer sc.Close()
	stop := context.AfterFunc(ctx, func() { sc.Close() })
	defer stop()
	if err := s.fetch(sc); err != nil {
		if ctx.Err() != nil {
			err = ctx.Err()
		}
		return nil, fmt.Errorf("ssh: sync: fetch the workspace from %s: %w", s.Host, err)
	}
	rep, err := workspace.Handback(ctx, s.Dir)
	if err != nil {
		return nil, err
	}
	s.ended = true
	if err := sc.RemoveAll(s.Remote); err != nil {
		return rep, fmt.Errorf("ssh: sync: handed back, but %s is left on %s: %w", s.Remote, s.Host, err)
	}
	return rep, nil
}

// fetch makes the local copy the box's tree, touching only what differs.
func (s *Sync) fetch(sc *sftp.Client) error {
	root := s.Copy()
	seen := map[string]bool{}
	w := sc.Walk(s.Remote)
	for w.Step() {
		if err := w.Err(); err != nil {
			return err
		}
		rel := strings.TrimPrefix(strings.TrimPrefix(w.Path(), s.Remote), "/")
		if rel == "" {
			continue
		}
		seen[rel] = true
		fi := w.Stat()
		lp := filepath.Join(root, filepath.FromSlash(rel))
		li, lerr := os.Lstat(lp)
		switch {
		case fi.IsDir():
			if lerr == nil && !li.IsDir() {
				if err := os.RemoveAll(lp); err != nil {
					return err
				}
				lerr = os.ErrNotExist
			}
			if lerr != nil {
				if err := os.Mkdir(lp, 0o700); err != nil {
					return err
				}
			}
			if err := os.Chmod(lp, fi.Mode().Perm()|0o700); err != nil {
				return err
			}
		case fi.Mode()&fs.ModeSymlink != 0:
			target, err := sc.ReadLink(w.Path())
			if err != nil {
				return err
			}
			if lerr == nil && li.Mode()&fs.ModeSymlink != 0 {
				if cur, err := os.Readlink(lp); err == nil && cur == target {
					continue
				}
			}
			if err := replace(lp, func(tmp string) error { return os.Symlink(target, tmp) }); err != nil {
				return err
			}
		case fi.Mode().IsRegular():
			if s.unchanged(sc, rel, w.Path(), fi, lp, li, lerr) {
				continue
			}
			if err := replace(lp, func(tmp string) error { return getFile(sc, w.Path(), tmp, fi) }); err != nil {
				return fmt.Errorf("%s: %w", rel, err)
			}
		}
	}
	// What the box no longer holds goes from the copy too (deepest first).
	var gone []string
	filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		rel, _ := filepath.Rel(root, p)
		if err != nil || rel == "." {
			return nil
		}
		if !seen[filepath.ToSlash(rel)] {
			gone = append(gone, p)
			if d.IsDir() {
				return filepath.SkipDir
			}
		}
		return nil
	})
	for _, p := range gone {
		if err := os.RemoveAll(p); err != nil {
			return err
		}
	}
	// Restore the directories' own modes, now that they are filled.
	for rel := range seen {
		lp := filepath.Join(root, filepath.FromSlash(rel))
		if li, err := os.Lstat(lp); err == nil && li.IsDir() {
			if fi, err := sc.Lstat(path.Join(s.Remote, rel)); err == nil {
				os.Chmod(lp, fi.Mode().Perm())
			}
		}
	}
	return nil
}

// unchanged reports whether the box's file at rel is what was sent and the local copy
// still holds it.
func (s *Sync) unchanged(sc *sftp.Client, rel, remote string, fi fs.FileInfo, lp string, li fs.FileInfo, lerr error) bool {
	was, ok := s.sent[rel]
	if !ok || lerr != nil || !li.Mode().IsRegular() || li.Size() != fi.Size() || li.Mode().Perm() != fi.Mode().Perm() {
		return false
	}
	if was.size != fi.Size() || was.mode != fi.Mode().Perm() || was.mtime != fi.ModTime().Unix() {
		return false
	}
	if fi.ModTime().Unix() < s.stamp {
		return true // older than the upload: a change since would have a newer time
	}
	return sameContent(sc, remote, lp)
}

// sameContent compares a remote file with a local one, byte by byte.
func sameContent(sc *sftp.Client, remote, local string) bool {
	rf, err := sc.Open(remote)
	if err != nil {
		return false
	}
	defer rf.Close()
	lf, err := os.Open(local)
	if err != nil {
		return false
	}
	defer lf.Close()
	a, b := make([]byte, 32<<10), make([]byte, 32<<10)
	for {
		n, rerr := io.ReadFull(rf, a)
		m, lerr := io.ReadFull(lf, b)
		if n != m || !bytes.Equal(a[:n], b[:m]) {
			return false
		}
		if rerr != nil || lerr != nil {
			return (rerr == io.EOF || rerr == io.ErrUnexpectedEOF) && (lerr == io.EOF || lerr == io.ErrUnexpectedEOF)
		}
	}
}

// replace puts a new entry at p: made by mk at a sibling temporary name, then renamed over
// whatever is at p (a directory there is removed first).
func replace(p string, mk func(tmp string) error) error {
	var rnd [6]byte
	rand.Read(rnd[:])
	tmp := filepath.Join(filepath.Dir(p), ".paddock-sync-"+hex.EncodeToString(rnd[:]))
	if err := mk(tmp); err != nil {
		os.Remove(tmp)
		return err
	}
	if li, err := os.Lstat(p); err == nil && li.IsDir() {
		if err := os.RemoveAll(p); err != nil {
			os.Remove(tmp)
			return err
		}
	}
	if err := os.Rename(tmp, p); err != nil {
		os.Remove(tmp)
		return err
	}
	return nil
}

// getFile writes the box's file to a new local file with its mode and modification time.
func getFile(sc *sftp.Client, remote, local string, fi fs.FileInfo) error {
	rf, err := sc.Open(remote)
	if err != nil {
		return err
	}
	defer rf.Close()
	lf, err := os.OpenFile(local, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	_, err = rf.WriteTo(lf)
	if err == nil {
		err = lf.Chmod(fi.Mode().Perm())
	}
	if cerr := lf.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chtimes(local, time.Now(), fi.ModTime())
	}
	return err
}
