package policy

import (
	"io"
	"io/fs"
	"os"
	"path"
	"slices"
	"strings"
	"syscall"
	"time"
)

// FS gives the path facts a decision needs, on host paths. Only Lstat and Readlink judge
// classes; ReadDir serves the globs of paddock policy check.
type FS interface {
	Lstat(name string) (fs.FileInfo, error)
	Readlink(name string) (string, error)
	ReadDir(name string) ([]fs.DirEntry, error)
}

// OSFS is the real disk.
type OSFS struct{}

// Lstat is os.Lstat.
func (OSFS) Lstat(name string) (fs.FileInfo, error) { return os.Lstat(name) }

// Readlink is os.Readlink.
func (OSFS) Readlink(name string) (string, error) { return os.Readlink(name) }

// ReadDir is os.ReadDir.
func (OSFS) ReadDir(name string) ([]fs.DirEntry, error) { return os.ReadDir(name) }

// maxSmallFile bounds what ReadFile reads: a .git file's gitdir: line, a commondir.
const maxSmallFile = 4096

// ReadFile reads the first maxSmallFile bytes of a regular file, following symlinks.
func (OSFS) ReadFile(name string) ([]byte, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, maxSmallFile))
}

// fileReader is an FS that can read a small file: the .git file that names the git
// directory a root uses. Without it, such a file is not followed.
type fileReader interface {
	ReadFile(name string) ([]byte, error)
}

// MapFS is an FS held in memory, for tests: directories, regular files and symlinks at
// clean absolute paths. Parent directories are implied; "/" always exists. Lookups follow
// symlinks the way Linux does (40 at most, then ELOOP).
type MapFS struct {
	entries  map[string]mapEntry
	children map[string][]string // guarded by nothing: a MapFS is built, then only read
}

type mapEntry struct {
	dir     bool
	link    string
	set     bool // given, not implied
	content string
}

// NewMapFS builds a MapFS from entries written as "/a/dir/" (a directory: trailing
// slash), "/a/link -> target" (a symlink) or "/a/file" (a regular file).
func NewMapFS(entries ...string) *MapFS {
	m := &MapFS{entries: map[string]mapEntry{"/": {dir: true, set: true}}, children: map[string][]string{}}
	for _, e := range entries {
		m.Add(e)
	}
	return m
}

// Add adds one entry, written as for NewMapFS, and reports whether it did: an entry below
// a file or a symlink, or one that would replace a directory holding entries, is left out.
func (m *MapFS) Add(spec string) bool {
	var e mapEntry
	name := spec
	if n, target, ok := strings.Cut(spec, " -> "); ok {
		name, e.link = n, target
	} else if strings.HasSuffix(spec, "/") {
		e.dir = true
	}
	name = path.Clean("/" + name)
	if name == "/" {
		return false
	}
	for p := path.Dir(name); p != "/"; p = path.Dir(p) {
		if old, ok := m.entries[p]; ok && !old.dir {
			return false
		}
	}
	if old, ok := m.entries[name]; ok && old.dir && !e.dir && len(m.children[name]) > 0 {
		return false
	}
	e.set = true
	m.put(name, e)
	for p := path.Dir(name); p != "/"; p = path.Dir(p) {
		if _, ok := m.entries[p]; ok {
			break
		}
		m.put(p, mapEntry{dir: true})
	}
	return true
}

func (m *MapFS) put(name string, e mapEntry) {
	if _, ok := m.entries[name]; !ok {
		dir := path.Dir(name)
		m.children[dir] = append(m.children[dir], path.Base(name))
	}
	m.entries[name] = e
}

