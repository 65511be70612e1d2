package pathmap

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"strings"
	"syscall"
)

// ToHost returns the host path of a sandbox path, with its symlinks resolved.
//
// The sandbox path must be absolute and under a mount, else it is refused as Outside (so is a
// path starting with "~": the sandbox's home is not the host's to guess). The deepest mount
// holding it maps it; then its symlinks are resolved on the host as the host kernel would
// when opening it: the longest existing part is resolved, links included (a dangling last
// link too), ".." after a link is taken from the link's real directory, at most MaxLinks
// links are followed (more is a Loop), and a missing rest is appended as it is. The result
// must lie in the resolved host directory of some mount (any mount: a link from one mount
// into another is fine), else the path is refused as Escapes.
//
// A ".." before any symlink is taken in the sandbox, lexically, as the kernel takes it in a
// real directory; after a symlink, on the host from the link's real directory.
func (m *Map) ToHost(sandbox string) (string, error) {
	return m.toHost(osFS{}, sandbox)
}

func (m *Map) toHost(fsys statFS, sandbox string) (string, error) {
	refuse := func(code string) error { return &Refusal{Code: code, Sandbox: sandbox} }
	if strings.IndexByte(sandbox, 0) >= 0 {
		return "", refuse(Invalid)
	}
	if !path.IsAbs(sandbox) { // relative, "~", or ""
		return "", refuse(Outside)
	}
	raw := components(sandbox)
	if _, ok := m.mountOf(path.Clean(raw)); !ok {
		return "", refuse(Outside)
	}
	mt, rel, ok := m.hostPath(fsys, raw)
	if !ok {
		return "", refuse(Outside)
	}
	// The mount's real directory first, then the path on from there: one walk for both.
	w := walker{fsys: fsys, cur: "/"}
	err := w.walk(mt.Host)
	dir := w.cur
	if err == nil {
		err = w.walk(rel)
	}
	if errors.Is(err, errLoop) {
		return "", refuse(Loop)
	}
	if err != nil {
		return "", fmt.Errorf("path %q: %w", sandbox, bare(err))
	}
	real := w.cur
	if holds(dir, real) {
		return real, nil
	}
	for _, other := range m.list() { // a link may lead into another mount
		if dir, err := resolve(fsys, other.Host); err == nil && holds(dir, real) {
			return real, nil
		}
	}
	return "", refuse(Escapes)
}

// hostPath maps the sandbox path raw (components() form) to the mount that maps it and the
// path to resolve from the mount's host directory. Up to the first symlink the path is walked on the sandbox side, where
// ".." is its lexical parent, as in any real directory, a mount point included: so
// "/work/sub/../x" is "/work/x" even when /work/sub is a mount of its own. From the first
// symlink on the rest is left, as written, to the host's resolution. ok is false when the
// walk passes a path no mount shows and that holds no mount point (what it is in the
// sandbox, the host cannot know).
func (m *Map) hostPath(fsys statFS, raw string) (mt Mount, rel string, ok bool) {
	cur, rest := raw, ""
	if strings.Contains(raw, "/..") {
		parts := strings.Split(raw[1:], "/")
		cur = "/"
		for i, c := range parts {
			if c == ".." {
				cur = path.Dir(cur)
				continue
			}
			next := path.Join(cur, c)
			h, ok := m.lexicalHost(next)
			if !ok {
				if !m.holdsMountPoint(next) {
					return Mount{}, "", false
				}
				cur = next // above a mount point: a real directory in the sandbox
				continue
			}
			if mode, err := fsys.Lstat(h); err == nil && mode&fs.ModeSymlink != 0 {
				rest = strings.Join(parts[i:], "/")
				break
			}
			cur = next
		}
	}
	mt, ok = m.mountOf(cur)
	if !ok {
		return Mount{}, "", false
	}
	return mt, strings.TrimPrefix(cur, mt.Sandbox) + "/" + rest, true
}

// holdsMountPoint reports whether the sandbox directory dir holds a mount's sandbox path.
func (m *Map) holdsMountPoint(dir string) bool {
	for _, mt := range m.list() {
		if holds(dir, mt.Sandbox) {
			return true
		}
	}
	return false
}

// components returns an absolute path with empty and "." components dropped and ".." kept:
// "/work//a/./../b/" is "/work/a/../b".
func components(p string) string {
	var b strings.Builder
	for _, c := range strings.Split(p, "/") {
		if c == "" || c == "." {
			continue
		}
		b.WriteByte('/')
		b.WriteString(c)
	}
	if b.Len() == 0 {
		return "/"
	}
	return b.String()
}

