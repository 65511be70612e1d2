package kubernetes

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
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
	claimed bool   // a kernel's pod has it
	pod     string // the pod that has (had) it, once it runs
	fetched bool   // the pod's tree came back into the copy
	lost    error  // why it did not
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

// claim gives the sync to the kernel about to start; nil for no sync. The workspace lives in
// one pod: once a kernel's pod has had it, no other kernel starts with it (the host's copy is
// not the workspace any more, and the pod's tree comes back only at its kernel's end), and a
// second claim is a PodGoneError. Never may a second pod fall back to the copy as a host
// path of its own.
func (s *Sync) claim() (*Sync, error) {
	if s == nil {
		return nil, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.claimed {
		return nil, &PodGoneError{Pod: s.pod, Reason: "it held the synced workspace, which lives in one pod: no other kernel starts with it"}
	}
	s.claimed = true
	return s, nil
}

// hold records the pod that has the sync (none for no sync).
func (s *Sync) hold(pod string) {
	if s == nil {
		return
	}
	s.mu.Lock()
	s.pod = pod
	s.mu.Unlock()
}

// release gives the sync back after a start that failed before its kernel ran: the pod is
// deleted and the host's copy is still the workspace, so another kernel may have it.
func (s *Sync) release() {
	if s == nil {
		return
	}
	s.mu.Lock()
	s.claimed, s.pod = false, ""
	s.mu.Unlock()
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
	go func() { pw.CloseWithError(tarx.WriteTree(pw, s.Copy(), tarx.TreeOptions{AnyUser: true, Plain: true})) }()
	defer pr.Close()
	var stderr tail // the pod's words are its own, and as long as it likes: their end only
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
		err := tarx.ReadTree(pr, tmp, "the pod's tree")
		pr.CloseWithError(err)
		got <- err
	}()
	var stderr tail // a tree of unreadable files makes tar say so once a file: their end only
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
