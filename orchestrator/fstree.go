package orchestrator

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/bmatcuk/doublestar/v4"
	"github.com/go-git/go-git/v5/plumbing/format/gitignore"
	"golang.org/x/sys/unix"

	"github.com/paddockhq/paddock/policy"
)

// The tree requests: fs.stat, fs.list, fs.glob and fs.grep look at files and directories
// through the host as fs.read does. The path named is mapped and opened beneath its mount
// following no link, and the request is judged, as a read, on the path it was opened at, on
// the session's approval route (a directory that is or holds a secret asks).
//
// A walk (glob, grep) goes down from there one directory descriptor at a time and never
// through a link: a symlink is listed, not followed. It skips .git and what the .gitignore
// files met on the way ignore (unless told not to), and it stays within the mount's real
// directory, as find -xdev does. grep reads a file only when the policy lets it be read
// unasked: one it may not (a secret) is skipped and named in the reply, to be read with
// fs.read, which asks; a walk never asks once per file.

// Tree request types served by FSHandlers.
const (
	TypeFSStat = "fs.stat"
	TypeFSList = "fs.list"
	TypeFSGlob = "fs.glob"
	TypeFSGrep = "fs.grep"
)

// FSNotDir is the code of a tree request whose path is not a directory.
const FSNotDir = "not_dir"

// Bounds of the tree requests.
const (
	// DefaultTreeLimit is how many entries, matches or lines a reply holds by default.
	DefaultTreeLimit = 1000
	// MaxTreeLimit is the most a request may ask for.
	MaxTreeLimit = 100_000
	// MaxWalk is how many entries one walk looks at before it stops, its reply truncated.
	MaxWalk = 500_000
)

// FSPathRequest is the body of fs.stat and fs.list. Limit bounds a listing (0: the
// default).
type FSPathRequest struct {
	Path  string `json:"path"`
	Limit int    `json:"limit,omitempty"`
}

// FSEntry is one file, directory or link as a tree request reports it.
type FSEntry struct {
	Path     string    `json:"path"` // its sandbox path
	Kind     string    `json:"kind"` // file, dir, symlink or other
	Size     int64     `json:"size"`
	Mode     uint32    `json:"mode"` // its permission bits
	Modified time.Time `json:"modified"`
	Target   string    `json:"target,omitempty"` // a symlink's target, as written
}

// FSListReply is the reply to fs.list: the directory's entries, sorted by name.
type FSListReply struct {
	Path      string    `json:"path"`
	Entries   []FSEntry `json:"entries"`
	Truncated bool      `json:"truncated,omitempty"`
}

// FSGlobRequest is the body of fs.glob: the files under Path whose path relative to it
// matches Pattern (doublestar: **/*.go), at most Limit of them.
type FSGlobRequest struct {
	Path     string `json:"path"`
	Pattern  string `json:"pattern"`
	Limit    int    `json:"limit,omitempty"`
	NoIgnore bool   `json:"no_ignore,omitempty"` // look in what .gitignore ignores too
}

// FSGlobReply is the reply to fs.glob: the matches, the most recently modified first.
type FSGlobReply struct {
	Path      string    `json:"path"`
	Matches   []FSEntry `json:"matches"`
	Truncated bool      `json:"truncated,omitempty"`
}

// Modes of fs.grep, as ripgrep's: the lines, the files with a match (-l), the count of
// matching lines per file (-c).
const (
	GrepContent = "content"
	GrepFiles   = "files"
	GrepCount   = "count"
)

// FSGrepRequest is the body of fs.grep: the lines matching the regular expression Pattern
// (Go's RE2 syntax, as ripgrep's default engine) in the files under Path, or in Path itself
// when it is a file.
type FSGrepRequest struct {
	Path       string `json:"path"`
	Pattern    string `json:"pattern"`
	Glob       string `json:"glob,omitempty"` // only files whose name (or path, with a /) matches
	IgnoreCase bool   `json:"ignore_case,omitempty"`
	Mode       string `json:"mode,omitempty"` // content (default), files or count
	Before     int    `json:"before,omitempty"`
	After      int    `json:"after,omitempty"`
	Limit      int    `json:"limit,omitempty"`
	NoIgnore   bool   `json:"no_ignore,omitempty"`
}

