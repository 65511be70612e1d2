// Package fanout runs one script in many isolated children of a session at once and merges
// each back as it ends: embedded in this process (Embedded) or in a daemon's session
// (Hosted), the same engine (Run) either way.
package fanout

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sync/errgroup"

	"github.com/paddockhq/paddock/client"
	"github.com/paddockhq/paddock/daemon/api"
	"github.com/paddockhq/paddock/orchestrator"
	"github.com/paddockhq/paddock/session"
	"github.com/paddockhq/paddock/workspace"
)

// Child is one child's line of the combined report.
type Child struct {
	Index     int              `json:"index"`
	Name      string           `json:"name"`
	Status    int              `json:"status"`
	End       string           `json:"end"` // finished, exited, refused, failed
	Error     string           `json:"error,omitempty"`
	Taken     []api.Change     `json:"taken"`         // paths only it changed, now its version in the workspace
	Merged    []api.Change     `json:"merged"`        // text files both changed whose lines merged cleanly, now the merge
	Conflicts []Conflict       `json:"conflicts"`     // paths whose workspace version stayed; where each version is
	Dir       string           `json:"dir,omitempty"` // where its conflicts/ and handback.json are
	Result    *api.Result      `json:"result,omitempty"`
	Clone     *api.CloneReport `json:"clone,omitempty"`
}

// String is the child's line as it ends: its end and status, its counts, and where its
// versions of conflicted paths are.
func (c Child) String() string {
	s := fmt.Sprintf("%s %s (status %d): %d taken, %d merged, %d conflicts", c.Name, c.End, c.Status, len(c.Taken), len(c.Merged), len(c.Conflicts))
	if len(c.Conflicts) > 0 && c.Dir != "" {
		s += fmt.Sprintf("\n  %s's versions of the conflicted paths are in %s", c.Name, filepath.Join(c.Dir, "conflicts"))
	}
	return s
}

// Conflict is one conflicted path of a child with where each version was kept.
type Conflict struct {
	api.ConflictedPath
	Kept Kept `json:"kept"`
}

// Kept names, by absolute path, where each version of a conflicted path is.
type Kept struct {
	Workspace string `json:"workspace,omitempty"` // the workspace's own, in place ("" when it holds none)
	Child     string `json:"child,omitempty"`     // the child's ("" when it removed the path)
	Marked    string `json:"marked,omitempty"`    // git's merge with conflict markers, for a text file
}

// conflicts gives a hand-back's conflicts with where each version was kept: the
// workspace's in place, the child's and the marked merge under the hand-back's directory.
func conflicts(workspace string, hb *api.Report) []Conflict {
	out := make([]Conflict, len(hb.Conflicts))
	for i, c := range hb.Conflicts {
		out[i].ConflictedPath = c
		if c.Parent != "absent" {
			out[i].Kept.Workspace = filepath.Join(workspace, filepath.FromSlash(c.Path))
		}
		if c.Saved != "" && hb.Dir != "" {
			out[i].Kept.Child = filepath.Join(hb.Dir, filepath.FromSlash(c.Saved))
		}
		if c.Marked != "" && hb.Dir != "" {
			out[i].Kept.Marked = filepath.Join(hb.Dir, filepath.FromSlash(c.Marked))
		}
	}
	return out
}

// Report is the combined report.
type Report struct {
	Workspace string  `json:"workspace"`
	Children  []Child `json:"children"`
	Failed    int     `json:"failed"`    // children whose script failed or was refused
	Merged    int     `json:"merged"`    // paths merged by lines over every child
	Conflicts int     `json:"conflicts"` // conflicted paths over every child
}

// Spawner is where the children run.
type Spawner interface {
	// Workspace is the workspace the children clone.
	Workspace() string
	// Child spawns child i isolated, calls spawned once its workspace is made (or its spawn
	// failed), runs the script in it with no budget, and closes it, which hands it back.
	Child(ctx context.Context, i int, name, script string, spawned func()) Child
	// Close closes the root session.
	Close()
}

// Options are a fan-out's.
type Options struct {
	N, Parallel int // how many children; how many at once (0: all)
	Script      string
	// Ended, when set, is told of each child as it ends (ended of N so far).
	Ended func(ended, n int, c Child)
	// Warn, when set, is told each warning of the children's clones once, by its kind.
	Warn func(string)
}

