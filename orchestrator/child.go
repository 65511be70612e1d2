package orchestrator

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"golang.org/x/sync/errgroup"

	"github.com/paddockhq/paddock/transport"
	"github.com/paddockhq/paddock/transport/pathmap"
	"github.com/paddockhq/paddock/workspace"
)

// Workspace modes of a child.
const (
	Shared   = "shared"   // the child works in its parent's directory
	Isolated = "isolated" // the child works in a clone, handed back path by path at its end
)

// ChildConfig says how to spawn a child session.
type ChildConfig struct {
	// Name names the child in its questions and reports.
	Name string
	// Workspace is Shared (the default) or Isolated.
	Workspace string
	// Dir, for an isolated child, is where its clone is made (base, copy, manifest,
	// conflicts, handback.json); "": a new directory under the parent's ChildDirs, else its
	// state directory, else the system's temporary directory.
	Dir string
	// Env adds or replaces variables of the parent's environment, NAME=value.
	Env []string
	// ID names the child; "" makes a fresh one.
	ID string
	// Listen and Key start the child's kernel listening (see Config): a host that keeps
	// them can take the child up again after it died (ReopenChild).
	Listen, Key string

	grouped *workspace.CloneReport // SpawnGroup's clone for the child, in a directory it made
}

// child is what a parent keeps of a child.
type child struct {
	dir  string // isolated: the clone's directory
	made bool   // the spawn made dir: it goes once a hand-back leaves nothing in it to keep

	clone *workspace.CloneReport

	mu       sync.Mutex
	handback *workspace.Report // guarded by mu
}

// Spawn opens a child session on the parent's transport. An isolated child works in a
// reflink clone of the parent's workspace, handed back when it closes. The child's
// questions go to its own clients first, then up the chain.
func (s *Session) Spawn(ctx context.Context, cc ChildConfig) (*Session, error) {
	cfg, err := s.childConfig(ctx, cc, nil)
	if err != nil {
		return nil, err
	}
	c, err := Open(ctx, cfg)
	if err != nil {
		if cfg.child.dir != "" {
			_ = workspace.Discard(cfg.child.dir)
		}
		return nil, err
	}
	return c, nil
}

// ReopenChild takes up a child an earlier host spawned with cc, whose kernel listened and
// outlived that host, reattached as k: as Reopen does, with the child's place under this
// session. clone is an isolated child's clone, as its spawn made it.
func (s *Session) ReopenChild(ctx context.Context, cc ChildConfig, clone *workspace.CloneReport, k transport.Kernel, jobs []Restore) (*Session, error) {
	if cc.Workspace == Isolated && clone == nil {
		return nil, fmt.Errorf("session %s: reopen %s: an isolated child without its clone", s.id, cc.Name)
	}
	cfg, err := s.childConfig(ctx, cc, clone)
	if err != nil {
		return nil, err
	}
	return Reopen(ctx, cfg, k, jobs)
}

