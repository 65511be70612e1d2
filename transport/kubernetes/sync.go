package kubernetes

import (
	"archive/tar"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/tools/remotecommand"

	"github.com/paddockhq/paddock/internal/tarx"
	"github.com/paddockhq/paddock/transport/pathmap"
	"github.com/paddockhq/paddock/workspace"
)

// SyncDir is where a synced workspace is in the pod: an emptyDir of its own.
const SyncDir = "/workspace"

// Sync is a workspace copied into the pod, for a cluster whose nodes do not share the
// host's files: at the start the parent's files are cloned into an isolated workspace
// (workspace.Clone) and its copy sent into the pod as a tar stream over an exec channel;
// when the kernel ends, before the pod is deleted, the pod's tree comes back the same way
// into the local copy, which is handed back to the parent with the same copy-on-write merge
// as ssh sync and isolated children (workspace.Handback). The image needs tar.
type Sync struct {
	Dir string // the local workspace directory: base, copy, manifest

	mu      sync.Mutex
	claimed bool  // a kernel's pod has it
	fetched bool  // the pod's tree came back into the copy
	lost    error // why it did not
	ended   bool
}

// StartSync clones parent into a fresh directory of the user's cache.
func StartSync(parent string) (*Sync, error) {
	cache, err := os.UserCacheDir()
	if err != nil {
		return nil, err
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	dir := filepath.Join(cache, "paddock", "sync", "k8s-"+hex.EncodeToString(b[:]))
	if err := os.MkdirAll(filepath.Dir(dir), 0o700); err != nil {
		return nil, err
	}
	// File clones, not snapshots: the copy is replaced by the pod's tree at the end.
	if _, err := workspace.Clone(context.Background(), parent, dir, workspace.Options{NoSnapshot: true}); err != nil {
		return nil, err
	}
	return &Sync{Dir: dir}, nil
}

// Copy is the host path of the local copy.
func (s *Sync) Copy() string { return filepath.Join(s.Dir, workspace.CopyDir) }

// PathMap is the map of a session on the synced workspace: the copy in the pod is the local
// copy.
func (s *Sync) PathMap() *pathmap.Map {
	pm, _ := pathmap.New(pathmap.Mount{Host: s.Copy(), Sandbox: SyncDir})
	return pm
}

// claim gives the sync to the first kernel that asks; nil after, or for no sync.
func (s *Sync) claim() *Sync {
	if s == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.claimed {
		return nil
	}
	s.claimed = true
	return s
}

// ErrNotFetched is the error of a hand-back whose pod's tree never came back.
var ErrNotFetched = errors.New("kubernetes: sync: the workspace never came back from the pod")

// Handback merges the copy, as the pod left it, into the parent. The session must have
// ended; when the pod's tree did not come back (the pod went away first), nothing is
// merged and the local directory is kept.
func (s *Sync) Handback(ctx context.Context) (*workspace.Report, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ended {
		return nil, errors.New("kubernetes: sync: already handed back")
	}
	if !s.fetched {
		return nil, fmt.Errorf("%w (%v); the copy sent is in %s", ErrNotFetched, s.lost, s.Dir)
	}
	s.ended = true
	rep, err := workspace.Handback(ctx, s.Dir)
	if err == nil && len(rep.Conflicts) == 0 {
		// What the parent did not take (the report's conflicts, saved in the directory) is
		// kept with the directory; with none, nothing of it is needed.
		os.RemoveAll(s.Dir)
	}
	return rep, err
}

// send streams the local copy into the pod's SyncDir.
func (t *Transport) send(ctx context.Context, pod string, s *Sync) error {
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(writeTar(pw, s.Copy())) }()
	defer pr.Close()
	var stderr strings.Builder
	ex, err := t.executor(pod, []string{"tar", "-x", "-f", "-", "-C", SyncDir}, true)
	if err != nil {
		return err
	}
	if err := ex.StreamWithContext(ctx, remotecommand.StreamOptions{Stdin: pr, Stdout: io.Discard, Stderr: &stderr}); err != nil {
		return fmt.Errorf("kubernetes: sync: send the workspace into pod %s (the image needs tar): %w %s", pod, err, strings.TrimSpace(stderr.String()))
	}
	return nil
}

