package workspace

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"
	"golang.org/x/sys/unix"
)

// Options adjusts Clone.
type Options struct {
	List ListOptions
	// Workers is how many files are cloned at once; zero means four per CPU.
	Workers int
	// NoSnapshot makes file clones even where the workspace could be snapshotted.
	NoSnapshot bool
}

// CloneReport says what Clone made.
type CloneReport struct {
	Parent   string        `json:"parent"`
	Dir      string        `json:"dir"`
	Files    int           `json:"files"`
	Symlinks int           `json:"symlinks"`
	Dirs     int           `json:"dirs"`
	Bytes    int64         `json:"bytes"`        // bytes of the listed files (each tree holds them once)
	Cloned   int           `json:"cloned"`       // files whose two copies share extents with the parent's
	Copied   int           `json:"copied"`       // files copied byte by byte
	CopiedB  int64         `json:"copied_bytes"` // bytes of the files copied byte by byte, per tree
	Elapsed  time.Duration `json:"elapsed_ns"`
	Warnings []string      `json:"warnings,omitempty"`
	// Snapshot is set when base and copy are btrfs snapshots of the workspace's subvolume:
	// made at once whatever it holds, the files counted at the hand-back (the counts
	// above are zero).
	Snapshot bool `json:"snapshot,omitempty"`
}

// A file changed twice within one tick of the clock that stamps file times keeps its stat
// facts. So a parent's entry whose ctime is not older than the clock when it was read is
// marked racy, and compared by content at the hand-back; and Clone returns only once that
// clock has passed the ctime of every file of the copy, so that nothing the child does can
// leave a copy file's facts as recorded (see tickClock).

var errNoReflink = errors.New("the filesystem cannot clone extents")

// umask is the process's file mode creation mask, read once at start (setting and restoring
// it is the only way to read it) so that a clone chmods only files the mask would change.
var umask = func() uint32 {
	m := unix.Umask(0)
	unix.Umask(m)
	return uint32(m)
}()

// Clone makes an isolated workspace of parent in dir: dir/base and dir/copy, two copies of
// the files List gives, and dir/manifest, the facts the hand-back needs. Each file is cloned
// by extents where the filesystem can, else copied by bytes with a warning in the report.
// Modes, symlinks and modification times are kept. dir must not exist or be empty; on
// failure nothing is left of it.
//
// Where parent is the root of a btrfs subvolume (and dir on the same filesystem, outside
// it), base and copy are instead two snapshots of the subvolume, made at once whatever it
// holds: a read-only one and a writable one. The copy then holds everything the parent
// does, .git and ignored files too; the listing is taken from the base at the hand-back,
// which reads what changed from the snapshots' stat facts (a snapshot keeps each file's
// inode number and times).
func Clone(ctx context.Context, parent, dir string, opts Options) (rep *CloneReport, err error) {
	start := time.Now()
	if parent, err = filepath.Abs(parent); err != nil {
		return nil, err
	}
	if dir, err = filepath.Abs(dir); err != nil {
		return nil, err
	}
	inside := false
	if rel, err := filepath.Rel(parent, dir); err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		if rel == "." {
			return nil, &Error{Reason: CodeInside, Msg: "the workspace directory cannot be the parent itself"}
		}
		opts.List.Exclude = append(opts.List.Exclude, filepath.ToSlash(rel))
		inside = true
	}
	made, err := makeDir(dir)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err == nil {
			return
		}
		for _, name := range []string{BaseDir, CopyDir, ManifestName + ".tmp"} {
			destroySubvolume(filepath.Join(dir, name))
		}
		if made {
			removeAll(dir)
		}
	}()
	if ok, _ := snapshotsHere(parent, dir); ok && !inside && !opts.NoSnapshot && opts.List.MaxFiles == 0 {
		switch rep, err := cloneSnapshot(ctx, parent, dir, start); {
		case err == nil:
			return rep, nil
		case !errors.Is(err, errNoSnapshot):
			return nil, err
		}
		for _, name := range []string{BaseDir, CopyDir} {
			if err := destroySubvolume(filepath.Join(dir, name)); err != nil {
				return nil, err
			}
		}
	}
	reps, err := cloneTrees(ctx, parent, filepath.Join(dir, BaseDir), []string{dir}, opts, start)
	if err != nil {
		return nil, err
	}
	return reps[0], nil
}