// ChildEnv is child i's own environment.
func ChildEnv(i int) []string { return []string{"PADDOCK_CHILD_INDEX=" + strconv.Itoa(i)} }

// Run runs the script in the children, at most Parallel at once, closes the spawner's
// root, and reports.
func Run(ctx context.Context, sp Spawner, o Options) *Report {
	defer sp.Close()
	n, parallel := o.N, o.Parallel
	if parallel < 1 || parallel > n {
		parallel = n
	}
	if w, ok := sp.(waver); ok {
		w.wave(parallel)
	}
	rep := &Report{Workspace: sp.Workspace(), Children: make([]Child, n)}
	var mu sync.Mutex
	ended := 0
	warned := map[string]bool{} // guarded by mu
	// The first wave of children is cloned before any of them runs, so that each of them
	// finds the workspace as it was at the start; a child of a later wave finds it with the
	// earlier children's hand-backs in it.
	var wave sync.WaitGroup
	wave.Add(parallel)
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(parallel)
	for i := range n {
		g.Go(func() error {
			c := sp.Child(gctx, i, "child-"+strconv.Itoa(i), o.Script, func() {
				if i < parallel {
					wave.Done()
					wave.Wait()
				}
			})
			if c.Taken == nil {
				c.Taken = []api.Change{}
			}
			if c.Merged == nil {
				c.Merged = []api.Change{}
			}
			if c.Conflicts == nil {
				c.Conflicts = []Conflict{}
			}
			mu.Lock()
			defer mu.Unlock()
			rep.Children[i] = c
			ended++
			if c.Clone != nil && o.Warn != nil {
				for _, w := range c.Clone.Warnings {
					// Every child meets the same (its counts and directory aside): said once,
					// for the first child, by its kind ("no reflinks").
					kind, _, _ := strings.Cut(w, ":")
					if !warned[kind] {
						warned[kind] = true
						o.Warn(w)
					}
				}
			}
			if o.Ended != nil {
				o.Ended(ended, n, c)
			}
			return nil
		})
	}
	g.Wait()
	for _, c := range rep.Children {
		if c.End != orchestrator.Finished || c.Status != 0 {
			rep.Failed++
		}
		rep.Merged += len(c.Merged)
		rep.Conflicts += len(c.Conflicts)
	}
	return rep
}

// waver is a Spawner that spawns the first wave of children together; Run tells it the
// wave's size before any child starts.
type waver interface{ wave(n int) }

// Embedded runs the children as children of root, in this process; done, when set, runs
// once root has closed. The first wave is spawned as one group (Session.SpawnGroup): one
// listing of the workspace and one base they share.
func Embedded(root *orchestrator.Session, done func()) Spawner {
	return &embedded{root: root, done: done}
}

type embedded struct {
	root  *orchestrator.Session
	done  func()
	first struct {
		n    int // set by wave before any child
		once sync.Once
		kids []*orchestrator.Session
		err  error
	}
}

func (e *embedded) wave(n int) { e.first.n = n }

// spawn spawns child i: from the first wave's group, or alone.
func (e *embedded) spawn(ctx context.Context, i int, name string) (*orchestrator.Session, error) {
	if i >= e.first.n {
		return e.root.Spawn(ctx, orchestrator.ChildConfig{Name: name, Workspace: orchestrator.Isolated, Env: ChildEnv(i)})
	}
	e.first.once.Do(func() {
		ccs := make([]orchestrator.ChildConfig, e.first.n)
		for j := range ccs {
			ccs[j] = orchestrator.ChildConfig{Name: "child-" + strconv.Itoa(j), Workspace: orchestrator.Isolated, Env: ChildEnv(j)}
		}
		e.first.kids, e.first.err = e.root.SpawnGroup(ctx, ccs)
	})
	if e.first.err != nil {
		return nil, e.first.err
	}
	return e.first.kids[i], nil
}

func (e *embedded) Workspace() string { return e.root.Workspace() }

func (e *embedded) Close() {
	e.root.Close()
	if e.done != nil {
		e.done()
	}
}

