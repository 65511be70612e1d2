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
	host, mt, ok := m.hostPath(fsys, raw)
	if !ok {
		return "", refuse(Outside)
	}
	real, err := resolve(fsys, host)
	if errors.Is(err, errLoop) {
		return "", refuse(Loop)
	}
	if err != nil {
		return "", fmt.Errorf("path %q: %w", sandbox, bare(err))
	}
	// Try the mount that mapped the path first: it holds the result unless a link left it.
	for _, cand := range append([]Mount{mt}, m.list()...) {
		dir, err := resolve(fsys, cand.Host)
		if err == nil && holds(dir, real) {
			return real, nil
		}
	}
	return "", refuse(Escapes)
}

// hostPath maps the sandbox path raw (components() form) to the host path to resolve and the
// mount that maps it. Up to the first symlink the path is walked on the sandbox side, where
// ".." is its lexical parent, as in any real directory, a mount point included: so
// "/work/sub/../x" is "/work/x" even when /work/sub is a mount of its own. From the first
// symlink on the rest is left, as written, to the host's resolution. ok is false when the
// walk passes a path no mount shows and that holds no mount point (what it is in the
// sandbox, the host cannot know).
func (m *Map) hostPath(fsys statFS, raw string) (host string, mt Mount, ok bool) {
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
					return "", Mount{}, false
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
		return "", Mount{}, false
	}
	return rebase(cur, mt.Sandbox, mt.Host) + "/" + rest, mt, true
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
	cur := "/"
	missing := 0 // how many of cur's last components do not exist
	links := 0
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
			cur = path.Dir(cur)
			if missing > 0 {
				missing--
			}
			continue
		}
		next := path.Join(cur, c)
		if missing > 0 {
			cur, missing = next, missing+1
			continue
		}
		mode, err := fsys.Lstat(next)
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
				cur, missing = next, 1
				continue
			}
			return "", err
		}
		if mode&fs.ModeSymlink == 0 {
			cur = next
			continue
		}
		if links++; links > MaxLinks {
			return "", errLoop
		}
		target, err := fsys.Readlink(next)
		if err != nil {
			return "", err
		}
		if path.IsAbs(target) {
			cur = "/"
		}
		todo = append(strings.Split(target, "/"), todo...)
	}
	return cur, nil
}