// CloneGroup makes isolated workspaces of parent in each of dirs at once, as Clone makes
// one, for children that start together from the same parent: with file clones, one
// listing of the parent and one base, shared, in group (a directory of its own, which must
// not exist or be empty), and in each dir its copy and manifest: one tree more than the
// children instead of two each. The shared base goes with the last of them to be
// discarded. Snapshot workspaces are made one by one, each at once. On failure nothing is
// left of group or of any dir.
func CloneGroup(ctx context.Context, parent, group string, dirs []string, opts Options) (reps []*CloneReport, err error) {
	start := time.Now()
	if parent, err = filepath.Abs(parent); err != nil {
		return nil, err
	}
	if group, err = filepath.Abs(group); err != nil {
		return nil, err
	}
	abs := make([]string, len(dirs))
	for i, d := range dirs {
		if abs[i], err = filepath.Abs(d); err != nil {
			return nil, err
		}
		if rel, err := filepath.Rel(parent, abs[i]); err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
			return nil, &Error{Reason: CodeInside, Msg: "a group's workspace directories must lie outside the parent"}
		}
	}
	var madeDirs []string
	defer func() {
		if err == nil {
			return
		}
		for _, d := range madeDirs {
			for _, name := range []string{BaseDir, CopyDir} {
				destroySubvolume(filepath.Join(d, name))
			}
			removeAll(d)
		}
	}()
	snap, _ := snapshotsHere(parent, group)
	snap = snap && !opts.NoSnapshot && opts.List.MaxFiles == 0
	for _, d := range append([]string{group}, abs...) {
		if _, err := makeDir(d); err != nil {
			return nil, err
		}
		madeDirs = append(madeDirs, d)
	}
	if err := os.Mkdir(filepath.Join(group, groupMembers), 0o700); err != nil {
		return nil, err
	}
	for _, d := range abs {
		if err := os.WriteFile(filepath.Join(group, groupMembers, memberName(d)), []byte(d+"\n"), 0o600); err != nil {
			return nil, err
		}
	}
	if snap {
		switch reps, err := snapshotGroup(ctx, parent, filepath.Join(group, BaseDir), abs, start); {
		case err == nil:
			return reps, nil
		case !errors.Is(err, errNoSnapshot):
			return nil, err
		}
		for _, sub := range append([]string{filepath.Join(group, BaseDir)}, abs...) {
			if filepath.Base(sub) != BaseDir {
				sub = filepath.Join(sub, CopyDir)
			}
			if err := destroySubvolume(sub); err != nil {
				return nil, err
			}
		}
	}
	return cloneTrees(ctx, parent, filepath.Join(group, BaseDir), abs, opts, start)
}

// snapshotGroup makes base a read-only snapshot of the subvolume parent and each dir's
// copy a writable snapshot of base: one base, listed once at the hand-backs.
// A single workspace (one dir, base dir/base) is a group of one whose base is its own.
func snapshotGroup(ctx context.Context, parent, base string, dirs []string, start time.Time) ([]*CloneReport, error) {
	t0, wait, err := snapshotBase(ctx, parent, base)
	if err == nil {
		for _, d := range dirs {
			if err = snapshot(base, filepath.Join(d, CopyDir), false); err != nil {
				break
			}
		}
	}
	h, herr := wait()
	if err != nil {
		return nil, err
	}
	if herr != nil {
		return nil, herr
	}
	if len(dirs) > 1 || base != filepath.Join(dirs[0], BaseDir) {
		h.Base = base
	}
	return snapshotManifests(h, t0, parent, dirs, start)
}

// groupMembers is the directory of a group that holds a file per workspace still using
// its base.
const groupMembers = "members"

func memberName(dir string) string {
	sum := sha256.Sum256([]byte(dir))
	return hex.EncodeToString(sum[:8])
}

