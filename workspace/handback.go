package workspace

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/go-git/go-git/v5/plumbing/format/gitignore"
	"github.com/paddockhq/paddock/internal/content"
	"golang.org/x/sync/errgroup"
	"golang.org/x/sys/unix"
)

// Report is the outcome of a hand-back, also written to handback.json in the workspace
// directory. It holds no times, so a hand-back cut and rerun reports exactly what an uncut
// one does.
type Report struct {
	Parent    string           `json:"parent"`
	Dir       string           `json:"dir"`
	Taken     []Change         `json:"taken"`            // the child's changes now in the parent
	Merged    []Change         `json:"merged,omitempty"` // files both changed whose lines merged cleanly, now the merge
	Conflicts []ConflictedPath `json:"conflicts"`        // the child's changes not taken
	Counts    Counts           `json:"counts"`
}

// Change is one path where the parent now holds the child's version.
type Change struct {
	Path   string `json:"path"`
	Change string `json:"change"` // added, modified, removed
	Kind   string `json:"kind"`   // what the child holds there: file, symlink, dir, absent
}

// ConflictedPath is one path where the parent kept its own entry and the child's version was
// not taken.
type ConflictedPath struct {
	Path   string `json:"path"`
	Reason string `json:"reason"` // a Reason* constant
	Parent string `json:"parent"` // what the parent holds: file, symlink, dir, absent
	Child  string `json:"child"`  // what the child held: file, symlink, dir, absent (removed)
	// Saved is where the child's version is, relative to the workspace directory
	// (conflicts/PATH); empty when the child removed the path.
	Saved string `json:"saved,omitempty"`
	// Marked, for a text file whose lines did not merge cleanly, is where git's merge with
	// its conflict markers is, relative to the workspace directory (conflicts/PATH.merge).
	Marked string `json:"marked,omitempty"`
}

// Counts sums up a hand-back.
type Counts struct {
	Listed    int `json:"listed"`           // paths in the manifest
	Changed   int `json:"changed"`          // paths the child changed
	Taken     int `json:"taken"`            // of those, now the child's version in the parent
	Merged    int `json:"merged,omitempty"` // of those, now the clean line merge of both versions
	Conflicts int `json:"conflicts"`        // of those, not taken
	Ignored   int `json:"ignored"`          // new paths of the child that the ignore rules leave out
}

// compared counts content comparisons, for the test that unchanged files are not read.
var compared atomic.Int64

// hook, when set (by tests), is called after every change to the disk a hand-back makes,
// from several goroutines at once.
var hook func(what string)

func step(what string) {
	if hook != nil {
		hook(what)
	}
}

// Handback merges dir/copy into the parent recorded in dir's manifest, path by path as
// Plan decides, saves the child's versions not taken under dir/conflicts, writes the
// report to dir/handback.json and removes dir/base and dir/copy. The child must have
// stopped. A hand-back cut at any moment can be run again from the start and ends with the
// same tree and report; once handback.json exists, a repeat changes nothing and returns it.
func Handback(ctx context.Context, dir string) (*Report, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	rep, err := Merge(ctx, dir)
	if err != nil {
		return nil, err
	}
	return rep, Discard(dir)
}

// Merge is the hand-back up to its report: everything but removing the base and the copy,
// which Discard does. Several children of one parent merge one after another; their
// removals need not wait for each other. Once Merge has returned, Handback returns the
// same report and only discards.
func Merge(ctx context.Context, dir string) (*Report, error) {
	p, err := Prepare(ctx, dir)
	if err != nil {
		return nil, err
	}
	return p.Merge(ctx)
}

// Prepared is a hand-back whose reading of the workspace alone is done: what the child
// changed is known; nothing of the parent was read or written yet.
type Prepared struct {
	h       *handback
	cs      *copyState
	changed []string
	done    *Report // the report of a hand-back that had ended
}

