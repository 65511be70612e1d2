package ssh

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"syscall"
	"time"

	"github.com/paddockhq/paddock/internal/content"
	"github.com/paddockhq/paddock/internal/tarx"
	"github.com/paddockhq/paddock/transport/pathmap"
	"github.com/paddockhq/paddock/workspace"
)

// Sync is a workspace for a box with no shared filesystem: at the session's start the
// parent's files are cloned into an isolated workspace (workspace.Clone) and its copy sent
// to the box; at the end the box's tree is fetched back into the copy, path by path where it
// changed, and handed back to the parent with the same copy-on-write merge as an isolated
// subagent (workspace.Handback): conflicts reported, the box's version of a conflicting path
// kept under conflicts/. The files go over SFTP, or, on a box with no SFTP subsystem, as
// tar streams over exec channels (the box then needs tar); what is sent and what is taken
// back is the same either way.
//
// A file on the box counts as unchanged when its size, mode and modification time (whole
// seconds) are those sent, and that time is older than the upload (by the box's clock); a
// file whose time falls in the upload's second or later is compared by content. A change
// that keeps a file's size, mode and an old modification time (say, one written and then
// touched back) is not seen, as in rsync's quick check.
type Sync struct {
	Host   string // the box
	Dir    string // the local workspace directory: base, copy, manifest
	Remote string // the copy's path on the box

	pool  *Pool
	stamp int64           // the box's clock (unix seconds) when the upload began
	sent  map[string]item // the regular files sent, by slash path under the copy
	ended bool
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
	fx, err := l.Conn.files(b)
	if err != nil {
		return nil, &Error{Code: CodeBox, Host: o.Host, Err: err}
	}
	defer fx.close()
	s = &Sync{Host: o.Host, Dir: dir, Remote: remote, pool: o.Pool, sent: map[string]item{}}
	items, err := tree(s.Copy())
	if err != nil {
		return nil, fmt.Errorf("ssh: sync: %w", err)
	}
	if s.stamp, err = fx.mkTree(ctx, remote); err != nil {
		return nil, fmt.Errorf("ssh: sync: %s on %s: %w", remote, o.Host, err)
	}
	defer func() {
		if err != nil {
			fx.removeAll(context.WithoutCancel(ctx), remote)
		}
	}()
	for _, it := range items {
		if it.mode.IsRegular() {
			s.sent[it.rel] = it
		}
	}
	if err := fx.send(ctx, s.Copy(), remote, items); err != nil {
		return nil, fmt.Errorf("ssh: sync: send the workspace to %s: %w", o.Host, ended(ctx, err))
	}
	if err := s.save(); err != nil {
		return nil, fmt.Errorf("ssh: sync: %w", err)
	}
	return s, nil
}

// syncFile is where a sync keeps what it sent, in its local directory, for a host that
// takes it up after the one that started it died (ResumeSync).
const syncFile = "sync.json"

type syncState struct {
	Host   string     `json:"host"`
	Remote string     `json:"remote"`
	Stamp  int64      `json:"stamp"`
	Sent   []sentItem `json:"sent"`
}

type sentItem struct {
	Rel   string      `json:"rel"`
	Mode  fs.FileMode `json:"mode"`
	Size  int64       `json:"size"`
	Mtime int64       `json:"mtime"`
}

func (s *Sync) save() error {
	st := syncState{Host: s.Host, Remote: s.Remote, Stamp: s.stamp}
	for _, it := range s.sent {
		st.Sent = append(st.Sent, sentItem{Rel: it.rel, Mode: it.mode, Size: it.size, Mtime: it.mtime})
	}
	b, err := json.Marshal(st)
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(s.Dir, syncFile), b, 0o600)
}