// cloneTrees lists parent and clones its files into base and into the copy of each of dirs,
// and writes each dir's manifest; base is dirs[0]'s own (dir/base) when there is one dir.
func cloneTrees(ctx context.Context, parent, base string, dirs []string, opts Options, start time.Time) ([]*CloneReport, error) {
	// The ignore rules are read (a git or two) while the parent is listed.
	var h header
	var herr error
	read := make(chan struct{})
	go func() {
		defer close(read)
		h, herr = ignoreFacts(ctx, parent)
	}()
	entries, err := List(ctx, parent, opts.List)
	<-read
	if err != nil {
		return nil, err
	}
	if herr != nil {
		return nil, herr
	}
	h.Version, h.Parent, h.Created = manifestVersion, parent, start.UTC()
	if len(dirs) > 1 || base != filepath.Join(dirs[0], BaseDir) {
		h.Base = base
	}
	m := &manifest{header: h, records: make([]record, len(entries))}
	c := &cloner{parent: parent, base: base, m: m, copyFacts: make([][]facts, len(dirs)), dirs: make(map[string]dirID)}
	defer func() {
		for _, fd := range c.fds {
			unix.Close(fd)
		}
	}()
	pfd, err := unix.Open(parent, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &pathError{op: "open", path: parent, err: err}
	}
	c.fds = append(c.fds, pfd)
	var rootSt unix.Stat_t
	if err := unix.Fstat(pfd, &rootSt); err != nil {
		return nil, &pathError{op: "fstat", path: parent, err: err}
	}
	c.dirs["."] = dirIDOf(&rootSt)
	for i, d := range dirs {
		c.copies = append(c.copies, filepath.Join(d, CopyDir))
		c.copyFacts[i] = make([]facts, len(entries))
	}
	roots := append([]string{c.base}, c.copies...)
	for _, root := range roots {
		if err := os.Mkdir(root, 0o700); err != nil {
			return nil, err
		}
		fd, err := unix.Open(root, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			return nil, &pathError{op: "open", path: root, err: err}
		}
		c.fds = append(c.fds, fd)
	}
	// Directories first, writable by us until the files are in; each parent directory's
	// identity is recorded, to be checked wherever it is opened again.
	for i, e := range entries {
		m.records[i] = record{Path: e.Path, Kind: e.Kind}
		if e.Kind != Dir {
			continue
		}
		fd, st, err := openDir(c.fds[0], e.Path, nil)
		if errors.Is(err, errChanged) {
			return nil, fmt.Errorf("clone %s: %s changed while listing", parent, e.Path)
		} else if err != nil {
			return nil, err
		}
		unix.Close(fd)
		c.dirs[e.Path] = dirIDOf(st)
		m.records[i].Parent.Mode = uint32(st.Mode)
		for _, root := range roots {
			if err := os.Mkdir(filepath.Join(root, filepath.FromSlash(e.Path)), 0o700); err != nil {
				return nil, err
			}
		}
	}
	workers := opts.Workers
	if workers <= 0 {
		workers = 4 * runtime.GOMAXPROCS(0)
	}
	// Work is handed out a directory at a time: creates in one directory serialize on its
	// lock, so workers that share directories wait for each other.
	var chunks []int // start index of each run of entries in one directory
	for i, e := range entries {
		if e.Kind != Dir && (len(chunks) == 0 || path.Dir(entries[chunks[len(chunks)-1]].Path) != path.Dir(e.Path)) {
			chunks = append(chunks, i)
		}
	}
	var next atomic.Int64
	g, gctx := errgroup.WithContext(ctx)
	for range workers {
		g.Go(func() error {
			for {
				ci := int(next.Add(1) - 1)
				if ci >= len(chunks) {
					return nil
				}
				if err := gctx.Err(); err != nil {
					return err
				}
				if err := c.chunk(entries, chunks, ci); err != nil {
					return err
				}
			}
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	if err := c.refreshLinked(); err != nil {
		return nil, err
	}
	// Directory modes and times, deepest first, then the roots.
	if err := unix.Fstat(pfd, &rootSt); err != nil {
		return nil, &pathError{op: "fstat", path: parent, err: err}
	}
	for i := len(m.records) - 1; i >= -1; i-- {
		rel, fa := "", factsOf(&rootSt)
		if i >= 0 {
			if m.records[i].Kind != Dir {
				continue
			}
			rel = m.records[i].Path
			id := c.dirs[rel]
			fd, st, err := openDir(c.fds[0], rel, &id)
			if errors.Is(err, errChanged) {
				return nil, fmt.Errorf("clone %s: %s changed while cloning", parent, rel)
			} else if err != nil {
				return nil, err
			}
			unix.Close(fd)
			fa = factsOf(st)
		}
		for j, root := range roots {
			name := filepath.Join(root, filepath.FromSlash(rel))
			if perm := fa.Mode & 0o7777; perm != 0o700 {
				if err := unix.Chmod(name, perm); err != nil {
					return nil, &pathError{op: "chmod", path: name, err: err}
				}
			}
			if j == 0 {
				continue // the base keeps no times (see cloner.file)
			}
			if err := setTimes(name, fa.Mtime, false); err != nil {
				return nil, err
			}
		}
	}
	for _, r := range m.records {
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
	var last int64
	for _, cf := range c.copyFacts {
		for _, f := range cf {
			last = max(last, f.Ctime)
		}
	}
	if m.Stamp, err = waitPast(ctx, last); err != nil {
		return nil, err
	}
	reps := make([]*CloneReport, len(dirs))
	for j, d := range dirs {
		mj := &manifest{header: m.header, records: slices.Clone(m.records)}
		if mj.Base != "" {
			mj.Member = memberName(d)
		}
		for i := range mj.records {
			mj.records[i].Copy = c.copyFacts[j][i]
		}
		if err := writeManifest(filepath.Join(d, ManifestName), mj); err != nil {
			return nil, err
		}
		rep := &CloneReport{
			Parent: parent, Dir: d,
			Files: m.Files, Symlinks: m.Links, Dirs: m.Dirs, Bytes: m.Bytes,
			Cloned: int(c.cloned.Load()), Copied: int(c.copied.Load()), CopiedB: c.copiedBytes.Load(),
		}
		if rep.Copied > 0 {
			rep.Warnings = append(rep.Warnings, fmt.Sprintf(
				"no reflinks: %d of %d files (%d bytes) were copied byte by byte, %d times, because the filesystem of %s cannot clone extents from %s (XFS, btrfs and APFS can)",
				rep.Copied, rep.Files, rep.CopiedB, len(roots), d, parent))
		}
		rep.Elapsed = time.Since(start)
		reps[j] = rep
	}
	return reps, nil
}

// errNoSnapshot is a snapshot refused in a way that file clones may still do.
var errNoSnapshot = errors.New("no snapshot")

// cloneSnapshot makes dir/base a read-only snapshot of the subvolume parent and dir/copy a
// writable one of base, and a manifest with no records: the hand-back lists the base.
func cloneSnapshot(ctx context.Context, parent, dir string, start time.Time) (*CloneReport, error) {
	reps, err := snapshotGroup(ctx, parent, filepath.Join(dir, BaseDir), []string{dir}, start)
	if err != nil {
		return nil, err
	}
	return reps[0], nil
}

// snapshotBase makes base a read-only snapshot of the subvolume parent; it returns the
// clock just before the snapshot and the wait for the manifest's header, which must be
// called whatever happens. The header's facts come without a git where snapshotFacts can
// tell them from the base; else a git reads them while the copies' snapshots are made
// (parent then holds its own .git directory: it is the work tree's root, with no ignore
// file above it to record).
func snapshotBase(ctx context.Context, parent, base string) (t0 int64, wait func() (header, error), err error) {
	var h header
	var herr error
	done := make(chan struct{})
	wait = func() (header, error) {
		<-done
		if herr == nil && len(h.Prefix) > 0 {
			herr = errNoSnapshot // git's index lies above the subvolume, outside the snapshot
		}
		return h, herr
	}
	// Every change to the parent after the snapshot has a ctime of at least t0: an entry of
	// the base as new is racy (see record.Racy).
	t0 = tickClock()
	if err := snapshot(parent, base, true); err != nil {
		close(done)
		var pe *pathError
		if errors.As(err, &pe) && (pe.err == unix.EXDEV || pe.err == unix.EPERM || pe.err == unix.EACCES || pe.err == unix.ENOTTY || pe.err == unix.EOPNOTSUPP) {
			return 0, wait, errNoSnapshot
		}
		return 0, wait, err
	}
	// The facts are read from the base, read-only, that the hand-back reads: not from the
	// parent, which its program may change between the reading and the snapshot.
	var ok bool
	if h, ok = snapshotFacts(base); ok {
		close(done)
	} else {
		go func() {
			defer close(done)
			h, herr = ignoreFacts(ctx, parent)
		}()
	}
	return t0, wait, nil
}

// snapshotManifests writes the manifest of each snapshot workspace in dirs. Its stamp is
// t0, the clock just before the snapshots, with no wait for the clock to pass the ctimes
// they hold: every change the child makes has a ctime of at least t0, and every entry of
// the copy whose ctime is not older than t0 is racy in the base, compared by content
// whatever its facts; an older one that the child changed has a newer ctime.
func snapshotManifests(h header, t0 int64, parent string, dirs []string, start time.Time) ([]*CloneReport, error) {
	h.Version, h.Parent, h.Created, h.Stamp, h.Snapshot = manifestVersion, parent, start.UTC(), t0, t0
	reps := make([]*CloneReport, len(dirs))
	for i, d := range dirs {
		if h.Base != "" {
			h.Member = memberName(d)
		}
		if err := writeManifest(filepath.Join(d, ManifestName), &manifest{header: h}); err != nil {
			return nil, err
		}
		reps[i] = &CloneReport{Parent: parent, Dir: d, Snapshot: true, Elapsed: time.Since(start)}
	}
	return reps, nil
}

type cloner struct {
	parent, base   string
	copies         []string
	m              *manifest
	copyFacts      [][]facts        // by copy, by record: the copy's facts as made
	fds            []int            // the roots open: parent's, base's, then each copy's
	dirs           map[string]dirID // the parent's directories as listed, "." its root
	noReflink      atomic.Bool      // set once the filesystem refused a clone
	cloned, copied atomic.Int64
	copiedBytes    atomic.Int64
	inodesMu       sync.Mutex
	inodes         map[inodeID]*firstName // guarded by inodesMu
}

// inodeID names a file of the parent by its device and inode number.
type inodeID struct{ dev, ino uint64 }

// firstName is the first of a parent inode's names that a clone reached: the others are
// made hard links to its copies when it was copied by bytes. done is closed once its
// copies are made (or failed); rel, fa and ok are set before.
type firstName struct {
	done chan struct{}
	rel  string
	fa   facts // the parent's facts as read before the copy began
	ok   bool  // copied by bytes into every tree, which linking then saves writing again

	names []int // the records of the names made: this one, then those linked to it; guarded by inodesMu
}

// refreshLinked records again the copies' facts of every name of an inode that links
// made: each link changed the inode's ctime after the names before it were recorded, and a
// name whose facts are not those recorded is read whole at the hand-back.
func (c *cloner) refreshLinked() error {
	for _, f := range c.inodes {
		if len(f.names) < 2 {
			continue
		}
		for _, ri := range f.names {
			for j, cp := range c.copies {
				name := filepath.Join(cp, filepath.FromSlash(c.m.records[ri].Path))
				fa, _, err := lstatFacts(name)
				if err != nil {
					return err
				}
				c.copyFacts[j][ri] = fa
			}
		}
	}
	return nil
}

// claim returns the first name of the parent's inode id, or registers rel as it (with a
// nil result) when none was.
func (c *cloner) claim(id inodeID, rel string, ri int) (first, own *firstName) {
	c.inodesMu.Lock()
	defer c.inodesMu.Unlock()
	if f := c.inodes[id]; f != nil {
		return f, nil
	}
	if c.inodes == nil {
		c.inodes = map[inodeID]*firstName{}
	}
	own = &firstName{done: make(chan struct{}), rel: rel, names: []int{ri}}
	c.inodes[id] = own
	return nil, own
}

func (c *cloner) src(rel string) string { return filepath.Join(c.parent, filepath.FromSlash(rel)) }

// chunk clones the files and symlinks of chunk ci, a run of entries in one directory (and
// its subdirectories' entries, left to their own chunks). The directory is opened once in
// the parent (beneath its root, and only if it is still the directory listed) and in each
// tree, each entry then opened beneath it. Its clock is read once,
// before any entry is: an entry whose ctime is not older is racy (a later reading, as each
// entry's own would be, marks no more).
func (c *cloner) chunk(entries []Entry, chunks []int, ci int) error {
	dir := path.Dir(entries[chunks[ci]].Path)
	roots := append([]string{c.base}, c.copies...)
	fds := make([]int, 0, 1+len(roots))
	defer func() {
		for _, fd := range fds {
			unix.Close(fd)
		}
	}()
	id, ok := c.dirs[dir]
	if !ok {
		return fmt.Errorf("clone %s: %s was not listed as a directory", c.parent, dir)
	}
	for i := range c.fds {
		want := &id
		if i > 0 {
			want = nil // the trees are the clone's own
		}
		fd, _, err := openDir(c.fds[i], dir, want)
		if err != nil {
			return fmt.Errorf("clone %s: %w", c.parent, err)
		}
		fds = append(fds, fd)
	}
	now := tickClock()
	for i := chunks[ci]; i < len(entries) && (ci+1 >= len(chunks) || i < chunks[ci+1]); i++ {
		r := &c.m.records[i]
		if r.Kind == Dir || path.Dir(r.Path) != dir {
			continue
		}
		var err error
		switch r.Kind {
		case File:
			err = c.file(i, fds, roots, now)
		case Symlink:
			err = c.symlink(i, fds, roots, now)
		}
		if err != nil {
			return fmt.Errorf("clone %s: %w", r.Path, err)
		}
	}
	return nil
}

// file clones one regular file into every tree and records its facts: the parent's from
// the descriptor it read (so a change while cloning reads as a change), the copy's as made.
// fds are the file's directory open in the parent and in each of roots. The base keeps
// the file's content and mode but not its times: the hand-back reads only those of the
// base.
func (c *cloner) file(ri int, fds []int, roots []string, now int64) (err error) {
	r := &c.m.records[ri]
	name := path.Base(r.Path)
	src := c.src(r.Path)
	fd, st, err := openRegular(fds[0], name, src)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	r.Parent = factsOf(st)
	r.Racy = r.Parent.Ctime >= now
	atime := st.Atim.Nano()
	reflinked := true
	// A second name of an inode already copied by bytes is linked to that copy in each
	// tree (as cp -a does): copied again, a file with many names would cost its size once
	// per name, and a sandbox that makes thousands of links to a large file would fill the
	// disk. Only while the inode is as it was when the first copy began: its facts then
	// say the copy's content is the one this name reads now. Clones that share extents
	// cost nothing and are made per name, as before.
	if st.Nlink > 1 {
		first, own := c.claim(inodeID{dev: uint64(st.Dev), ino: st.Ino}, r.Path, ri)
		if own != nil {
			own.fa = r.Parent
			defer func() {
				own.ok = err == nil && !reflinked
				close(own.done)
			}()
		} else {
			<-first.done
			if first.ok && first.fa == r.Parent {
				if err := c.link(ri, first.rel, fds, roots); err != nil {
					return err
				}
				c.inodesMu.Lock()
				first.names = append(first.names, ri)
				c.inodesMu.Unlock()
				return nil
			}
		}
	}
	for i, root := range roots {
		dst := filepath.Join(root, filepath.FromSlash(r.Path))
		cloned, f, err := c.cloneFile(fd, fds[1+i], name, src, dst, r.Parent, atime, i == 0, i > 0)
		if err != nil {
			return err
		}
		reflinked = reflinked && cloned
		if i > 0 {
			c.copyFacts[i-1][ri] = f
		}
	}
	if reflinked {
		c.cloned.Add(1)
	} else {
		c.copied.Add(1)
		c.copiedBytes.Add(r.Parent.Size)
	}
	return nil
}

// link makes record ri's file in every tree of roots a hard link to the same tree's file
// at firstRel, and records the copies' facts; fds are as for file.
func (c *cloner) link(ri int, firstRel string, fds []int, roots []string) error {
	r := &c.m.records[ri]
	name := path.Base(r.Path)
	for i, root := range roots {
		dst := filepath.Join(root, filepath.FromSlash(r.Path))
		if err := unix.Linkat(c.fds[1+i], firstRel, fds[1+i], name, 0); err != nil {
			return &pathError{op: "link", path: dst, err: err}
		}
		if i == 0 {
			continue
		}
		var st unix.Stat_t
		if err := unix.Fstatat(fds[1+i], name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return &pathError{op: "lstat", path: dst, err: err}
		}
		c.copyFacts[i-1][ri] = factsOf(&st)
	}
	return nil
}

// openRegular opens the regular file name in the directory dirfd for reading, with its
// stat facts; src names it in errors. It opens without blocking, so that a FIFO or a device
// swapped in for a listed file is not waited on (an open of a FIFO for reading waits for a
// writer, and no context can interrupt it), then refuses anything but a regular file.
func openRegular(dirfd int, name, src string) (int, *unix.Stat_t, error) {
	fd, err := unix.Openat(dirfd, name, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_NOCTTY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, nil, &pathError{op: "open", path: src, err: err}
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return -1, nil, &pathError{op: "fstat", path: src, err: err}
	}
	if kindOfMode(uint32(st.Mode)) != File {
		unix.Close(fd)
		return -1, nil, fmt.Errorf("%s is no longer a regular file", src)
	}
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_SETFL, 0); err != nil {
		unix.Close(fd)
		return -1, nil, &pathError{op: "fcntl", path: src, err: err}
	}
	return fd, &st, nil
}

// cloneFile makes dst, name in the directory open as dirfd, with the content and permission
// bits of the open file fd, sharing its extents when the filesystem can, and its times
// unless base (the base keeps none). It reports whether it shared them, and (when
// wantFacts) dst's facts.
func (c *cloner) cloneFile(fd, dirfd int, name, src, dst string, fa facts, atime int64, base, wantFacts bool) (bool, facts, error) {
	perm := fa.Mode & 0o7777
	times := []unix.Timespec{unix.NsecToTimespec(atime), unix.NsecToTimespec(fa.Mtime)}
	if reflinkCreates && !c.noReflink.Load() {
		switch err := reflink(-1, fd, src, dst); {
		case err == nil:
			if err := chmod(dst, perm); err != nil {
				return false, facts{}, err
			}
			if !base {
				if err := unix.UtimesNano(dst, times); err != nil {
					return false, facts{}, &pathError{op: "utimes", path: dst, err: err}
				}
			}
			if !wantFacts {
				return true, facts{}, nil
			}
			f, _, err := lstatFacts(dst)
			return true, f, err
		case errors.Is(err, errNoReflink):
			c.noReflink.Store(true)
		default:
			return false, facts{}, &pathError{op: "clone", path: dst, err: err}
		}
	}
	out, err := unix.Openat(dirfd, name, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, perm)
	if err != nil {
		return false, facts{}, &pathError{op: "create", path: dst, err: err}
	}
	defer unix.Close(out)
	cloned := false
	if !reflinkCreates && !c.noReflink.Load() {
		switch err := reflink(out, fd, src, dst); {
		case err == nil:
			cloned = true
		case errors.Is(err, errNoReflink):
			c.noReflink.Store(true)
		default:
			return false, facts{}, &pathError{op: "clone", path: dst, err: err}
		}
	}
	if !cloned && fa.Size > 0 {
		if err := copyBytes(out, fd, fa.Size); err != nil {
			return false, facts{}, &pathError{op: "copy", path: dst, err: err}
		}
	}
	if perm&umask != 0 || perm&^0o777 != 0 {
		if err := unix.Fchmod(out, perm); err != nil {
			return false, facts{}, &pathError{op: "chmod", path: dst, err: err}
		}
	}
	if !base {
		if err := futimens(out, dst, times); err != nil {
			return false, facts{}, &pathError{op: "utimes", path: dst, err: err}
		}
	}
	if !wantFacts {
		return cloned, facts{}, nil
	}
	var st unix.Stat_t
	if err := unix.Fstat(out, &st); err != nil {
		return false, facts{}, &pathError{op: "fstat", path: dst, err: err}
	}
	return cloned, factsOf(&st), nil
}

// symlink makes the symlink of record ri in every tree of roots, with its times in the
// copies; fds and now are as for file.
func (c *cloner) symlink(ri int, fds []int, roots []string, now int64) error {
	r := &c.m.records[ri]
	name := path.Base(r.Path)
	src := c.src(r.Path)
	var st unix.Stat_t
	if err := unix.Fstatat(fds[0], name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return &pathError{op: "lstat", path: src, err: err}
	}
	f := factsOf(&st)
	if kindOfMode(f.Mode) != Symlink {
		return fmt.Errorf("%s is no longer a symlink", src)
	}
	r.Parent = f
	r.Racy = f.Ctime >= now
	target, err := readlinkat(fds[0], name, f.Size)
	if err != nil {
		return &pathError{op: "readlink", path: src, err: err}
	}
	ts := []unix.Timespec{unix.NsecToTimespec(f.Mtime), unix.NsecToTimespec(f.Mtime)}
	for i, root := range roots {
		dst := filepath.Join(root, filepath.FromSlash(r.Path))
		if err := unix.Symlinkat(target, fds[1+i], name); err != nil {
			return &pathError{op: "symlink", path: dst, err: err}
		}
		if i == 0 {
			continue // the base keeps no times (see file)
		}
		if err := unix.UtimesNanoAt(fds[1+i], name, ts, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return &pathError{op: "utimes", path: dst, err: err}
		}
		if err := unix.Fstatat(fds[1+i], name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return &pathError{op: "lstat", path: dst, err: err}
		}
		c.copyFacts[i-1][ri] = factsOf(&st)
	}
	return nil
}

// readlinkat reads the target of the symlink name in the directory dirfd; size is its
// length as stat said, a first guess at the buffer it needs.
func readlinkat(dirfd int, name string, size int64) (string, error) {
	buf := make([]byte, max(size+1, 128))
	for {
		n, err := unix.Readlinkat(dirfd, name, buf)
		if err != nil {
			return "", err
		}
		if n < len(buf) {
			return string(buf[:n]), nil
		}
		if len(buf) >= unix.PathMax {
			return "", unix.ENAMETOOLONG
		}
		buf = make([]byte, 2*len(buf))
	}
}

func chmod(name string, perm uint32) error {
	if err := unix.Chmod(name, perm); err != nil {
		return &pathError{op: "chmod", path: name, err: err}
	}
	return nil
}

// setTimes sets the access and modification times of name to mtime, not following a
// symlink when link is set.
func setTimes(name string, mtime int64, link bool) error {
	flags := 0
	if link {
		flags = unix.AT_SYMLINK_NOFOLLOW
	}
	ts := []unix.Timespec{unix.NsecToTimespec(mtime), unix.NsecToTimespec(mtime)}
	if err := unix.UtimesNanoAt(unix.AT_FDCWD, name, ts, flags); err != nil {
		return &pathError{op: "utimes", path: name, err: err}
	}
	return nil
}

// copyLoop copies src to dst by reads and writes, from offset off up to size.
func copyLoop(dst, src int, off, size int64) error {
	buf := make([]byte, 1<<20)
	for off < size {
		n, err := unix.Pread(src, buf[:min(int64(len(buf)), size-off)], off)
		if err != nil {
			return err
		}
		if n == 0 {
			return nil
		}
		for w := buf[:n]; len(w) > 0; {
			m, err := unix.Pwrite(dst, w, off)
			if err != nil {
				return err
			}
			w, off = w[m:], off+int64(m)
		}
	}
	return nil
}

// makeDir makes dir 0700, or accepts an existing empty directory; it reports whether it
// made it.
func makeDir(dir string) (bool, error) {
	err := os.Mkdir(dir, 0o700)
	if err == nil {
		return true, nil
	}
	if !os.IsExist(err) {
		return false, err
	}
	des, rerr := os.ReadDir(dir)
	if rerr != nil || len(des) > 0 {
		return false, &Error{Reason: CodeExists, Msg: fmt.Sprintf("%s already exists and is not an empty directory", dir)}
	}
	return false, nil
}

// removeAll removes a tree even where the child made directories unwritable.
func removeAll(name string) error {
	if err := os.RemoveAll(name); err == nil {
		return nil
	}
	filepath.WalkDir(name, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			os.Chmod(p, 0o700)
		}
		return nil
	})
	return os.RemoveAll(name)
}

// waitPast returns once tickClock is past t, with its reading: at most a tick or two.
func waitPast(ctx context.Context, t int64) (int64, error) {
	for {
		now := tickClock()
		if now > t {
			return now, nil
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(time.Duration(min(t-now+1, int64(time.Millisecond)))):
		}
	}
}
