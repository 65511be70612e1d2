package policy

import (
	"errors"
	"io/fs"
	"path"
	"strings"
)

// MaxLinks is how many symlinks one resolution follows, as Linux does; one more is a loop.
const MaxLinks = 40

// Real returns the real location of the absolute path p, as the kernel would reach it:
// every symlink of the existing part is followed (a dangling one too: its target is where a
// write would land), ".." steps up from the real directory ("/.." is "/"), and the part
// that does not exist stays as written. When more than MaxLinks symlinks are met the path
// loops: loop is true and real is as far as the resolution got, the rest appended as
// written. A relative p is taken from "/".
//
// Law (path_real_has_no_link): unless it looped, no prefix of real is a symlink in fsys.
func Real(fsys FS, p string) (real string, loop bool) {
	if linkFree(fsys, p) {
		return p, false
	}
	real, _, loop = resolve(fsys, "/", components(p), 0)
	return real, loop
}

// linkFree reports whether the FS can tell at once that p is its own real path: p is
// clean, and every component exists and is no symlink, or only the last is missing.
func linkFree(fsys FS, p string) bool {
	lf, ok := fsys.(linkFreer)
	if !ok || !isClean(p) {
		return false
	}
	err := lf.LinkFree(p)
	return err == nil || (errors.Is(err, fs.ErrNotExist) && lf.LinkFree(path.Dir(p)) == nil)
}

// childLinkFree is linkFree for a clean path whose directory is known to be real: one
// lstat, not an open and a close.
func childLinkFree(fsys FS, p string) bool {
	if nl, ok := fsys.(notLinker); ok {
		err := nl.NotLink(p)
		return err == nil || errors.Is(err, fs.ErrNotExist)
	}
	fi, err := fsys.Lstat(p)
	if err != nil {
		return errors.Is(err, fs.ErrNotExist)
	}
	return fi.Mode()&fs.ModeSymlink == 0
}

// notLinker is an FS that tells whether one entry is a symlink without building its
// FileInfo (OSFS on Linux): nil when it exists and is none.
type notLinker interface {
	NotLink(name string) error
}

// linkFreer is an FS that can tell at once that a path has no symlink (OSFS on Linux).
type linkFreer interface {
	LinkFree(name string) error
}

// isClean reports whether p is absolute and clean: no empty, "." or ".." component.
func isClean(p string) bool {
	if p == "/" {
		return true
	}
	if !strings.HasPrefix(p, "/") || strings.HasSuffix(p, "/") {
		return false
	}
	// Each component, after its slash, is neither empty, "." nor "..".
	for i := 0; i < len(p); {
		j := strings.IndexByte(p[i+1:], '/')
		if j < 0 {
			j = len(p) - i - 1
		}
		if c := p[i+1 : i+1+j]; c == "" || c == "." || c == ".." {
			return false
		}
		i += 1 + j
	}
	return true
}

// isName reports whether p is one component: no slash, not "", "." or "..".
func isName(p string) bool {
	return p != "" && p != "." && p != ".." && !strings.Contains(p, "/")
}

// resolve walks queue from the real directory cur, links symlinks already followed; it
// returns the real path and the links followed in all.
func resolve(fsys FS, cur string, queue []string, links int) (real string, n int, loop bool) {
	missing := 0 // trailing components of cur known not to exist
	for len(queue) > 0 {
		c := queue[0]
		queue = queue[1:]
		if c == ".." {
			cur = path.Dir(cur)
			if missing > 0 {
				missing--
			}
			continue
		}
		next := join(cur, c)
		if missing > 0 {
			cur, missing = next, missing+1
			continue
		}
		fi, err := fsys.Lstat(next)
		if err != nil {
			cur, missing = next, 1
			continue
		}
		if fi.Mode()&fs.ModeSymlink == 0 {
			cur = next
			continue
		}
		target, err := fsys.Readlink(next)
		if err != nil {
			// A link we cannot read: keep it as written rather than guess.
			cur = next
			continue
		}
		if links++; links > MaxLinks {
			return path.Join(append([]string{next}, queue...)...), links, true
		}
		if strings.HasPrefix(target, "/") {
			cur = "/"
		}
		queue = append(components(target), queue...)
	}
	return cur, links, false
}

// join appends one component to a clean absolute directory.
func join(dir, name string) string {
	if dir == "/" {
		return "/" + name
	}
	return dir + "/" + name
}

// under reports whether dir holds p, component-wise: "/work" holds "/work" and "/work/a",
// not "/workshop". Both are clean and absolute.
func under(p, dir string) bool {
	if dir == "/" {
		return true
	}
	return p == dir || (len(p) > len(dir) && p[len(dir)] == '/' && p[:len(dir)] == dir)
}
