// Package pathmap maps paths between a sandbox and the host: a list of mounts, the deepest
// mount holding a path maps it, both ways, and a host path that symlinks out of every mount is
// refused.
package pathmap

import (
	"errors"
	"fmt"
	"path"
	"strings"
)

// Mount is one directory seen by both sides.
type Mount struct {
	Sandbox  string `json:"sandbox" mapstructure:"sandbox"`
	Host     string `json:"host" mapstructure:"host"`
	ReadOnly bool   `json:"readonly,omitempty" mapstructure:"readonly"`
}

// Map is a list of mounts. A nil *Map is the identity: the sandbox is the host.
type Map struct {
	mounts []Mount
}

// Mounts returns the map's mounts.
func (m *Map) Mounts() []Mount {
	if m == nil {
		return []Mount{identity}
	}
	return append([]Mount(nil), m.mounts...)
}

// identity is the one mount of the identity map.
var identity = Mount{Sandbox: "/", Host: "/"}

// Identity returns the map of a sandbox that is the host itself (the local transport): every
// absolute path maps to itself, and ToHost still resolves symlinks.
func Identity() *Map { return &Map{mounts: []Mount{identity}} }

// ErrMount is the class of a bad mount list given to New.
var ErrMount = errors.New("bad mount list")

// New returns the map of mounts. Each side of a mount is an absolute path without a ".."
// component; it is cleaned ("/work/" is "/work"). Two mounts at one sandbox path, or none at
// all, are a bad list. Several mounts may share a host directory; ToSandbox then takes the
// first listed.
func New(mounts ...Mount) (*Map, error) {
	if len(mounts) == 0 {
		return nil, fmt.Errorf("%w: no mounts", ErrMount)
	}
	out := make([]Mount, 0, len(mounts))
	seen := make(map[string]int, len(mounts))
	for i, mt := range mounts {
		for _, side := range []struct{ name, p string }{{"sandbox", mt.Sandbox}, {"host", mt.Host}} {
			if err := checkMountPath(side.p); err != nil {
				return nil, fmt.Errorf("%w: mount %d: %s path %q %v", ErrMount, i, side.name, side.p, err)
			}
		}
		mt.Sandbox, mt.Host = path.Clean(mt.Sandbox), path.Clean(mt.Host)
		if j, dup := seen[mt.Sandbox]; dup {
			return nil, fmt.Errorf("%w: mounts %d and %d are both at sandbox path %q", ErrMount, j, i, mt.Sandbox)
		}
		seen[mt.Sandbox] = i
		out = append(out, mt)
	}
	return &Map{mounts: out}, nil
}

// checkMountPath says what is wrong with one side of a mount, or nil.
func checkMountPath(p string) error {
	switch {
	case p == "":
		return errors.New("is empty")
	case !path.IsAbs(p):
		return errors.New("is not absolute")
	case strings.IndexByte(p, 0) >= 0:
		return errors.New("holds a NUL byte")
	}
	for _, c := range strings.Split(p, "/") {
		if c == ".." {
			return errors.New(`has a ".." component`)
		}
	}
	return nil
}

// The codes of a Refusal.
const (
	// Outside: the sandbox path is relative, starts with "~", or lies under no mount; or
	// the host path is not seen from the sandbox.
	Outside = "outside"
	// Escapes: the path lies under a mount, but its symlinks lead out of every mount.
	Escapes = "escapes"
	// Loop: resolving the path follows more than MaxLinks symlinks.
	Loop = "loop"
	// Invalid: the path holds a NUL byte.
	Invalid = "invalid"
)

// MaxLinks is how many symlinks one resolution follows, as Linux does, before it is a loop.
const MaxLinks = 40

// Refusal is a path the map refuses on purpose. Its message names only the sandbox path, so it
// can go to the agent: no host path is ever in it.
type Refusal struct {
	Code    string // Outside, Escapes, Loop or Invalid
	Sandbox string // the sandbox path refused; "" when a host path was
}