// Entries returns the given entries in the form NewMapFS reads, sorted.
func (m *MapFS) Entries() []string {
	var out []string
	for name, e := range m.entries {
		switch {
		case !e.set || name == "/":
		case e.link != "":
			out = append(out, name+" -> "+e.link)
		case e.dir:
			out = append(out, name+"/")
		default:
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// walk resolves name as the kernel does: symlinks in every component but the last are
// followed; the last only when followLast.
func (m *MapFS) walk(op, name string, followLast bool) (string, mapEntry, error) {
	fail := func(err error) (string, mapEntry, error) {
		return "", mapEntry{}, &fs.PathError{Op: op, Path: name, Err: err}
	}
	if !strings.HasPrefix(name, "/") {
		return fail(fs.ErrInvalid)
	}
	queue := components(name)
	cur, links := "/", 0
	for len(queue) > 0 {
		c := queue[0]
		queue = queue[1:]
		if c == ".." {
			cur = path.Dir(cur)
			continue
		}
		next := path.Join(cur, c)
		e, ok := m.entries[next]
		if !ok {
			return fail(syscall.ENOENT)
		}
		last := len(queue) == 0
		if e.link != "" && (!last || followLast) {
			if links++; links > MaxLinks {
				return fail(syscall.ELOOP)
			}
			if strings.HasPrefix(e.link, "/") {
				cur = "/"
			}
			queue = append(components(e.link), queue...)
			continue
		}
		if !last && !e.dir {
			return fail(syscall.ENOTDIR)
		}
		cur = next
	}
	return cur, m.entries[cur], nil
}

// components splits a path into its components, without empty ones and ".".
func components(p string) []string {
	parts := strings.Split(p, "/")
	out := parts[:0]
	for _, c := range parts {
		if c != "" && c != "." {
			out = append(out, c)
		}
	}
	return out
}

// AddFile adds a regular file with its content, as Add does, and reports whether it did.
func (m *MapFS) AddFile(name, content string) bool {
	if !m.Add(name) {
		return false
	}
	e := m.entries[path.Clean("/"+name)]
	e.content = content
	m.entries[path.Clean("/"+name)] = e
	return true
}

// ReadFile returns a regular file's content, following symlinks.
func (m *MapFS) ReadFile(name string) ([]byte, error) {
	_, e, err := m.walk("open", name, true)
	if err != nil {
		return nil, err
	}
	if e.dir {
		return nil, &fs.PathError{Op: "read", Path: name, Err: syscall.EISDIR}
	}
	return []byte(e.content), nil
}

// Lstat describes name without following a final symlink.
func (m *MapFS) Lstat(name string) (fs.FileInfo, error) {
	real, e, err := m.walk("lstat", name, false)
	if err != nil {
		return nil, err
	}
	return mapInfo{name: path.Base(real), e: e}, nil
}

// Readlink returns a symlink's target.
func (m *MapFS) Readlink(name string) (string, error) {
	_, e, err := m.walk("readlink", name, false)
	if err != nil {
		return "", err
	}
	if e.link == "" {
		return "", &fs.PathError{Op: "readlink", Path: name, Err: syscall.EINVAL}
	}
	return e.link, nil
}

// ReadDir lists a directory, following symlinks, sorted by name.
func (m *MapFS) ReadDir(name string) ([]fs.DirEntry, error) {
	real, e, err := m.walk("readdir", name, true)
	if err != nil {
		return nil, err
	}
	if !e.dir {
		return nil, &fs.PathError{Op: "readdir", Path: name, Err: syscall.ENOTDIR}
	}
	names := slices.Sorted(slices.Values(m.children[real]))
	out := make([]fs.DirEntry, 0, len(names))
	for _, n := range names {
		out = append(out, fs.FileInfoToDirEntry(mapInfo{name: n, e: m.entries[path.Join(real, n)]}))
	}
	return out, nil
}

type mapInfo struct {
	name string
	e    mapEntry
}

func (i mapInfo) Name() string { return i.name }
func (i mapInfo) Size() int64  { return 0 }
func (i mapInfo) Mode() fs.FileMode {
	switch {
	case i.e.link != "":
		return fs.ModeSymlink | 0o777
	case i.e.dir:
		return fs.ModeDir | 0o755
	}
	return 0o644
}
func (i mapInfo) ModTime() time.Time { return time.Time{} }
func (i mapInfo) IsDir() bool        { return i.e.dir && i.e.link == "" }
func (i mapInfo) Sys() any           { return nil }