// ResumeSync takes up the sync of a workspace to host that an earlier host started in dir
// (StartSync's Dir) and did not hand back: its copy on the box is handed back as the first
// host's would have been.
func ResumeSync(dir, host string, pool *Pool) (*Sync, error) {
	if pool == nil {
		return nil, errors.New("ssh: sync: no pool")
	}
	b, err := os.ReadFile(filepath.Join(dir, syncFile))
	if err != nil {
		return nil, fmt.Errorf("ssh: sync: take up %s: %w", dir, err)
	}
	var st syncState
	if err := json.Unmarshal(b, &st); err != nil {
		return nil, fmt.Errorf("ssh: sync: take up %s: %w", dir, err)
	}
	if st.Host != host || st.Remote == "" {
		return nil, fmt.Errorf("ssh: sync: %s holds a copy on %q, not on %q", dir, st.Host, host)
	}
	if _, err := os.Stat(filepath.Join(dir, workspace.CopyDir)); err != nil {
		return nil, fmt.Errorf("ssh: sync: take up %s: %w", dir, err)
	}
	s := &Sync{Host: host, Dir: dir, Remote: st.Remote, pool: pool, stamp: st.Stamp, sent: map[string]item{}}
	for _, it := range st.Sent {
		s.sent[it.Rel] = item{rel: it.Rel, mode: it.Mode, size: it.Size, mtime: it.Mtime}
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

// tree lists what is sent of the local copy: its directories, regular files and symlinks,
// a directory before what it holds (other kinds, sockets and devices, are not sent).
func tree(root string) ([]item, error) {
	var items []item
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
		it := item{rel: filepath.ToSlash(rel), mode: fi.Mode(), size: fi.Size(), mtime: fi.ModTime().Unix()}
		switch {
		case fi.IsDir():
			it.mode = fs.ModeDir | fi.Mode().Perm()
		case fi.Mode()&fs.ModeSymlink != 0:
			if it.link, err = os.Readlink(p); err != nil {
				return err
			}
		case fi.Mode().IsRegular():
			it.mode = fi.Mode().Perm()
		default:
			return nil
		}
		items = append(items, it)
		return nil
	})
	return items, err
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
	b, err := l.Conn.probe(ctx)
	if err != nil {
		return nil, err
	}
	fx, err := l.Conn.files(b)
	if err != nil {
		return nil, &Error{Code: CodeBox, Host: s.Host, Err: err}
	}
	defer fx.close()
	if err := s.fetch(ctx, fx.walk); err != nil {
		return nil, fmt.Errorf("ssh: sync: fetch the workspace from %s: %w", s.Host, ended(ctx, err))
	}
	rep, err := workspace.Handback(ctx, s.Dir)
	if err != nil {
		return nil, err
	}
	s.ended = true
	if err := fx.removeAll(ctx, s.Remote); err != nil {
		return rep, fmt.Errorf("ssh: sync: handed back, but %s is left on %s: %w", s.Remote, s.Host, err)
	}
	return rep, nil
}