func (r *Refusal) Error() string {
	if r.Sandbox == "" {
		switch r.Code {
		case Outside:
			return "host path is not seen from the sandbox: outside every mount"
		case Invalid:
			return "host path holds a NUL byte"
		}
		return "host path refused: " + r.Code
	}
	switch r.Code {
	case Outside:
		return fmt.Sprintf("path %q is outside the sandbox's mounts (an absolute path under a mount is needed)", r.Sandbox)
	case Escapes:
		return fmt.Sprintf("path %q leads out of the sandbox's mounts through a symlink", r.Sandbox)
	case Loop:
		return fmt.Sprintf("path %q has too many levels of symlinks", r.Sandbox)
	case Invalid:
		return fmt.Sprintf("path %q holds a NUL byte", r.Sandbox)
	}
	return fmt.Sprintf("path %q refused: %s", r.Sandbox, r.Code)
}

// Is makes errors.Is(err, &Refusal{Code: c}) match any refusal with code c.
func (r *Refusal) Is(target error) bool {
	t, ok := target.(*Refusal)
	return ok && t.Code == r.Code && t.Sandbox == ""
}

// holds reports whether directory dir holds p, component-wise: "/work" holds "/work" and
// "/work/a", not "/workshop". Both are clean and absolute.
func holds(dir, p string) bool {
	return dir == "/" || p == dir || strings.HasPrefix(p, dir) && p[len(dir)] == '/'
}

// rebase moves p, held by from, to the same place under to.
func rebase(p, from, to string) string {
	rest := strings.TrimPrefix(p, from)
	if from == "/" {
		rest = p
	}
	return path.Clean(to + "/" + rest)
}

// ToSandbox returns the sandbox path of a host path: the deepest mount whose host directory
// holds it maps it, lexically (symlinks are not followed). A host path under no mount, or
// hidden in the sandbox by a deeper mount over it, is refused as Outside.
func (m *Map) ToSandbox(host string) (string, error) {
	if strings.IndexByte(host, 0) >= 0 {
		return "", &Refusal{Code: Invalid}
	}
	if !path.IsAbs(host) {
		return "", &Refusal{Code: Outside}
	}
	host = path.Clean(host)
	var best Mount
	found := false
	for _, mt := range m.list() {
		if holds(mt.Host, host) && (!found || len(mt.Host) > len(best.Host)) {
			best, found = mt, true
		}
	}
	if !found {
		return "", &Refusal{Code: Outside}
	}
	sb := rebase(host, best.Host, best.Sandbox)
	// A deeper sandbox mount over sb shows another directory there: host is hidden.
	if back, ok := m.lexicalHost(sb); !ok || back != host {
		return "", &Refusal{Code: Outside}
	}
	return sb, nil
}

func (m *Map) list() []Mount {
	if m == nil {
		return []Mount{identity}
	}
	return m.mounts
}

// mountOf returns the deepest mount whose sandbox directory holds the clean absolute path p.
func (m *Map) mountOf(p string) (Mount, bool) {
	var best Mount
	found := false
	for _, mt := range m.list() {
		if holds(mt.Sandbox, p) && (!found || len(mt.Sandbox) > len(best.Sandbox)) {
			best, found = mt, true
		}
	}
	return best, found
}

// lexicalHost maps a clean sandbox path to the host without looking at the disk.
func (m *Map) lexicalHost(sb string) (string, bool) {
	mt, ok := m.mountOf(sb)
	if !ok {
		return "", false
	}
	return rebase(sb, mt.Sandbox, mt.Host), true
}

// Mount returns the mount that maps a sandbox path (say, to know whether it is read-only).
func (m *Map) Mount(sandbox string) (Mount, bool) {
	if !path.IsAbs(sandbox) {
		return Mount{}, false
	}
	return m.mountOf(path.Clean(sandbox))
}