// childConfig is a child's configuration: the parent's, with the child's environment, its
// own workspace when isolated (a new clone, or the one given), its name and its place.
func (s *Session) childConfig(ctx context.Context, cc ChildConfig, clone *workspace.CloneReport) (Config, error) {
	cfg := s.cfg
	cfg.ID = cc.ID
	cfg.Gatekeeper = nil
	cfg.Env = mergeEnv(s.cfg.Env, cc.Env)
	cfg.Policy.Context = nil // judged on the child's own workspace
	cfg.Listen, cfg.Key = cc.Listen, cc.Key
	cfg.Keeper = nil
	ch := &child{}
	switch cc.Workspace {
	case "", Shared:
	case Isolated:
		made := false
		if clone == nil && cc.grouped != nil {
			clone, made = cc.grouped, true
		}
		if clone == nil {
			dir := cc.Dir
			if dir == "" {
				made = true
				base, err := s.childDirs()
				if err != nil {
					return cfg, err
				}
				d, err := os.MkdirTemp(base, "child-")
				if err != nil {
					return cfg, err
				}
				dir = d
			}
			rep, err := workspace.Clone(ctx, s.cfg.Workspace, dir, workspace.Options{})
			if err != nil {
				return cfg, fmt.Errorf("session %s: spawn %s: %w", s.id, cc.Name, err)
			}
			for _, w := range rep.Warnings {
				s.log.Warn("isolated workspace", "child", cc.Name, "warning", w)
			}
			clone = rep
		}
		ch.dir, ch.clone, ch.made = clone.Dir, clone, made
		cfg.Workspace = filepath.Join(clone.Dir, "copy")
		if cfg.PathMap != nil {
			// The child sees its copy where the parent sees the workspace.
			m, err := remount(cfg.PathMap, s.cwd, cfg.Workspace)
			if err != nil {
				_ = workspace.Discard(clone.Dir)
				return cfg, fmt.Errorf("session %s: spawn %s: %w", s.id, cc.Name, err)
			}
			cfg.PathMap = m
		}
	default:
		return cfg, fmt.Errorf("session %s: spawn: unknown workspace %q (want shared or isolated)", s.id, cc.Workspace)
	}
	cfg.parent, cfg.name, cfg.child = s, cc.Name, ch
	return cfg, nil
}

// childDirs is where isolated children's directories are made: ChildDirs, else the state
// directory, else the system's temporary directory.
func (s *Session) childDirs() (string, error) {
	base := s.cfg.ChildDirs
	if base == "" {
		base = s.cfg.StateDir
	}
	if base == "" {
		base = os.TempDir()
	}
	return base, os.MkdirAll(base, 0o700)
}

// SpawnGroup spawns children that start together, each as Spawn would: the isolated ones
// with no Dir of their own are cloned as one group (one listing of the workspace and one
// base they share, see workspace.CloneGroup: a tree more than the children, not two
// each), and every kernel is started at once. On failure none is left.
func (s *Session) SpawnGroup(ctx context.Context, ccs []ChildConfig) ([]*Session, error) {
	var grouped []int
	for i, cc := range ccs {
		if cc.Workspace == Isolated && cc.Dir == "" {
			grouped = append(grouped, i)
		}
	}
	ccs = slices.Clone(ccs)
	if len(grouped) > 1 {
		base, err := s.childDirs()
		if err != nil {
			return nil, err
		}
		group, err := os.MkdirTemp(base, "group-")
		if err != nil {
			return nil, err
		}
		dirs := make([]string, len(grouped))
		for j := range grouped {
			if dirs[j], err = os.MkdirTemp(base, "child-"); err != nil {
				break
			}
		}
		var reps []*workspace.CloneReport
		if err == nil {
			reps, err = workspace.CloneGroup(ctx, s.cfg.Workspace, group, dirs, workspace.Options{})
		}
		if err != nil {
			for _, d := range append(dirs, group) {
				if d != "" {
					os.RemoveAll(d)
				}
			}
			return nil, fmt.Errorf("session %s: spawn: %w", s.id, err)
		}
		for j, i := range grouped {
			ccs[i].grouped = reps[j]
			for _, w := range reps[j].Warnings {
				s.log.Warn("isolated workspace", "child", ccs[i].Name, "warning", w)
			}
		}
	}
	kids := make([]*Session, len(ccs))
	var g errgroup.Group
	for i, cc := range ccs {
		g.Go(func() error {
			k, err := s.Spawn(ctx, cc)
			kids[i] = k
			return err
		})
	}
	if err := g.Wait(); err != nil {
		for i, k := range kids {
			switch {
			case k != nil:
				k.Close()
			case ccs[i].grouped != nil:
				workspace.Discard(ccs[i].grouped.Dir)
				os.RemoveAll(ccs[i].grouped.Dir)
			}
		}
		return nil, err
	}
	return kids, nil
}

// remount returns m with the directory at sandbox path at seen from host instead.
func remount(m *pathmap.Map, at, host string) (*pathmap.Map, error) {
	mounts := m.Mounts()
	found := false
	for i := range mounts {
		if mounts[i].Sandbox == at {
			mounts[i].Host, found = host, true
		}
	}
	if !found {
		mounts = append(mounts, pathmap.Mount{Sandbox: at, Host: host})
	}
	return pathmap.New(mounts...)
}