// Prepare does the part of a hand-back that reads only the workspace (a snapshot's
// listing, the walk of the copy, the comparisons with the base) and none of the parent:
// the children of one parent prepare at once, then merge one after another. The child
// must have stopped.
func Prepare(ctx context.Context, dir string) (*Prepared, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	if rep, err := readReport(dir); err == nil {
		return &Prepared{done: rep}, nil
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	m, err := readManifest(dir)
	if err != nil {
		return nil, err
	}
	h := &handback{
		dir: dir, parent: m.Parent, base: filepath.Join(dir, BaseDir), copy: filepath.Join(dir, CopyDir),
		m: m, snapshot: m.Snapshot != 0,
	}
	if m.Base != "" {
		h.base = m.Base // shared with the workspaces cloned with it
	}
	if h.snapshot {
		if m.records, err = snapshotRecords(ctx, h.base, m); err != nil {
			return nil, err
		}
	}
	h.index = make(map[string]int, len(m.records))
	for i, r := range m.records {
		h.index[r.Path] = i
	}
	cs, changed, err := h.childChanges(ctx)
	if err != nil {
		return nil, err
	}
	return &Prepared{h: h, cs: cs, changed: changed}, nil
}

// Merge carries out a prepared hand-back up to its report (see the package function).
func (p *Prepared) Merge(ctx context.Context) (*Report, error) {
	if p.done != nil {
		return p.done, nil
	}
	h, dir := p.h, p.h.dir
	if rep, err := readReport(dir); err == nil {
		return rep, nil
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	facts, err := h.gather(ctx, p.cs, p.changed)
	if err != nil {
		return nil, err
	}
	steps := Plan(facts)
	if err := h.clean(steps); err != nil {
		return nil, err
	}
	// The merged contents' hashes go to the journal before the parent changes: a rerun
	// after a cut finds a merge it already took by them (see gather).
	journal := map[string]string{}
	for _, s := range steps {
		if s.Action == Merged {
			journal[s.Path] = contentHash(h.merges[s.Path])
		}
	}
	if len(journal) > 0 {
		if err := writeJournal(dir, journal); err != nil {
			return nil, err
		}
	}
	for _, s := range steps {
		if s.Action == Conflict && s.Child != Absent {
			// The saved versions are private to the workspace's owner.
			if err := os.Mkdir(filepath.Join(dir, ConflictsDir), 0o700); err != nil && !os.IsExist(err) {
				return nil, err
			}
			break
		}
	}
	// Steps that make or remove directories, or swap an entry for one of another kind, run
	// one by one in the plan's order; then the files and symlinks, each in a directory that
	// is there by then, run in parallel: any subset of them done before a crash is a state
	// the rerun's plan reaches the same end from.
	var leaves []Step
	for _, s := range steps {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if (s.Action == Take && s.Parent != Dir || s.Action == Conflict || s.Action == Merged) && (s.Child == File || s.Child == Symlink) {
			leaves = append(leaves, s)
			continue
		}
		if err := h.do(s); err != nil {
			return nil, fmt.Errorf("hand-back %s: %w", s.Path, err)
		}
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(4 * runtime.GOMAXPROCS(0))
	for _, s := range leaves {
		g.Go(func() error {
			if err := gctx.Err(); err != nil {
				return err
			}
			if err := h.do(s); err != nil {
				return fmt.Errorf("hand-back %s: %w", s.Path, err)
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	rep := h.report(facts, steps)
	if err := writeReport(dir, rep); err != nil {
		return nil, err
	}
	step("report")
	return rep, nil
}

// Discard removes the base and the copy of a workspace (Handback does, once its report
// is written); the manifest, the report and the saved conflicts stay.
func Discard(dir string) error {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	for _, name := range []string{CopyDir, BaseDir} {
		if err := destroySubvolume(filepath.Join(dir, name)); err != nil {
			return err
		}
		step("remove " + name)
	}
	if h, err := readHeader(dir); err == nil && h.Base != "" {
		if err := leaveGroup(h.Member, filepath.Dir(h.Base)); err != nil {
			return err
		}
	}
	if err := os.Remove(filepath.Join(dir, JournalName)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

type handback struct {
	dir, parent, base, copy string
	m                       *manifest
	index                   map[string]int // path -> record
	ignored                 atomic.Int64
	dirs                    map[string]bool   // parent paths known to be directories
	snapshot                bool              // base and copy are btrfs snapshots of the parent
	journal                 map[string]string // a cut run's merged contents' hashes, by path
	merges                  map[string][]byte // by path: the clean merge, or the marked one
	inodesMu                sync.Mutex
	inodes                  map[handedInode]*handedFirst // guarded by inodesMu
	firstCopied, recopied   atomic.Int64                 // bytes copied for first names, and again for later ones
}

// snapshotRecords lists the base of a snapshot workspace, as the parent was listed at
// spawn, and gives each path's record from the base: a snapshot keeps the inode number
// and times of every entry, so the base's facts are the parent's at spawn and the copy's
// as made. An entry whose ctime is not older than the clock just before the snapshot is
// racy.
func snapshotRecords(ctx context.Context, base string, m *manifest) ([]record, error) {
	rs, err := baseListings.get(ctx, base, m)
	if err != nil {
		return nil, err
	}
	for _, r := range rs {
		switch r.Kind {
		case File:
			m.Files++
			m.Bytes += r.Parent.Size
		case Symlink:
			m.Links++
		case Dir:
			m.Dirs++
		}
	}
	return rs, nil
}

// baseListings keeps the records of the read-only bases that snapshot workspaces of a
// group share, so that the group's hand-backs list their base once; a base's entry goes
// with it (leaveGroup).
var baseListings = &listings{m: map[string]*listing{}}

type listings struct {
	mu sync.Mutex
	m  map[string]*listing // guarded by mu
}

type listing struct {
	once   sync.Once
	rs     []record
	git    bool // with ignore, the manifests' Git and Ignore where read from the base
	ignore []ignoreSet
	err    error
}

// get returns base's records, listing it once for every caller; the records are shared
// and never changed. A workspace with a base of its own is listed each time.
func (l *listings) get(ctx context.Context, base string, m *manifest) ([]record, error) {
	if m.Base == "" {
		return listBase(ctx, base, m)
	}
	l.mu.Lock()
	e := l.m[base]
	if e == nil {
		e = &listing{}
		l.m[base] = e
	}
	l.mu.Unlock()
	e.once.Do(func() {
		mh := &manifest{header: m.header}
		e.rs, e.err = listBase(ctx, base, mh)
		e.git, e.ignore = mh.Git, mh.Ignore
	})
	if e.err != nil {
		l.forget(base) // a cancelled listing is not kept
		return nil, e.err
	}
	if m.GitFromBase {
		m.Git, m.Ignore = e.git, e.ignore
	}
	return e.rs, nil
}

func (l *listings) forget(base string) {
	l.mu.Lock()
	delete(l.m, base)
	l.mu.Unlock()
}

// listBase lists a snapshot workspace's base and gives each path's record from it; where
// the manifest says so, it first reads the manifest's Git and Ignore from the base.
func listBase(ctx context.Context, base string, m *manifest) ([]record, error) {
	if m.GitFromBase {
		f, err := ignoreFacts(ctx, base)
		if err != nil {
			return nil, err
		}
		if len(f.Prefix) > 0 {
			return nil, fmt.Errorf("the repository of the base %s has its work tree elsewhere", base)
		}
		m.Git, m.Ignore = f.Git, f.Ignore
	}
	entries, err := list(ctx, base, ListOptions{MaxFiles: math.MaxInt}, &m.Git)
	if err != nil {
		return nil, err
	}
	rs := make([]record, len(entries))
	for i, e := range entries {
		f, k, err := lstatFacts(join(base, e.Path))
		if err != nil {
			return nil, err
		}
		if k != e.Kind {
			return nil, fmt.Errorf("the base of a snapshot workspace changed at %s", e.Path)
		}
		rs[i] = record{Path: e.Path, Kind: k, Parent: f, Copy: f, Racy: k != Dir && f.Ctime >= m.Snapshot}
	}
	return rs, nil
}

// lstatParent gives the facts of the parent's entry at p, which is Absent when a path
// above it is not a directory: a symlink above p is never looked through.
func (h *handback) lstatParent(p string) (facts, Kind, error) {
	if h.dirs == nil {
		h.dirs = map[string]bool{}
	}
	if d := path.Dir(p); d != "." && !h.dirs[d] {
		_, k, err := h.lstatParent(d)
		if err != nil || k != Dir {
			return facts{}, Absent, err
		}
	}
	f, k, err := lstatFacts(join(h.parent, p))
	if k == Dir {
		h.dirs[p] = true
	}
	return f, k, err
}

func join(root, rel string) string { return filepath.Join(root, filepath.FromSlash(rel)) }

// copyState is what the copy holds: at each listed path (by record), and at new ones.
type copyState struct {
	listed []childEntry // by record; each written by one walker
	mu     sync.Mutex
	added  map[string]Kind // guarded by mu
}

// childEntry is what the copy holds at a path.
type childEntry struct {
	kind  Kind
	facts facts
}

// gather collects the facts of every path the child changed (childChanges found them), of
// their ancestors, and of the parent's entries in directories the child removes or
// replaces. It reads a file only where its stat facts differ from the manifest's.
func (h *handback) gather(ctx context.Context, cs *copyState, changed []string) ([]PathFacts, error) {
	childKind := func(p string) Kind {
		if i, ok := h.index[p]; ok {
			return cs.listed[i].kind
		}
		return cs.added[p]
	}
	byPath := map[string]*PathFacts{}
	var out []*PathFacts
	add := func(p string, childChanged bool) (*PathFacts, error) {
		if f := byPath[p]; f != nil {
			f.ChildChanged = f.ChildChanged || childChanged
			return f, nil
		}
		f := &PathFacts{Path: p, Child: childKind(p), ChildChanged: childChanged}
		var rec *record
		if i, ok := h.index[p]; ok {
			rec = &h.m.records[i]
			f.Base = rec.Kind
		}
		pf, pk, err := h.lstatParent(p)
		if err != nil {
			return nil, err
		}
		f.Parent = pk
		switch {
		case rec == nil:
			f.ParentChanged = pk != Absent
		case pk != rec.Kind:
			f.ParentChanged = true
		case pk == Dir:
		case sameFacts(pf, rec.Parent) && !rec.Racy:
		case pk == File && (pf.Size != rec.Parent.Size || pf.Mode != rec.Parent.Mode):
			f.ParentChanged = true
		default:
			eq, err := equalEntries(ctx, h.parent, h.base, p, pk)
			if err != nil {
				return nil, err
			}
			f.ParentChanged = !eq
		}
		byPath[p] = f
		out = append(out, f)
		return f, nil
	}
	for _, p := range changed {
		f, err := add(p, true)
		if err != nil {
			return nil, err
		}
		if f.ParentChanged && f.Parent == f.Child {
			switch f.Child {
			case Absent, Dir:
				f.Same = true
			default:
				if f.Same, err = equalEntries(ctx, h.parent, h.copy, p, f.Child); err != nil {
					return nil, err
				}
			}
		}
		for d := path.Dir(p); d != "."; d = path.Dir(d) {
			if byPath[d] != nil {
				break
			}
			if _, err := add(d, false); err != nil {
				return nil, err
			}
		}
	}
	// The parent's entries in directories the child removes or replaces by a file: an
	// entry that stays keeps its directory.
	for _, p := range changed {
		f := byPath[p]
		if f.Parent != Dir || f.Child == Dir {
			continue
		}
		des, err := os.ReadDir(join(h.parent, p))
		if err != nil {
			return nil, err
		}
		for _, de := range des {
			sub := path.Join(p, de.Name())
			if isTemp(de.Name()) || byPath[sub] != nil {
				continue
			}
			if _, err := add(sub, false); err != nil {
				return nil, err
			}
		}
	}
	if err := h.mergeLines(ctx, out, cs); err != nil {
		return nil, err
	}
	facts := make([]PathFacts, len(out))
	for i, f := range out {
		facts[i] = *f
	}
	return facts, nil
}

// mergeLines merges by lines each file both changed differently that is a text file of
// one mode in the base, the parent and the child, and records the outcome in its facts
// and the merge in h.merges. A file the journal of a cut run names, whose parent's content
// is the merge recorded there, was merged before the cut: it is merged again, to the
// content it holds.
func (h *handback) mergeLines(ctx context.Context, fs []*PathFacts, cs *copyState) error {
	j, err := readJournal(h.dir)
	if err != nil {
		return err
	}
	h.journal, h.merges = j, map[string][]byte{}
	// The merges are held until the plan runs. A child can give one file thousands of
	// names, each a path both changed: past maxMergesHeld in all, a file is not merged
	// and keeps the table's conflict, the child's version saved as any conflict's is.
	var held int64
	hold := func(p string, b []byte) bool {
		if held+int64(len(b)) > maxMergesHeld {
			return false
		}
		held += int64(len(b))
		h.merges[p] = b
		return true
	}
	for _, f := range fs {
		if !f.ChildChanged || !f.ParentChanged || f.Base != File || f.Parent != File || f.Child != File {
			continue
		}
		i, ok := h.index[f.Path]
		if !ok {
			continue
		}
		rec, child := &h.m.records[i], cs.listed[i].facts
		pname := join(h.parent, f.Path)
		if want, ok := h.journal[f.Path]; ok {
			if pb, err := readBeneath(h.parent, f.Path, maxMergeSize); err == nil && contentHash(pb) == want && hold(f.Path, pb) {
				f.Same, f.Merge = false, MergeClean
				continue
			}
		}
		if f.Same {
			continue
		}
		pf, _, err := lstatFacts(pname)
		if err != nil {
			return err
		}
		perm := rec.Parent.Mode & 0o7777
		if held >= maxMergesHeld || pf.Mode&0o7777 != perm || child.Mode&0o7777 != perm ||
			pf.Size > maxMergeSize || child.Size > maxMergeSize || rec.Parent.Size > maxMergeSize {
			continue
		}
		// The three versions are read beneath their roots, following no symlink, and git
		// merges private copies of them.
		var sides [3][]byte
		text := true
		for k, root := range []string{h.parent, h.base, h.copy} {
			b, err := readBeneath(root, f.Path, maxMergeSize)
			if err != nil {
				return fmt.Errorf("merge %s: %w", f.Path, err)
			}
			sides[k] = b
			text = text && bytes.IndexByte(b[:min(len(b), 8000)], 0) < 0 // git's test for binary
		}
		if !text {
			continue
		}
		out, clean, ok, err := h.mergePrivate(ctx, sides)
		if err != nil {
			return fmt.Errorf("merge %s: %w", f.Path, err)
		}
		switch {
		case !ok || !hold(f.Path, out):
		case clean:
			f.Merge = MergeClean
		default:
			f.Merge = MergeMarked
		}
	}
	return nil
}

// mergePrivate merges the parent's, the base's and the child's content by lines, written
// to private files of the workspace directory for git to read.
func (h *handback) mergePrivate(ctx context.Context, sides [3][]byte) (out []byte, clean, ok bool, err error) {
	tmp, err := os.MkdirTemp(h.dir, ".merge-")
	if err != nil {
		return nil, false, false, err
	}
	defer os.RemoveAll(tmp)
	var names [3]string
	for k, name := range []string{"parent", "base", "child"} {
		names[k] = filepath.Join(tmp, name)
		if err := os.WriteFile(names[k], sides[k], 0o600); err != nil {
			return nil, false, false, err
		}
	}
	return lineMerge(ctx, tmp, names[0], names[1], names[2])
}

func sameFacts(a, b facts) bool { return a == b }

// childChanges walks the copy and returns what it holds and the paths the child changed,
// in order.
func (h *handback) childChanges(ctx context.Context) (*copyState, []string, error) {
	cs := &copyState{listed: make([]childEntry, len(h.m.records)), added: map[string]Kind{}}
	if err := h.walkCopy(ctx, cs); err != nil {
		return nil, nil, err
	}
	var changed []string
	for i := range h.m.records {
		c, err := h.childChanged(ctx, &h.m.records[i], cs.listed[i])
		if err != nil {
			return nil, nil, err
		}
		if c {
			changed = append(changed, h.m.records[i].Path)
		}
	}
	for p := range cs.added {
		changed = append(changed, p)
	}
	slices.SortFunc(changed, comparePaths)
	return cs, changed, nil
}

// childChanged reports whether the copy's entry differs from the base's, reading both only
// when the stat facts differ from those recorded at spawn. An entry that cannot be read
// counts as changed; only a cancelled ctx is an error.
func (h *handback) childChanged(ctx context.Context, r *record, c childEntry) (bool, error) {
	switch {
	case c.kind != r.Kind:
		return true, nil
	case c.kind == Dir:
		return false, nil
	case sameFacts(c.facts, r.Copy) && r.Copy.Ctime < h.m.Stamp:
		return false, nil
	case c.facts.Size != r.Copy.Size || c.facts.Mode != r.Copy.Mode:
		return true, nil // no need to read
	}
	eq, err := equalEntries(ctx, h.copy, h.base, r.Path, c.kind)
	if cerr := ctx.Err(); cerr != nil {
		return false, cerr
	}
	return err != nil || !eq, nil
}

// walkCopy records what the copy holds: every path of the manifest, and every new path the
// ignore rules (the recorded ones and the copy's own .gitignore files) do not leave out.
func (h *handback) walkCopy(ctx context.Context, cs *copyState) error {
	// Directories are walked in parallel: a goroutine per directory while the limit allows,
	// else in the walking goroutine itself.
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(4 * runtime.GOMAXPROCS(0))
	var walk func(rel string, elems []string, ps []gitignore.Pattern) error
	walk = func(rel string, elems []string, ps []gitignore.Pattern) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		d, err := os.Open(join(h.copy, rel))
		if err != nil {
			return err
		}
		defer d.Close()
		des, err := d.ReadDir(-1)
		if err != nil {
			return err
		}
		fd := int(d.Fd())
		if rel != "" && h.snapshot {
			// A nested repository: its files are listed by no one (as List has it), and a
			// snapshot copy holds them as the parent does.
			for _, de := range des {
				if de.Name() == ".git" {
					return nil
				}
			}
		}
		for _, de := range des {
			if de.Name() == ".gitignore" && de.Type().IsRegular() {
				more, err := readIgnoreFile(filepath.Join(join(h.copy, rel), ".gitignore"), elems)
				if err != nil {
					return err
				}
				ps = append(slices.Clip(ps), more...)
				break
			}
		}
		var m gitignore.Matcher
		for _, de := range des {
			name := de.Name()
			if name == ".git" {
				continue
			}
			sub := name
			if rel != "" {
				sub = rel + "/" + name
			}
			var kind Kind
			if i, listed := h.index[sub]; listed {
				var st unix.Stat_t
				if err := unix.Fstatat(fd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
					return &pathError{op: "lstat", path: join(h.copy, sub), err: err}
				}
				e := &cs.listed[i]
				e.facts = factsOf(&st)
				e.kind = kindOfMode(e.facts.Mode)
				kind = e.kind
			} else {
				kind = kindOf(de.Type())
				if kind == Absent {
					h.ignored.Add(1) // a fifo, socket or device: never handed back
					continue
				}
				unchanged := false
				if h.snapshot {
					// A snapshot copy holds what no listing does (ignored files, nested
					// repositories): such an entry as the base holds it is no change.
					if unchanged, err = h.asBase(fd, name, sub, kind); err != nil {
						return err
					}
					if unchanged && kind != Dir {
						continue
					}
				}
				if m == nil {
					m = gitignore.NewMatcher(ps)
				}
				if m.Match(append(slices.Clip(elems), name), kind == Dir) {
					if !unchanged {
						h.ignored.Add(1)
					}
					continue
				}
				if !unchanged {
					cs.mu.Lock()
					cs.added[sub] = kind
					cs.mu.Unlock()
				}
			}
			if kind == Dir {
				subElems := append(slices.Clip(elems), name)
				if !g.TryGo(func() error { return walk(sub, subElems, ps) }) {
					if err := walk(sub, subElems, ps); err != nil {
						return err
					}
				}
			}
		}
		return nil
	}
	g.Go(func() error { return walk("", slices.Clone(h.m.Prefix), h.m.patterns()) })
	return g.Wait()
}

// asBase reports whether the copy's entry name (at sub, in the directory open as fd) is
// the base's unchanged: a directory there too, or a file or symlink with the same facts.
func (h *handback) asBase(fd int, name, sub string, kind Kind) (bool, error) {
	// No symlink of the base above sub is looked through: its directories are checked
	// from the top down.
	for i := 0; i < len(sub); i++ {
		if sub[i] != '/' {
			continue
		}
		if _, k, err := lstatFacts(join(h.base, sub[:i])); err != nil || k != Dir {
			return false, err
		}
	}
	bf, bk, err := lstatFacts(join(h.base, sub))
	if err != nil || bk != kind {
		return false, err
	}
	if kind == Dir {
		return true, nil
	}
	var st unix.Stat_t
	if err := unix.Fstatat(fd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return false, &pathError{op: "lstat", path: join(h.copy, sub), err: err}
	}
	return sameFacts(factsOf(&st), bf) && bf.Ctime < h.m.Stamp, nil
}

// equalEntries compares the contents of the entries of kind k at rel beneath rootA and
// rootB: a file's permission bits and bytes, a symlink's target. Each is reached beneath
// its root through no symlink, and a file is opened as what it is (openRegular): a tree
// is the sandbox's, and a name judged a file may be a symlink or a FIFO by the time it is
// opened. The bytes are compared by content.Equal: cancellable, and reading only where
// either file holds data.
func equalEntries(ctx context.Context, rootA, rootB, rel string, k Kind) (bool, error) {
	compared.Add(1)
	switch k {
	case Symlink:
		ta, err := readlinkBeneath(rootA, rel)
		if err != nil {
			return false, err
		}
		tb, err := readlinkBeneath(rootB, rel)
		return err == nil && ta == tb, err
	case File:
		fa, err := openRegularBeneath(rootA, rel)
		if err != nil {
			return false, err
		}
		defer fa.Close()
		fb, err := openRegularBeneath(rootB, rel)
		if err != nil {
			return false, err
		}
		defer fb.Close()
		sa, err := fa.Stat()
		if err != nil {
			return false, err
		}
		sb, err := fb.Stat()
		if err != nil {
			return false, err
		}
		if sa.Size() != sb.Size() || sa.Mode().Perm() != sb.Mode().Perm() {
			return false, nil
		}
		return content.Equal(ctx, fa, fb)
	}
	return true, nil
}

// openRegularBeneath opens the regular file at rel beneath root for reading, through no
// symlink.
func openRegularBeneath(root, rel string) (*os.File, error) {
	dir, err := openDirOf(root, rel, false)
	if err != nil {
		return nil, err
	}
	defer unix.Close(dir)
	name := join(root, rel)
	fd, _, err := openRegular(dir, path.Base(rel), name)
	if err != nil {
		return nil, err
	}
	return os.NewFile(uintptr(fd), name), nil
}

// readlinkBeneath reads the target of the symlink at rel beneath root, through no other.
func readlinkBeneath(root, rel string) (string, error) {
	dir, err := openDirOf(root, rel, false)
	if err != nil {
		return "", err
	}
	defer unix.Close(dir)
	target, err := readlinkat(dir, path.Base(rel), 0)
	if err != nil {
		return "", &pathError{op: "readlink", path: join(root, rel), err: err}
	}
	return target, nil
}

// tempPrefix starts the fixed sibling name each path is written to before its rename.
const tempPrefix = ".paddock-handback-"

func isTemp(name string) bool { return strings.HasPrefix(name, tempPrefix) }

// tempFor is the fixed sibling of name that a write to name goes through: the same for
// every run, so a rerun after a crash finds and removes what the crash left.
func tempFor(name string) string {
	return filepath.Join(filepath.Dir(name), tempName(filepath.Base(name)))
}

// tempName is the name of tempFor's sibling of the entry base, in the same directory.
func tempName(base string) string {
	sum := sha256.Sum256([]byte(base))
	return tempPrefix + hex.EncodeToString(sum[:8])
}

// clean removes what a cut run may have left beside the paths this run touches.
func (h *handback) clean(steps []Step) error {
	for _, s := range steps {
		if s.Action == Keep {
			continue
		}
		conflicts := filepath.Join(h.dir, ConflictsDir)
		names := [][2]string{{h.parent, s.Path}, {conflicts, s.Path}}
		if s.Marked != "" {
			names = append(names, [2]string{conflicts, s.Marked})
		}
		for _, name := range names {
			// Beneath the root, through no symlink: a directory on the way that is missing
			// holds nothing to clean, and one that is no longer a directory is refused by
			// the write that follows.
			dir, err := openDirOf(name[0], name[1], false)
			if err != nil {
				continue
			}
			t := tempName(path.Base(name[1]))
			display := tempFor(join(name[0], name[1]))
			k, err := kindAt(dir, t, display)
			if err == nil && k != Absent {
				err = removeAllAt(dir, t, display)
				if err == nil {
					step("clean " + s.Path)
				}
			}
			unix.Close(dir)
			if err != nil {
				return err
			}
		}
	}
	return nil
}

// do carries out one step.
func (h *handback) do(s Step) error {
	switch s.Action {
	case Take:
		return h.put(s.Path, h.parent, s.Path, s.Child)
	case Merged:
		i := h.index[s.Path]
		return putBytes(h.merges[s.Path], h.parent, s.Path, h.m.records[i].Parent.Mode&0o7777)
	case Conflict:
		if s.Child == Absent {
			return nil
		}
		conflicts := filepath.Join(h.dir, ConflictsDir)
		if s.Marked != "" {
			// The marked merge is the workspace owner's to read, like the saved versions.
			if err := putBytes(h.merges[s.Path], conflicts, s.Marked, 0o600); err != nil {
				return err
			}
		}
		return h.put(s.Path, conflicts, s.Path, s.Child)
	}
	return nil
}

// put makes the entry dstRel beneath the directory root (the parent, or the conflicts
// directory) hold what the copy holds at rel (kind k; Absent: nothing), by one rename or
// exchange from its fixed sibling, so it is at every moment either its old entry or its
// new one. Both sides are reached beneath their roots, through no symlink: the child's
// program may swap a directory of the copy, and the parent's program one of the parent, for
// a symlink to one outside at any moment. Every write is made relative to the directory
// that holds dstRel, opened once (see openDirOf).
func (h *handback) put(rel, root, dstRel string, k Kind) (err error) {
	src, dst := join(h.copy, rel), join(root, dstRel)
	dir, err := openDirOf(root, dstRel, k != Absent)
	if err != nil {
		if k == Absent && errors.Is(err, unix.ENOENT) {
			return nil // nothing left to remove
		}
		return err
	}
	defer unix.Close(dir)
	dname := path.Base(dstRel)
	old, err := kindAt(dir, dname, dst)
	if err != nil {
		return err
	}
	if k == Absent {
		switch old {
		case Dir:
			err = unix.Unlinkat(dir, dname, unix.AT_REMOVEDIR)
		case File, Symlink:
			err = unix.Unlinkat(dir, dname, 0)
		default:
			return nil
		}
		if err != nil && err != unix.ENOENT {
			return &pathError{op: "remove", path: dst, err: err}
		}
		step("remove " + dst)
		return nil
	}
	croot, err := unix.Open(h.copy, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return &pathError{op: "open", path: h.copy, err: err}
	}
	srcDir, _, err := openDir(croot, path.Dir(rel), nil)
	unix.Close(croot)
	if err != nil {
		return fmt.Errorf("hand back %s: %w", rel, err)
	}
	defer unix.Close(srcDir)
	name := path.Base(rel)
	var sst unix.Stat_t
	if err := unix.Fstatat(srcDir, name, &sst, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return &pathError{op: "lstat", path: src, err: err}
	}
	sf := factsOf(&sst)
	if k == Dir && old == Absent {
		if err := unix.Mkdirat(dir, dname, sf.Mode&0o777); err != nil && err != unix.EEXIST {
			return &pathError{op: "mkdir", path: dst, err: err}
		}
		step("mkdir " + dst)
		return nil
	}
	if k == Dir && old == Dir {
		return nil
	}
	tname, tmp := tempName(dname), tempFor(dst)
	switch k {
	case File:
		var own *handedFirst
		own, err = h.putFile(srcDir, name, src, root, dstRel, dir, tname, tmp)
		if own != nil {
			// Released once the file is at dstRel, or failed: the other names wait for it.
			defer func() {
				own.ok = own.ok && err == nil
				close(own.done)
			}()
		}
		if err != nil {
			return err
		}
	case Symlink:
		target, err := readlinkat(srcDir, name, sf.Size)
		if err != nil {
			return &pathError{op: "readlink", path: src, err: err}
		}
		if err := unix.Symlinkat(target, dir, tname); err != nil {
			return &pathError{op: "symlink", path: tmp, err: err}
		}
		ts := []unix.Timespec{unix.NsecToTimespec(sf.Mtime), unix.NsecToTimespec(sf.Mtime)}
		if err := unix.UtimesNanoAt(dir, tname, ts, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return &pathError{op: "utimes", path: tmp, err: err}
		}
	case Dir:
		if err := unix.Mkdirat(dir, tname, sf.Mode&0o777); err != nil {
			return &pathError{op: "mkdir", path: tmp, err: err}
		}
	}
	step("write " + tmp)
	if old == Dir || k == Dir && old != Absent {
		// A directory takes a file's place, or a file an empty directory's: swap them in
		// one step, then remove the old entry, now at the sibling's name.
		if err := exchangeAt(dir, tname, dname, dst); err != nil {
			return err
		}
		step("exchange " + dst)
		if err := removeAllAt(dir, tname, tmp); err != nil {
			return err
		}
		step("remove " + tmp)
		return nil
	}
	if err := unix.Renameat(dir, tname, dir, dname); err != nil {
		return &pathError{op: "rename", path: dst, err: err}
	}
	step("rename " + dst)
	return nil
}

// putFile writes the fixed sibling tname (display: tmp) in the directory dir of dstRel
// beneath root with the copy's file name in srcDir (display: src).
//
// The child's file may have other names that the hand-back writes beneath the same root.
// Copied by bytes once per name, a file with many names would cost its size once each: a
// child that links a large file tens of thousands of times would fill the host's disk. So
// the first of an inode's names to be written is claimed (own, returned, which the caller
// releases once the file is at dstRel), and each later one, when the first was copied by
// bytes and the child's file is as it was before that copy began, is made a hard link to
// the file the first put at its name (as cp -a makes them), checked to be that very file
// after the link. A rerun after a cut reaches the same contents: the names already renamed
// hold the child's content, and the rest are written again.
func (h *handback) putFile(srcDir int, name, src, root, dstRel string, dir int, tname, tmp string) (own *handedFirst, err error) {
	fd, st, err := openRegular(srcDir, name, src)
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd)
	sf := factsOf(st)
	if st.Nlink > 1 {
		var first *handedFirst
		first, own = h.claim(handedInode{root: root, dev: uint64(st.Dev), ino: st.Ino}, dstRel, sf)
		if first != nil {
			<-first.done
			if first.ok && first.src == sf {
				if h.linkFirst(first, root, dir, tname) == nil {
					return nil, nil
				}
				// The first's file changed at its name since: a program writing the parent
				// can do that again for every name, so copies instead of links are allowed
				// only up to the bytes the first copies wrote, then refused (the child's
				// version stays in the workspace, for a new hand-back).
				if h.recopied.Add(sf.Size) > h.firstCopied.Load() {
					return nil, &Error{Reason: CodeRelinks, Msg: fmt.Sprintf(
						"hand-back stopped at %s: the parent's copies of a file the child gave several names changed while the hand-back linked them, and copying each again would write more than the first copies did", dstRel)}
				}
			}
		}
	}
	c := &cloner{}
	cloned, _, err := c.cloneFile(fd, dir, tname, src, tmp, sf, st.Atim.Nano(), false, false)
	if err != nil || own == nil || cloned {
		return own, err
	}
	h.firstCopied.Add(sf.Size)
	var wst unix.Stat_t
	if err := unix.Fstatat(dir, tname, &wst, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return own, &pathError{op: "lstat", path: tmp, err: err}
	}
	own.dev, own.written, own.ok = uint64(wst.Dev), factsOf(&wst), true
	return own, nil
}

// handedInode is a child's file by device and inode number, written beneath root.
type handedInode struct {
	root     string
	dev, ino uint64
}

// handedFirst is the first name of a handedInode that a hand-back writes. done is closed
// once it is at its name (or failed); the other fields are set before.
type handedFirst struct {
	done    chan struct{}
	rel     string // where, beneath the root
	src     facts  // the child's file as read before the copy began
	dev     uint64 // the written file's device
	written facts  // the written file's, before its rename
	ok      bool   // copied by bytes and at rel: a later name may be linked to it
}

// claim returns the first name of the child's inode id, or registers rel as it when none
// was (own).
func (h *handback) claim(id handedInode, rel string, src facts) (first, own *handedFirst) {
	h.inodesMu.Lock()
	defer h.inodesMu.Unlock()
	if f := h.inodes[id]; f != nil {
		return f, nil
	}
	if h.inodes == nil {
		h.inodes = map[handedInode]*handedFirst{}
	}
	own = &handedFirst{done: make(chan struct{}), rel: rel, src: src}
	h.inodes[id] = own
	return nil, own
}

// linkFirst makes tname in the directory dir a hard link to the file first wrote beneath
// root. The name is reached beneath root through no symlink, and what the link gives is
// checked to be the file first wrote, unchanged (a program writing the parent may have
// replaced or rewritten it since); if not, the link is removed and an error returned, for
// the caller to copy instead.
func (h *handback) linkFirst(first *handedFirst, root string, dir int, tname string) error {
	fdir, err := openDirOf(root, first.rel, false)
	if err != nil {
		return err
	}
	defer unix.Close(fdir)
	if err := unix.Linkat(fdir, path.Base(first.rel), dir, tname, 0); err != nil {
		return err
	}
	var st unix.Stat_t
	if err := unix.Fstatat(dir, tname, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		unix.Unlinkat(dir, tname, 0)
		return err
	}
	f := factsOf(&st)
	if uint64(st.Dev) != first.dev || f.Ino != first.written.Ino || f.Mode != first.written.Mode ||
		f.Size != first.written.Size || f.Mtime != first.written.Mtime {
		unix.Unlinkat(dir, tname, 0)
		return errChanged
	}
	return nil
}

func (h *handback) report(facts []PathFacts, steps []Step) *Report {
	base := make(map[string]Kind, len(facts))
	for _, f := range facts {
		base[f.Path] = f.Base
	}
	rep := &Report{Parent: h.parent, Dir: h.dir, Taken: []Change{}, Conflicts: []ConflictedPath{}}
	var merged []Change
	for _, s := range steps {
		switch s.Action {
		case Take, Same:
			c := Change{Path: s.Path, Change: "modified", Kind: s.Child.String()}
			switch {
			case base[s.Path] == Absent:
				c.Change = "added"
			case s.Child == Absent:
				c.Change = "removed"
			}
			rep.Taken = append(rep.Taken, c)
		case Merged:
			merged = append(merged, Change{Path: s.Path, Change: "modified", Kind: File.String()})
		case Conflict:
			c := ConflictedPath{Path: s.Path, Reason: s.Reason, Parent: s.Parent.String(), Child: s.Child.String()}
			if s.Child != Absent {
				c.Saved = ConflictsDir + "/" + s.Path
			}
			if s.Marked != "" {
				c.Marked = ConflictsDir + "/" + s.Marked
			}
			rep.Conflicts = append(rep.Conflicts, c)
		}
	}
	slices.SortFunc(rep.Taken, func(a, b Change) int { return comparePaths(a.Path, b.Path) })
	slices.SortFunc(rep.Conflicts, func(a, b ConflictedPath) int { return comparePaths(a.Path, b.Path) })
	slices.SortFunc(merged, func(a, b Change) int { return comparePaths(a.Path, b.Path) })
	rep.Merged = merged
	rep.Counts = Counts{
		Listed: len(h.m.records), Taken: len(rep.Taken), Merged: len(merged), Conflicts: len(rep.Conflicts),
		Changed: len(rep.Taken) + len(merged) + len(rep.Conflicts), Ignored: int(h.ignored.Load()),
	}
	return rep
}

func writeReport(dir string, rep *Report) error {
	data, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	data = append(data, '\n')
	name := filepath.Join(dir, ReportName)
	tmp := tempFor(name)
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return err
	}
	f, err := os.Open(tmp)
	if err == nil {
		f.Sync()
		f.Close()
	}
	return os.Rename(tmp, name)
}

func readReport(dir string) (*Report, error) {
	data, err := os.ReadFile(filepath.Join(dir, ReportName))
	if err != nil {
		return nil, err
	}
	var rep Report
	if err := json.Unmarshal(data, &rep); err != nil {
		return nil, &Error{Reason: CodeBadManifest, Msg: fmt.Sprintf("the hand-back report of %s cannot be read", dir), Err: err}
	}
	return &rep, nil
}