// FSGrepLine is a line of fs.grep's content mode: a match, or a line of context around one.
type FSGrepLine struct {
	Path    string `json:"path"`
	Line    int    `json:"line"`
	Text    string `json:"text"`
	Context bool   `json:"context,omitempty"`
}

// FSGrepCount is a file's count of matching lines.
type FSGrepCount struct {
	Path  string `json:"path"`
	Count int    `json:"count"`
}

// FSGrepReply is the reply to fs.grep. Skipped names the files not read because the policy
// would not let them be read unasked; Binary counts the files skipped as binary (a NUL byte
// in their first 8 KiB, as ripgrep), Large those over the read limit.
type FSGrepReply struct {
	Path      string        `json:"path"`
	Lines     []FSGrepLine  `json:"lines,omitempty"`
	Files     []string      `json:"files,omitempty"`
	Counts    []FSGrepCount `json:"counts,omitempty"`
	Skipped   []string      `json:"skipped,omitempty"`
	Binary    int           `json:"binary,omitempty"`
	Large     int           `json:"large,omitempty"`
	Truncated bool          `json:"truncated,omitempty"`
}

// limitOf is a request's limit: the default for 0, refused past the most.
func limitOf(a *access, n int) (int, error) {
	switch {
	case n == 0:
		return DefaultTreeLimit, nil
	case n < 0 || n > MaxTreeLimit:
		return 0, a.refuse(FSBadRequest, fmt.Sprintf("limit %d is not within 1..%d", n, MaxTreeLimit))
	}
	return n, nil
}

// openTree opens the directory a tree request names (O_RDONLY, to be read) and judges the
// request on it. A file there is not_dir, unless file is set: then the file's directory is
// returned with the file's name, for a grep of one file.
func (c *FSConfig) openTree(ctx context.Context, a *access, file bool) (p *spot, fd int, name string, err error) {
	fd = -1
	p, err = c.open(a, func(p *spot) error {
		var err error
		fd, name, err = openTreeAt(p, file)
		return err
	})
	if p == nil {
		return nil, -1, "", err
	}
	probe := err
	if err := c.judge(ctx, a); err != nil {
		p.close()
		if fd >= 0 {
			unix.Close(fd)
		}
		return nil, -1, "", err
	}
	var fnd *found
	if errors.As(probe, &fnd) {
		p.close()
		return nil, -1, "", a.refuse(fnd.code, fnd.detail)
	}
	return p, fd, name, nil
}