// Handback returns an isolated child's hand-back report once it has closed (nil before, and
// for a shared child).
func (s *Session) Handback() *workspace.Report {
	if s.child == nil {
		return nil
	}
	s.child.mu.Lock()
	defer s.child.mu.Unlock()
	return s.child.handback
}

// CloneReport returns what making an isolated child's workspace did (nil for others).
func (s *Session) CloneReport() *workspace.CloneReport {
	if s.child == nil {
		return nil
	}
	return s.child.clone
}

// handBack merges an isolated child's copy into its parent. The child's kernel and every
// process it started have ended before this runs.
//
// It runs at every session's close: a parent's first waits for its children's trees still
// being removed.
func (s *Session) handBack(ctx context.Context) error {
	s.waitRemovals()
	if s.child == nil || s.child.dir == "" {
		return nil
	}
	// What reads only the child's workspace is done at once by children that end
	// together; then they merge one after another.
	prep, err := workspace.Prepare(ctx, s.child.dir)
	if err != nil {
		return fmt.Errorf("session %s: hand-back: %w", s.id, err)
	}
	s.parent.merge.Lock()
	rep, err := prep.Merge(ctx)
	s.parent.merge.Unlock()
	if err != nil {
		return fmt.Errorf("session %s: hand-back: %w", s.id, err)
	}
	// The base and the copy go in the background (removing a tree of reflinked files costs
	// about what cloning it did), the parent's close waiting for them. A directory the
	// spawn made, whose hand-back kept no child's version, holds nothing anyone needs: it
	// goes too, at once out of the way, so a clean child leaves nothing behind. One with
	// conflicts stays, the report naming it.
	dir := s.child.dir
	gone := ""
	if s.child.made && len(rep.Conflicts) == 0 {
		gone = filepath.Join(filepath.Dir(dir), removingPrefix+filepath.Base(dir))
		if err := os.Rename(dir, gone); err != nil {
			return fmt.Errorf("session %s: hand-back: %w", s.id, err)
		}
		dir, rep.Dir = gone, ""
	}
	s.parent.removeLater(func() {
		err := workspace.Discard(dir)
		if err == nil && gone != "" {
			err = os.RemoveAll(gone)
		}
		if err != nil {
			s.log.Warn("isolated workspace: removal", "child", s.name, "dir", dir, "error", err)
		}
	})
	s.child.mu.Lock()
	s.child.handback = rep
	s.child.mu.Unlock()
	return nil
}

// removingPrefix names a handed-back child's directory being removed.
const removingPrefix = ".removing-"

// removals are the removals of handed-back children's trees still under way, by parent:
// the parent's close waits for them (handBack).
var removals = struct {
	sync.Mutex
	by map[*Session]*sync.WaitGroup // guarded by the mutex
}{by: map[*Session]*sync.WaitGroup{}}

// removeLater runs remove in the background, owned by s: s's close waits for it.
func (s *Session) removeLater(remove func()) {
	removals.Lock()
	wg := removals.by[s]
	if wg == nil {
		wg = &sync.WaitGroup{}
		removals.by[s] = wg
	}
	wg.Add(1)
	removals.Unlock()
	go func() {
		defer wg.Done()
		remove()
	}()
}

// waitRemovals waits for the removals of s's children's trees.
func (s *Session) waitRemovals() {
	removals.Lock()
	wg := removals.by[s]
	delete(removals.by, s)
	removals.Unlock()
	if wg != nil {
		wg.Wait()
	}
}

// mergeEnv returns base with the entries of over added or replacing those of the same name.
func mergeEnv(base, over []string) []string {
	out := slices.Clone(base)
	for _, kv := range over {
		name, _, _ := strings.Cut(kv, "=")
		i := slices.IndexFunc(out, func(e string) bool { return strings.HasPrefix(e, name+"=") })
		if i >= 0 {
			out[i] = kv
		} else {
			out = append(out, kv)
		}
	}
	return out
}