// fetch makes the local copy the box's tree, as walk lists it, touching only what differs.
// Whatever the box lists, nothing is written, changed or read outside the copy: a path is
// used only when it lies beneath the copy under directories the box listed as such (and
// that are still directories), so never through a symlink or above the copy.
func (s *Sync) fetch(ctx context.Context, walk func(context.Context, string, func(listed) error) error) error {
	root := s.Copy()
	seen := map[string]fs.FileMode{} // each path listed: its type (and a directory's mode), as last listed
	err := walk(ctx, s.Remote, func(e listed) error {
		if err := beneath(seen, e.rel); err != nil {
			return err
		}
		seen[e.rel] = e.mode
		lp := filepath.Join(root, filepath.FromSlash(e.rel))
		li, lerr := os.Lstat(lp)
		switch {
		case e.mode.IsDir():
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
			return os.Chmod(lp, e.mode.Perm()|0o700)
		case e.mode&fs.ModeSymlink != 0:
			if lerr == nil && li.Mode()&fs.ModeSymlink != 0 {
				if cur, err := os.Readlink(lp); err == nil && cur == e.link {
					return nil
				}
			}
			return replace(lp, func(tmp string) error { return os.Symlink(e.link, tmp) })
		case e.mode.IsRegular():
			if e.same != "" {
				// A hard link: the content of a file listed before, now in the copy.
				if err := beneath(seen, e.same); err != nil || !seen[e.same].IsRegular() {
					return fmt.Errorf("the box listed %q as the same file as %q, which it did not list as a file", e.rel, e.same)
				}
			}
			if err := s.take(ctx, e, lp, li, lerr, root); err != nil {
				return fmt.Errorf("%s: %w", e.rel, err)
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	// What the box no longer holds goes from the copy too (deepest first).
	var gone []string
	filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		rel, _ := filepath.Rel(root, p)
		if err != nil || rel == "." {
			return nil
		}
		if _, ok := seen[filepath.ToSlash(rel)]; !ok {
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
	// Restore the directories' own modes, now that they are filled (those still there:
	// one the box listed again as something else is not).
	for rel, mode := range seen {
		if mode.IsDir() && beneath(seen, rel) == nil {
			os.Chmod(filepath.Join(root, filepath.FromSlash(rel)), mode.Perm())
		}
	}
	return nil
}

// beneath checks a path the box listed: a path beneath the tree's root, each of its parents
// listed (last) as a directory.
func beneath(seen map[string]fs.FileMode, rel string) error {
	if !local(rel) {
		return fmt.Errorf("the box listed %q, not a path beneath the workspace", rel)
	}
	for d := path.Dir(rel); d != "."; d = path.Dir(d) {
		if !seen[d].IsDir() {
			return fmt.Errorf("the box listed %q beneath %q, which it did not list as a directory", rel, d)
		}
	}
	return nil
}

// take brings a regular file the box lists into the local copy at lp, as judge says.
func (s *Sync) take(ctx context.Context, e listed, lp string, li fs.FileInfo, lerr error, root string) error {
	was, wasSent := s.sent[e.rel]
	box := facts{perm: uint32(e.mode.Perm()), size: e.size, mtime: e.mtime}
	var loc facts
	locRegular := lerr == nil && li.Mode().IsRegular()
	if locRegular {
		loc = facts{perm: uint32(li.Mode().Perm()), size: li.Size(), mtime: li.ModTime().Unix()}
	}
	v := judge(box, facts{perm: uint32(was.mode.Perm()), size: was.size, mtime: was.mtime}, wasSent, loc, locRegular, s.stamp)
	if v == keep {
		return nil
	}
	if e.same != "" {
		// Content shared with a file listed before, already in the copy: a hard link to it,
		// as on the box. Copied again, it would cost its size once per name, and a box can
		// send tens of thousands of link headers for one large file.
		src := filepath.Join(root, filepath.FromSlash(e.same))
		return replace(lp, func(tmp string) error {
			if err := linkRegular(src, tmp); err != nil {
				return err
			}
			if v == compare && sameContent(ctx, src, lp) {
				return errKept
			}
			return nil
		})
	}
	if e.open == nil {
		return errors.New("no content")
	}
	return replace(lp, func(tmp string) error {
		if err := getFile(e.open, tmp, e); err != nil {
			return err
		}
		if v == compare && sameContent(ctx, tmp, lp) {
			return errKept
		}
		return nil
	})
}

// linkRegular makes tmp a hard link to the regular file src of the copy, and refuses
// anything else at src: never a link to a symlink, which would take its place in the copy.
func linkRegular(src, tmp string) error {
	si, err := os.Lstat(src)
	if err != nil {
		return err
	}
	if !si.Mode().IsRegular() {
		return fmt.Errorf("%s is not a regular file of the copy", src)
	}
	if err := os.Link(src, tmp); err != nil {
		return err
	}
	if ti, err := os.Lstat(tmp); err != nil || !os.SameFile(si, ti) {
		return fmt.Errorf("%s changed while it was linked", src)
	}
	return nil
}

// errKept ends a replace that found the local copy already right.
var errKept = errors.New("kept")

// sameContent reports whether two local files of the copy hold the same bytes, opening
// neither through a symlink; any failure, a cancelled ctx too, says they differ (and the
// box's version is taken).
func sameContent(ctx context.Context, a, b string) bool {
	fa, err := os.OpenFile(a, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return false
	}
	defer fa.Close()
	fb, err := os.OpenFile(b, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return false
	}
	defer fb.Close()
	sa, err := fa.Stat()
	if err != nil || !sa.Mode().IsRegular() {
		return false
	}
	sb, err := fb.Stat()
	if err != nil || !sb.Mode().IsRegular() {
		return false
	}
	if os.SameFile(sa, sb) {
		return true
	}
	eq, err := content.Equal(ctx, fa, fb)
	return err == nil && eq
}

// replace puts a new entry at p: made by mk at a sibling temporary name, then renamed over
// whatever is at p (a directory there is removed first). When mk says errKept, p stays.
func replace(p string, mk func(tmp string) error) error {
	var rnd [6]byte
	rand.Read(rnd[:])
	tmp := filepath.Join(filepath.Dir(p), ".paddock-sync-"+hex.EncodeToString(rnd[:]))
	if err := mk(tmp); err != nil {
		os.Remove(tmp)
		if err == errKept {
			return nil
		}
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
func getFile(open func() (io.ReadCloser, error), local string, e listed) error {
	rf, err := open()
	if err != nil {
		return err
	}
	defer rf.Close()
	lf, err := os.OpenFile(local, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	// Zeros are written as holes: a file the box made with truncate costs the host no disk.
	_, err = tarx.CopyHoles(lf, rf)
	if err == nil {
		err = lf.Chmod(e.mode.Perm())
	}
	if cerr := lf.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chtimes(local, time.Now(), time.Unix(e.mtime, 0))
	}
	return err
}