func (e *embedded) Child(ctx context.Context, i int, name, script string, spawned func()) Child {
	c := Child{Index: i, Name: name, End: orchestrator.Failed}
	child, err := e.spawn(ctx, i, name)
	spawned()
	if err != nil {
		c.Error = err.Error()
		return c
	}
	c.Clone = child.CloneReport().API()
	res, err := child.Run(ctx, orchestrator.Call{Script: script, Budget: -1})
	if err != nil {
		c.Error = err.Error()
	} else {
		c.Result, c.End, c.Status = res.API(), res.End.Kind, res.End.Status
	}
	if err := child.Close(); err != nil {
		c.Error = err.Error()
		c.End = orchestrator.Failed
	}
	if h := child.Handback(); h != nil {
		hb := h.API()
		c.Taken, c.Merged, c.Conflicts, c.Dir = hb.Taken, hb.Merged, conflicts(e.Workspace(), hb), hb.Dir
	}
	return c
}

// Open opens the root session a fan-out's children are spawned from, as session.Open opens
// one, with the children's clones, conflicts and reports in stateDir: "" makes a new
// directory beside the workspace, on its filesystem so that the clones are reflinks or
// snapshots, removed at the end once empty (a conflicted child's directory stays, named in
// the report). notice gets what the user must be told of the root session (a variable left
// out, a missing sftp subsystem); done gets what Finish handed back of the root's own
// workspace (one synced to a box), once the children are closed.
func Open(ctx context.Context, o session.Options, stateDir string, notice func(string), done func(*workspace.Report, error)) (Spawner, error) {
	made := stateDir == ""
	if made {
		var err error
		if stateDir, _, err = workspace.Scratch(o.Workspace, ".paddock-fanout-"); err != nil {
			return nil, err
		}
	}
	p, err := session.Prepare(ctx, o)
	if err != nil {
		if made {
			os.RemoveAll(stateDir)
		}
		return nil, err
	}
	for _, n := range p.Notices {
		if notice != nil {
			notice(n)
		}
	}
	cfg := p.Config
	cfg.StateDir = stateDir
	root, err := orchestrator.Open(ctx, cfg)
	if err != nil {
		p.Finish(ctx)
		if made {
			os.RemoveAll(stateDir)
		}
		return nil, err
	}
	return Embedded(root, func() {
		rep, err := p.Finish(context.Background())
		if done != nil {
			done(rep, err)
		}
		if made {
			os.Remove(stateDir) // only when empty: no child conflicted
		}
	}), nil
}

// Hosted runs the children in root, a session of the daemon c talks to: each is spawned
// isolated, runs the script as a call with no budget, and is closed, which hands it back.
// Closing the spawner closes root and c.
func Hosted(c *client.Client, root api.Session) Spawner { return &hosted{c, root} }

type hosted struct {
	c    *client.Client
	root api.Session
}

func (h *hosted) Workspace() string { return h.root.Workspace }

func (h *hosted) Close() {
	h.c.CloseSession(context.Background(), h.root.ID)
	h.c.Close()
}

func (h *hosted) Child(ctx context.Context, i int, name, script string, spawned func()) Child {
	out := Child{Index: i, Name: name, End: orchestrator.Failed}
	kid, err := h.c.Spawn(ctx, h.root.ID, api.SpawnRequest{Name: name, Workspace: orchestrator.Isolated, Env: ChildEnv(i)})
	spawned()
	if err != nil {
		out.Error = err.Error()
		return out
	}
	out.Clone = kid.Clone
	r, err := h.c.Bash(ctx, kid.ID, api.BashRequest{Script: script, Budget: "-1"})
	switch {
	case err != nil:
		out.Error = err.Error()
	case r.Result == nil:
		out.Error, out.End = "the daemon answered with no result", orchestrator.Failed
	default:
		out.Result, out.End, out.Status = r.Result, r.End.Kind, r.End.Status
	}
	closed, err := h.c.CloseSession(context.WithoutCancel(ctx), kid.ID)
	if err != nil {
		out.Error, out.End = err.Error(), orchestrator.Failed
	}
	if hb := closed.Handback; hb != nil {
		out.Taken, out.Merged, out.Conflicts, out.Dir = hb.Taken, hb.Merged, conflicts(h.Workspace(), hb), hb.Dir
	}
	return out
}