// openTreeAt opens the directory at p beneath its mount, following no link; with file set, a
// regular file there gives its directory and its name.
func openTreeAt(p *spot, file bool) (int, string, error) {
	if p.name == "" {
		root, err := openRoot(p.loc.Root)
		if err != nil {
			return -1, "", err
		}
		defer unix.Close(root)
		fd, err := unix.Openat(root, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		return fd, "", err
	}
	if p.dir < 0 {
		return -1, "", &found{FSNotFound, "no such directory"}
	}
	fd, err := unix.Openat(p.dir, p.name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err == nil {
		return fd, "", nil
	}
	st, serr := lstatAt(p.dir, p.name)
	switch {
	case errors.Is(serr, unix.ENOENT):
		return -1, "", &found{FSNotFound, "no such directory"}
	case serr != nil:
		return -1, "", serr
	case st.Mode&unix.S_IFMT == unix.S_IFLNK:
		return -1, "", errLinked
	case file && st.Mode&unix.S_IFMT == unix.S_IFREG:
		fd, err := unix.Openat(p.dir, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		return fd, p.name, err
	case st.Mode&unix.S_IFMT != unix.S_IFDIR:
		return -1, "", &found{FSNotDir, "not a directory"}
	}
	return -1, "", err
}

// entryOf describes the entry name in dir from its lstat.
func entryOf(dir int, name, sandbox string, st *unix.Stat_t) FSEntry {
	e := FSEntry{Path: sandbox, Size: st.Size, Mode: st.Mode & 0o777, Modified: time.Unix(st.Mtim.Unix()).UTC()}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFREG:
		e.Kind = "file"
	case unix.S_IFDIR:
		e.Kind = "dir"
	case unix.S_IFLNK:
		e.Kind = "symlink"
		buf := make([]byte, unix.PathMax)
		if n, err := unix.Readlinkat(dir, name, buf); err == nil {
			e.Target = string(buf[:n])
		}
	default:
		e.Kind = "other"
	}
	return e
}

func (c *FSConfig) stat(ctx context.Context, req HostRequest) (_ any, err error) {
	a := &access{op: FSOp{Request: TypeFSStat}}
	defer func() { c.record(a, err) }()
	var body FSPathRequest
	if err := req.Decode(&body); err != nil {
		return nil, err
	}
	a.op.Sandbox = body.Path
	var st unix.Stat_t
	p, err := c.open(a, func(p *spot) error {
		switch {
		case p.name == "":
			return unix.Stat(p.loc.Root, &st)
		case p.dir < 0:
			return &found{FSNotFound, "no such file"}
		}
		var err error
		st, err = lstatAt(p.dir, p.name)
		if errors.Is(err, unix.ENOENT) {
			return &found{FSNotFound, "no such file"}
		}
		return err
	})
	if p == nil {
		return nil, err
	}
	defer p.close()
	if err := c.judge(ctx, a); err != nil {
		return nil, err
	}
	var fnd *found
	if errors.As(err, &fnd) {
		return nil, a.refuse(fnd.code, fnd.detail)
	}
	e := entryOf(p.dir, p.name, c.replyPath(p.host, body.Path), &st)
	return &e, nil
}

func (c *FSConfig) list(ctx context.Context, req HostRequest) (_ any, err error) {
	a := &access{op: FSOp{Request: TypeFSList}}
	defer func() { c.record(a, err) }()
	var body FSPathRequest
	if err := req.Decode(&body); err != nil {
		return nil, err
	}
	a.op.Sandbox = body.Path
	limit, err := limitOf(a, body.Limit)
	if err != nil {
		return nil, err
	}
	p, fd, _, err := c.openTree(ctx, a, false)
	if err != nil {
		return nil, err
	}
	defer p.close()
	f := os.NewFile(uintptr(fd), "dir")
	defer f.Close()
	names, err := f.Readdirnames(-1)
	if err != nil {
		return nil, a.refuse(FSFailed, bareErr(err))
	}
	slices.Sort(names)
	base := c.replyPath(p.host, body.Path)
	r := &FSListReply{Path: base, Entries: []FSEntry{}}
	for _, n := range names {
		if len(r.Entries) == limit {
			r.Truncated = true
			break
		}
		st, err := lstatAt(fd, n)
		if err != nil {
			continue // gone since it was listed
		}
		r.Entries = append(r.Entries, entryOf(fd, n, path.Join(base, n), &st))
	}
	return r, nil
}

// walker walks a tree beneath an opened directory, following no link.
type walker struct {
	ctx      context.Context
	noIgnore bool
	seen     int
	// visit is called for each entry (dir holds it; typ is its type as the directory says
	// it, fs.ModeSymlink for a link), in name order, a directory before what it holds; stop
	// ends the walk.
	visit func(dir int, name string, rel []string, typ fs.FileMode) (stop bool)
}

// errWalkFull stops a walk that looked at MaxWalk entries.
var errWalkFull = errors.New("the walk looked at the most entries it may")

// walk walks the directory fd (which it closes) at rel below the start, under the ignore
// patterns ps.
func (w *walker) walk(fd int, rel []string, ps []gitignore.Pattern) (stop bool, err error) {
	f := os.NewFile(uintptr(fd), "dir")
	defer f.Close()
	if err := w.ctx.Err(); err != nil {
		return true, err
	}
	ents, err := f.ReadDir(-1) // each entry's type from the directory itself
	if err != nil {
		return false, nil // a directory that cannot be read is passed over, as find does
	}
	slices.SortFunc(ents, func(x, y fs.DirEntry) int { return strings.Compare(x.Name(), y.Name()) })
	if !w.noIgnore {
		ps = append(ps[:len(ps):len(ps)], ignoreFile(fd, rel)...)
	}
	m := gitignore.NewMatcher(ps)
	for _, ent := range ents {
		n, typ := ent.Name(), ent.Type()
		if n == ".git" {
			continue
		}
		if w.seen++; w.seen > MaxWalk {
			return true, errWalkFull
		}
		sub := append(rel[:len(rel):len(rel)], n)
		if len(ps) > 0 && m.Match(sub, typ.IsDir()) {
			continue
		}
		if w.visit(fd, n, sub, typ) {
			return true, nil
		}
		if !typ.IsDir() {
			continue
		}
		dfd, err := unix.Openat(fd, n, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			continue // swapped for a link, or gone: not followed
		}
		if stop, err := w.walk(dfd, sub, ps); stop || err != nil {
			return stop, err
		}
	}
	return false, nil
}

// maxIgnoreFile bounds a .gitignore read.
const maxIgnoreFile = 1 << 20

// ignoreFile is the patterns of the .gitignore in dir, if it holds one (a regular file, not
// a link).
func ignoreFile(dir int, rel []string) []gitignore.Pattern {
	fd, err := unix.Openat(dir, ".gitignore", unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil
	}
	f := os.NewFile(uintptr(fd), ".gitignore")
	defer f.Close()
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
		return nil
	}
	var ps []gitignore.Pattern
	sc := bufio.NewScanner(io.LimitReader(f, maxIgnoreFile))
	for sc.Scan() {
		line := strings.TrimRight(sc.Text(), "\r")
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		ps = append(ps, gitignore.ParsePattern(line, slices.Clone(rel)))
	}
	return ps
}

func (c *FSConfig) glob(ctx context.Context, req HostRequest) (_ any, err error) {
	a := &access{op: FSOp{Request: TypeFSGlob}}
	defer func() { c.record(a, err) }()
	var body FSGlobRequest
	if err := req.Decode(&body); err != nil {
		return nil, err
	}
	a.op.Sandbox = body.Path
	limit, err := limitOf(a, body.Limit)
	if err != nil {
		return nil, err
	}
	if body.Pattern == "" || !doublestar.ValidatePattern(body.Pattern) {
		return nil, a.refuse(FSBadRequest, fmt.Sprintf("%q is not a glob pattern", body.Pattern))
	}
	p, fd, _, err := c.openTree(ctx, a, false)
	if err != nil {
		return nil, err
	}
	defer p.close()
	base := c.replyPath(p.host, body.Path)
	r := &FSGlobReply{Path: base, Matches: []FSEntry{}}
	w := &walker{ctx: ctx, noIgnore: body.NoIgnore, visit: func(dir int, name string, rel []string, typ fs.FileMode) bool {
		if typ.IsDir() {
			return false
		}
		if ok, _ := doublestar.Match(body.Pattern, strings.Join(rel, "/")); !ok {
			return false
		}
		if st, err := lstatAt(dir, name); err == nil {
			r.Matches = append(r.Matches, entryOf(dir, name, path.Join(base, path.Join(rel...)), &st))
		}
		return false
	}}
	if _, err := w.walk(fd, nil, nil); err != nil {
		if !errors.Is(err, errWalkFull) {
			return nil, a.refuse(FSFailed, err.Error())
		}
		r.Truncated = true
	}
	slices.SortStableFunc(r.Matches, func(x, y FSEntry) int { return y.Modified.Compare(x.Modified) })
	if len(r.Matches) > limit {
		r.Matches, r.Truncated = r.Matches[:limit], true
	}
	return r, nil
}

// grepBinaryProbe is how much of a file's start is looked at for a NUL byte.
const grepBinaryProbe = 8 << 10

func (c *FSConfig) grep(ctx context.Context, req HostRequest) (_ any, err error) {
	a := &access{op: FSOp{Request: TypeFSGrep}}
	defer func() { c.record(a, err) }()
	var body FSGrepRequest
	if err := req.Decode(&body); err != nil {
		return nil, err
	}
	a.op.Sandbox = body.Path
	limit, err := limitOf(a, body.Limit)
	if err != nil {
		return nil, err
	}
	switch body.Mode {
	case "":
		body.Mode = GrepContent
	case GrepContent, GrepFiles, GrepCount:
	default:
		return nil, a.refuse(FSBadRequest, fmt.Sprintf("mode %q is not content, files or count", body.Mode))
	}
	if body.Before < 0 || body.After < 0 || body.Before > 100 || body.After > 100 {
		return nil, a.refuse(FSBadRequest, "context lines must be within 0..100")
	}
	expr := body.Pattern
	if body.IgnoreCase {
		expr = "(?i)" + expr
	}
	re, err := regexp.Compile(expr)
	if err != nil || body.Pattern == "" {
		return nil, a.refuse(FSBadRequest, fmt.Sprintf("%q is not a regular expression", body.Pattern))
	}
	// A file is matched whole first, most having no line to look at: with ^ and $ at each
	// line (a line's match is then the whole file's), unless the expression names the text's
	// own start or end, which only a line's reading sees.
	var whole *regexp.Regexp
	if !strings.Contains(expr, `\A`) && !strings.Contains(expr, `\z`) {
		whole = regexp.MustCompile("(?m:" + expr + ")")
	}
	if body.Glob != "" && !doublestar.ValidatePattern(body.Glob) {
		return nil, a.refuse(FSBadRequest, fmt.Sprintf("%q is not a glob pattern", body.Glob))
	}
	p, fd, one, err := c.openTree(ctx, a, true)
	if err != nil {
		return nil, err
	}
	defer p.close()
	base := c.replyPath(p.host, body.Path)
	g := &grepper{c: c, ctx: ctx, re: re, whole: whole, body: &body, limit: limit, r: &FSGrepReply{Path: base}}
	g.start()
	if one != "" { // one file, named: no glob, no ignore
		g.named = true // judged as the request itself, on the approval route
		g.file(fd, one, base, p.host)
		unix.Close(fd)
		g.finish()
		return g.r, nil
	}
	w := &walker{ctx: ctx, noIgnore: body.NoIgnore, visit: func(dir int, name string, rel []string, typ fs.FileMode) bool {
		if !typ.IsRegular() {
			return false
		}
		if body.Glob != "" {
			subject := name
			if strings.Contains(body.Glob, "/") {
				subject = strings.Join(rel, "/")
			}
			if ok, _ := doublestar.Match(body.Glob, subject); !ok {
				return false
			}
		}
		r := path.Join(rel...)
		g.file(dir, name, path.Join(base, r), path.Join(p.host, r))
		return false
	}}
	_, werr := w.walk(fd, nil, nil)
	g.finish()
	if werr != nil {
		if !errors.Is(werr, errWalkFull) {
			return nil, a.refuse(FSFailed, werr.Error())
		}
		g.r.Truncated = true
	}
	return g.r, nil
}

// grepper is one grep's state. The walk judges and opens each file in order (following no
// link, on the walk's directory descriptors); workers, one per processor, read and match
// the files opened; what they find goes into the reply in the walk's order as soon as every
// file before it is in. What the host holds is bounded whatever the workspace holds: a
// file's lines are made only for what the reply can show (at most limit and one), a worker
// that found lines ahead of their turn waits while more than grepHeld are held, and once the
// reply is full nothing more is read.
type grepper struct {
	c     *FSConfig
	ctx   context.Context
	re    *regexp.Regexp
	whole *regexp.Regexp // re over a whole file, lines and all; nil: none
	body  *FSGrepRequest
	named bool // one file, named by the request and judged with it
	limit int
	r     *FSGrepReply

	files chan grepFile
	wg    sync.WaitGroup
	n     int // files opened

	mu    sync.Mutex
	turn  *sync.Cond        // signalled when next moves or the reply fills
	next  int               // guarded by mu: the walk index whose result goes in next
	ahead map[int]grepFound // guarded by mu: results done before their turn
	held  int               // guarded by mu: the results in ahead and their lines
	items int               // guarded by mu: lines, files or counts in the reply
	full  bool              // guarded by mu: the reply holds all it can
}

// grepFile is a file opened for the workers, the i-th of the walk.
type grepFile struct {
	i       int
	fd      int
	size    int64
	sandbox string
}

// grepFound is what one file gave.
type grepFound struct {
	i       int
	sandbox string
	lines   []FSGrepLine
	count   int
	binary  bool
	large   bool
}

// grepQueue bounds the files opened ahead of the workers.
const grepQueue = 64

// grepHeld bounds the lines held for files found ahead of their turn, in units of the
// request's limit: a worker past it waits until the files before are in.
const grepHeld = 4

func (g *grepper) start() {
	g.files = make(chan grepFile, grepQueue)
	g.ahead = map[int]grepFound{}
	g.turn = sync.NewCond(&g.mu)
	for range runtime.GOMAXPROCS(0) {
		g.wg.Go(func() {
			for f := range g.files {
				var found grepFound
				if g.isFull() {
					found = grepFound{i: f.i} // not read: the reply has no room
				} else {
					found = g.scan(f)
				}
				unix.Close(f.fd)
				g.done(found)
			}
		})
	}
}

func (g *grepper) isFull() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.full
}