// bare strips the host path from a *fs.PathError, leaving its cause (an errno), so an error
// about a sandbox path does not carry a host path.
func bare(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// errLoop is a resolution that followed more than MaxLinks links.
var errLoop = errors.New("too many levels of symlinks")

// statFS is what resolving a path asks of the host's filesystem.
type statFS interface {
	Lstat(name string) (fs.FileMode, error)
	Readlink(name string) (string, error)
}

type osFS struct{}

func (osFS) Lstat(name string) (fs.FileMode, error) {
	fi, err := os.Lstat(name)
	if err != nil {
		return 0, err
	}
	return fi.Mode(), nil
}

func (osFS) Readlink(name string) (string, error) { return os.Readlink(name) }

// resolve returns the real path of the absolute path p: every symlink in its existing part
// resolved, as the kernel walks it, and the rest (which does not exist) appended. The result
// is clean, and no existing prefix of it is a symlink.
func resolve(fsys statFS, p string) (string, error) {
	w := walker{fsys: fsys, cur: "/"}
	err := w.walk(p)
	return w.cur, err
}

// walker resolves a path component by component, as the kernel does; walking two paths one
// after the other resolves the second from where the first led, links counted across both.
type walker struct {
	fsys    statFS
	cur     string // where the walk is: real, but for its missing last components
	missing int    // how many of cur's last components do not exist
	links   int    // symlinks followed
}

// walk moves on along p from where the walk is, whether p starts with "/" or not.
func (w *walker) walk(p string) error {
	todo := strings.Split(p, "/")
	for len(todo) > 0 {
		c := todo[0]
		todo = todo[1:]
		switch c {
		case "", ".":
			continue
		case "..":
			// cur is real (or a missing tail on a real directory): its parent is the
			// lexical one.
			w.cur = path.Dir(w.cur)
			if w.missing > 0 {
				w.missing--
			}
			continue
		}
		next := path.Join(w.cur, c)
		if w.missing > 0 {
			w.cur, w.missing = next, w.missing+1
			continue
		}
		mode, err := w.fsys.Lstat(next)
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
				w.cur, w.missing = next, 1
				continue
			}
			return err
		}
		if mode&fs.ModeSymlink == 0 {
			w.cur = next
			continue
		}
		if w.links++; w.links > MaxLinks {
			return errLoop
		}
		target, err := w.fsys.Readlink(next)
		if err != nil {
			return err
		}
		if path.IsAbs(target) {
			w.cur = "/"
		}
		todo = append(strings.Split(target, "/"), todo...)
	}
	return nil
}

// Location is where a sandbox path lies on the host, for opening it beneath its mount
// without following links: Root is the real directory of the deepest mount holding it and
// Rel the path on from there (clean, relative, "." for Root itself). Root/Rel is the path
// ToHost gives: neither Root nor the existing part of Rel held a symlink when it was
// resolved, so an open of Rel beneath Root that follows no link reaches the file resolved,
// or fails if anything was swapped for a link since.
type Location struct {
	Root string
	Rel  string
	// ReadOnly: a write there is refused, by the mount of the path asked for or by the
	// mount whose directory holds where it leads (a link in a writable mount does not
	// make a read-only one writable).
	ReadOnly bool
}

// Host is the host path of the location, Root/Rel.
func (l Location) Host() string { return path.Join(l.Root, l.Rel) }

// Locate maps a sandbox path as ToHost does (with its refusals) and says beneath which
// mount's real directory it lies. Of the mounts whose real directories hold it, the deepest
// is its Root; it is read-only when the mount asked is, or when every mount at that depth
// is.
func (m *Map) Locate(sandbox string) (Location, error) {
	return m.locate(osFS{}, sandbox)
}

func (m *Map) locate(fsys statFS, sandbox string) (Location, error) {
	real, err := m.toHost(fsys, sandbox)
	if err != nil {
		return Location{}, err
	}
	asked, _ := m.Mount(sandbox)
	var loc Location
	allRO := true
	for _, mt := range m.list() {
		dir, err := resolve(fsys, mt.Host)
		if err != nil || !holds(dir, real) {
			continue
		}
		switch {
		case loc.Root == "" || len(dir) > len(loc.Root):
			loc.Root, allRO = dir, mt.ReadOnly
		case len(dir) == len(loc.Root):
			allRO = allRO && mt.ReadOnly
		}
	}
	if loc.Root == "" { // the mounts moved since toHost looked
		return Location{}, &Refusal{Code: Escapes, Sandbox: sandbox}
	}
	loc.ReadOnly = asked.ReadOnly || allRO
	loc.Rel = "."
	if real != loc.Root {
		loc.Rel = strings.TrimPrefix(real[len(loc.Root):], "/")
	}
	return loc, nil
}
