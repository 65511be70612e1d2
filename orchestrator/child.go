package orchestrator

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

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
}

// child is what a parent keeps of a child.
type child struct {
	dir string // isolated: the clone's directory

	clone *workspace.CloneReport

	mu       sync.Mutex
	handback *workspace.Report // guarded by mu
}

// Spawn opens a child session on the parent's transport. An isolated child works in a
// reflink clone of the parent's workspace, handed back when it closes. The child's
// questions go to its own clients first, then up the chain.
func (s *Session) Spawn(ctx context.Context, cc ChildConfig) (*Session, error) {
	cfg := s.cfg
	cfg.ID = ""
	cfg.Gatekeeper = nil
	cfg.Env = mergeEnv(s.cfg.Env, cc.Env)
	cfg.Policy.Context = nil // judged on the child's own workspace
	ch := &child{}
	switch cc.Workspace {
	case "", Shared:
	case Isolated:
		dir := cc.Dir
		if dir == "" {
			base := s.cfg.ChildDirs
			if base == "" {
				base = s.cfg.StateDir
			}
			if base == "" {
				base = os.TempDir()
			}
			if err := os.MkdirAll(base, 0o700); err != nil {
				return nil, err
			}
			d, err := os.MkdirTemp(base, "child-")
			if err != nil {
				return nil, err
			}
			dir = d
		}
		rep, err := workspace.Clone(ctx, s.cfg.Workspace, dir, workspace.Options{})
		if err != nil {
			return nil, fmt.Errorf("session %s: spawn %s: %w", s.id, cc.Name, err)
		}
		for _, w := range rep.Warnings {
			s.log.Warn("isolated workspace", "child", cc.Name, "warning", w)
		}
		ch.dir, ch.clone = dir, rep
		cfg.Workspace = filepath.Join(dir, "copy")
		if cfg.PathMap != nil {
			// The child sees its copy where the parent sees the workspace.
			m, err := remount(cfg.PathMap, s.cwd, cfg.Workspace)
			if err != nil {
				_ = workspace.Discard(dir)
				return nil, fmt.Errorf("session %s: spawn %s: %w", s.id, cc.Name, err)
			}
			cfg.PathMap = m
		}
	default:
		return nil, fmt.Errorf("session %s: spawn: unknown workspace %q (want shared or isolated)", s.id, cc.Workspace)
	}
	c, err := openChild(ctx, cfg, s, cc.Name, ch)
	if err != nil {
		if ch.dir != "" {
			_ = workspace.Discard(ch.dir)
		}
		return nil, err
	}
	return c, nil
}

func openChild(ctx context.Context, cfg Config, parent *Session, name string, ch *child) (*Session, error) {
	cfg.parent, cfg.name, cfg.child = parent, name, ch
	cfg.Listen, cfg.Key = "", "" // a child's kernel is its own, and ends with its host
	return Open(ctx, cfg)
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
func (s *Session) handBack(ctx context.Context) error {
	if s.child == nil || s.child.dir == "" {
		return nil
	}
	s.parent.merge.Lock() // children that end together merge one after another
	rep, err := workspace.Merge(ctx, s.child.dir)
	s.parent.merge.Unlock()
	if err != nil {
		return fmt.Errorf("session %s: hand-back: %w", s.id, err)
	}
	if err := workspace.Discard(s.child.dir); err != nil {
		return fmt.Errorf("session %s: hand-back: %w", s.id, err)
	}
	s.child.mu.Lock()
	s.child.handback = rep
	s.child.mu.Unlock()
	return nil
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