// done takes what one file gave: into the reply when its turn has come, with every result
// after it that waited; else it is held, once fewer than grepHeld limits of lines are. The
// worker with the next turn never waits, so the others' wait ends.
func (g *grepper) done(f grepFound) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for f.i != g.next && !g.full && g.held > grepHeld*g.limit {
		g.turn.Wait()
	}
	if g.full {
		return
	}
	if f.i != g.next {
		g.ahead[f.i] = f
		g.held += 1 + len(f.lines) // a result counts as a line, so that files without one are bounded too
		return
	}
	g.put(f)
	g.next++
	for {
		h, ok := g.ahead[g.next]
		if !ok {
			break
		}
		delete(g.ahead, g.next)
		g.held -= 1 + len(h.lines)
		if !g.full {
			g.put(h)
		}
		g.next++
	}
	g.turn.Broadcast()
}

// put adds one file's result to the reply, at most limit lines, files or counts in all;
// one more marks it truncated, and full. g.mu is held.
func (g *grepper) put(f grepFound) {
	room := func() bool {
		if g.items == g.limit {
			g.r.Truncated, g.full = true, true
			clear(g.ahead)
			g.held = 0
			return false
		}
		g.items++
		return true
	}
	switch {
	case f.binary:
		g.r.Binary++
	case f.large:
		g.r.Large++
	case f.count == 0:
	case g.body.Mode == GrepFiles:
		if room() {
			g.r.Files = append(g.r.Files, f.sandbox)
		}
	case g.body.Mode == GrepCount:
		if room() {
			g.r.Counts = append(g.r.Counts, FSGrepCount{Path: f.sandbox, Count: f.count})
		}
	default:
		for _, l := range f.lines {
			if !room() {
				return
			}
			g.r.Lines = append(g.r.Lines, l)
		}
	}
}