// fetch brings the pod's SyncDir back as the local copy: into a fresh directory beside it,
// which then takes the copy's place.
func (t *Transport) fetch(pod string, s *Sync) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	err := t.fetchInto(ctx, pod, s)
	s.mu.Lock()
	s.fetched, s.lost = err == nil, err
	s.mu.Unlock()
	if err != nil {
		t.log().Warn("the synced workspace did not come back from the pod", "pod", pod, "err", err)
	}
}

func (t *Transport) fetchInto(ctx context.Context, pod string, s *Sync) error {
	tmp := filepath.Join(s.Dir, "fetched")
	if err := os.RemoveAll(tmp); err != nil {
		return err
	}
	if err := os.Mkdir(tmp, 0o700); err != nil {
		return err
	}
	pr, pw := io.Pipe()
	got := make(chan error, 1)
	go func() {
		err := readTar(pr, tmp)
		pr.CloseWithError(err)
		got <- err
	}()
	var stderr strings.Builder
	ex, err := t.executor(pod, []string{"tar", "-c", "-f", "-", "-C", SyncDir, "."}, false)
	if err != nil {
		pw.Close()
		<-got
		return err
	}
	err = ex.StreamWithContext(ctx, remotecommand.StreamOptions{Stdout: pw, Stderr: &stderr})
	pw.CloseWithError(err)
	if rerr := <-got; err == nil {
		err = rerr
	}
	if err != nil {
		os.RemoveAll(tmp)
		return fmt.Errorf("kubernetes: sync: fetch the workspace from pod %s: %w %s", pod, err, strings.TrimSpace(stderr.String()))
	}
	old := filepath.Join(s.Dir, "sent")
	if err := os.Rename(s.Copy(), old); err != nil {
		return err
	}
	if err := os.Rename(tmp, s.Copy()); err != nil {
		return err
	}
	return os.RemoveAll(old)
}

// writeTar writes the tree at root as a tar stream: directories, regular files and
// symlinks, with their modes and times.
func writeTar(w io.Writer, root string) error {
	tw := tar.NewWriter(w)
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, p)
		if err != nil || rel == "." {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		if !fi.IsDir() && !fi.Mode().IsRegular() && fi.Mode()&fs.ModeSymlink == 0 {
			return nil // sockets, devices, pipes are not sent
		}
		return tarx.WriteEntry(tw, p, filepath.ToSlash(rel), fi, true)
	})
	if err != nil {
		return err
	}
	return tw.Close()
}

// readTar writes a tar stream the pod sent under root. Whatever the stream holds, nothing
// is written outside root: a name that is absolute or climbs out is refused, a path never
// goes through a symlink the stream made (each parent must be a directory it made), and
// only directories, regular files and symlinks are made. A sparse entry is refused, and
// zeros are written as holes: what the pod claims takes no disk it did not send.
func readTar(r io.Reader, root string) error {
	tr := tar.NewReader(r)
	dirs := map[string]bool{".": true}
	type stamp struct {
		path string
		t    time.Time
	}
	var times []stamp
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
		name := filepath.Clean(filepath.FromSlash(strings.TrimPrefix(h.Name, "./")))
		if name == "." {
			continue
		}
		if filepath.IsAbs(name) || name == ".." || strings.HasPrefix(name, ".."+string(filepath.Separator)) {
			return fmt.Errorf("the pod's tree names %q, outside the workspace", h.Name)
		}
		if !dirs[filepath.Dir(name)] {
			return fmt.Errorf("the pod's tree names %q before its directory", h.Name)
		}
		if tarx.Sparse(h) {
			return fmt.Errorf("the pod's tree holds %q as a sparse file, which it has no need of", h.Name)
		}
		p := filepath.Join(root, name)
		mode := fs.FileMode(h.Mode).Perm()
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.Mkdir(p, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
				return err
			}
			if fi, err := os.Lstat(p); err != nil || !fi.IsDir() {
				return fmt.Errorf("the pod's tree names %q as a directory and as something else", h.Name)
			}
			dirs[name] = true
			defer os.Chmod(p, mode|0o700)
		case tar.TypeReg:
			f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
			if err != nil {
				return err
			}
			_, err = tarx.CopyHoles(f, tr)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return err
			}
		case tar.TypeSymlink:
			if err := os.Symlink(h.Linkname, p); err != nil {
				return err
			}
			continue
		default:
			continue
		}
		times = append(times, stamp{p, h.ModTime})
	}
	// Times last, a directory's after what was made in it.
	for i := len(times) - 1; i >= 0; i-- {
		os.Chtimes(times[i].path, times[i].t, times[i].t)
	}
	return nil
}