// finish waits for the workers; the reply is then whole.
func (g *grepper) finish() {
	close(g.files)
	g.wg.Wait()
}

// mayRead says whether the policy lets the host read the file at host unasked.
func (g *grepper) mayRead(sandbox, host string) bool {
	op := FSOp{Request: TypeFSGrep, Sandbox: sandbox, Host: host}
	if g.c.Guard != nil {
		return g.c.Guard(g.ctx, op) == nil
	}
	return g.c.auto.Decide(FSEffects(g.c.pctx, op)) == policy.Run
}

// file judges one file, name in dir, and opens it for the workers: never through a link,
// and only a regular file within the read limit.
func (g *grepper) file(dir int, name, sandbox, host string) {
	if g.isFull() {
		return // the reply has no room: nothing more is read
	}
	if !g.named && !g.mayRead(sandbox, host) {
		g.mu.Lock()
		g.r.Skipped = append(g.r.Skipped, sandbox)
		g.mu.Unlock()
		return
	}
	fd, err := unix.Openat(dir, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		return // gone, or swapped for a link since it was listed: not read
	}
	var st unix.Stat_t
	if unix.Fstat(fd, &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
		unix.Close(fd)
		return
	}
	if st.Size > g.c.MaxRead {
		unix.Close(fd)
		g.mu.Lock()
		g.r.Large++
		g.mu.Unlock()
		return
	}
	g.files <- grepFile{i: g.n, fd: fd, size: st.Size, sandbox: sandbox}
	g.n++
}

// scan reads one file and matches it: binary (a NUL byte in its first 8 KiB, as ripgrep)
// and files over the limit are counted, not searched. Its lines are found one at a time
// (a file of 16 MiB of newlines holds 16 million) and made only for the reply: the matches
// and their context, at most limit and one of them.
func (g *grepper) scan(f grepFile) grepFound {
	out := grepFound{i: f.i, sandbox: f.sandbox}
	b, err := readFD(f.fd, f.size, g.c.MaxRead)
	if err != nil {
		out.large = true
		return out
	}
	if bytes.IndexByte(b[:min(len(b), grepBinaryProbe)], 0) >= 0 {
		out.binary = true
		return out
	}
	if g.whole != nil && !g.whole.Match(b) {
		return out // most files: no line to look at
	}
	content := g.body.Mode == GrepContent
	type span struct{ i, start, end int }
	var before []span // the last Before lines, oldest first
	add := func(sp span, context bool) {
		if len(out.lines) <= g.limit {
			out.lines = append(out.lines, FSGrepLine{Path: f.sandbox, Line: sp.i + 1, Text: string(b[sp.start:sp.end]), Context: context})
		}
	}
	shown, after := -1, 0 // the last line shown; context lines still to show after a match
	for i, start := 0, 0; start < len(b); i++ {
		end := len(b)
		if n := bytes.IndexByte(b[start:], '\n'); n >= 0 {
			end = start + n
		}
		sp := span{i, start, end}
		start = end + 1
		switch {
		case g.re.Match(b[sp.start:sp.end]):
			out.count++
			if g.body.Mode == GrepFiles {
				return out // the file matches: nothing more of it is needed
			}
			if !content {
				continue
			}
			for _, c := range before {
				if c.i > shown {
					add(c, true)
				}
			}
			add(sp, false)
			shown, after = i, g.body.After
		case after > 0:
			add(sp, true)
			shown = i
			after--
		}
		if content && len(out.lines) > g.limit {
			break // the reply shows no more of this file
		}
		if content && g.body.Before > 0 {
			if len(before) == g.body.Before {
				before = before[1:]
			}
			before = append(before, sp)
		}
	}
	return out
}

// readFD reads the file fd whole, size bytes as its stat said (at most limit): what it holds
// when it is read, in one read where the file gives it all at once. (The descriptor is read
// as it is: an os.File would register it with the poller first, for nothing, a file's reads
// never block.)
func readFD(fd int, size, limit int64) ([]byte, error) {
	if size > limit {
		return nil, errors.New("over the read limit")
	}
	b := make([]byte, size)
	n := 0
	for n < len(b) {
		m, err := unix.Read(fd, b[n:])
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if m == 0 {
			break // a file that shrank meanwhile gives what it still held
		}
		n += m
	}
	return b[:n], nil
}
