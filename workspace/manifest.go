package workspace

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"golang.org/x/sys/unix"
)

// Names inside a workspace directory.
const (
	BaseDir      = "base"          // the tree as the child found it
	CopyDir      = "copy"          // the child's copy, where it works
	ManifestName = "manifest"      // facts recorded at spawn; its presence ends a clone
	ReportName   = "handback.json" // the hand-back's report; its presence ends a hand-back
	ConflictsDir = "conflicts"     // the child's versions not taken, by path
)

// manifestVersion is the version of the manifests Clone writes: 2 added GitFromBase, which
// an older reader would take for a workspace outside git. A version-1 manifest is read as
// ever.
const manifestVersion = 2

// header is the manifest's first line.
type header struct {
	Version int       `json:"version"`
	Parent  string    `json:"parent"`
	Created time.Time `json:"created"`
	// Prefix is the parent's path inside its git work tree (elements), and Ignore the
	// ignore files of the work tree that the copy does not hold (info/exclude, the global
	// excludes file, .gitignore files above the parent): the hand-back leaves out new
	// files of the child that git would ignore in the parent.
	Prefix []string    `json:"prefix,omitempty"`
	Ignore []ignoreSet `json:"ignore,omitempty"`
	// Stamp is tickClock (ns) when the clone returned, past the ctime of every copy file
	// (for snapshots, Snapshot: see snapshotManifests): a copy file whose ctime is not
	// older is compared by content at the hand-back.
	Stamp int64 `json:"stamp"`
	Files int   `json:"files"`
	Dirs  int   `json:"dirs"`
	Links int   `json:"symlinks"`
	Bytes int64 `json:"bytes"`
	// Snapshot, for a workspace of btrfs snapshots, is tickClock (ns) just before they were
	// made; the manifest then holds no records: the hand-back lists the base (read-only,
	// as the parent was), with git's rules when Git says the parent was in a work tree.
	Snapshot int64 `json:"snapshot,omitempty"`
	Git      bool  `json:"git,omitempty"`
	// GitFromBase, for a snapshot workspace of a parent holding its own .git directory, says
	// that Git and Ignore were not read at spawn: the hand-back reads them from the base,
	// which holds the repository (its configuration, info/exclude) as it was then; the
	// global excludes file is read then too, as the base's listing reads it.
	GitFromBase bool `json:"git_from_base,omitempty"`
	// Base, for a workspace of a group (CloneGroup), is the base it shares with the
	// group's others, in the group's directory; "": the workspace's own base. Member names
	// its file among the group's members (the directory may be renamed before Discard).
	Base   string `json:"base,omitempty"`
	Member string `json:"member,omitempty"`
}

type ignoreSet struct {
	Domain   []string `json:"domain,omitempty"`
	Patterns []string `json:"patterns"`
}

// record is one listed path with the facts of the parent's entry at spawn (Parent) and of
// the child's copy as made (Copy). Directories record only their mode.
type record struct {
	Path   string
	Kind   Kind
	Racy   bool // the parent's entry had changed in the clock tick it was read in
	Parent facts
	Copy   facts
}

type manifest struct {
	header
	records []record
}

var kindChar = [...]byte{Absent: '-', File: 'f', Symlink: 'l', Dir: 'd'}

// The manifest is one JSON line, then one record per path, each ended by a NUL byte:
// kind, ten decimal fields, a space and the path. A path cannot hold a NUL, and a text
// record keeps loading a 100,000-path manifest far cheaper than a JSON array.
func writeManifest(name string, m *manifest) error {
	tmp := name + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	w := bufio.NewWriterSize(f, 1<<16)
	h, err := json.Marshal(m.header)
	if err != nil {
		f.Close()
		return err
	}
	w.Write(h)
	w.WriteByte('\n')
	var b []byte
	for _, r := range m.records {
		b = append(b[:0], kindChar[r.Kind])
		if r.Racy {
			b[0] -= 'a' - 'A'
		}
		for _, fa := range [2]facts{r.Parent, r.Copy} {
			b = append(b, ' ')
			b = strconv.AppendUint(b, uint64(fa.Mode), 10)
			b = append(b, ' ')
			b = strconv.AppendInt(b, fa.Size, 10)
			b = append(b, ' ')
			b = strconv.AppendInt(b, fa.Mtime, 10)
			b = append(b, ' ')
			b = strconv.AppendInt(b, fa.Ctime, 10)
			b = append(b, ' ')
			b = strconv.AppendUint(b, fa.Ino, 10)
		}
		b = append(b, ' ')
		b = append(b, r.Path...)
		b = append(b, 0)
		w.Write(b)
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, name)
}

func readManifest(dir string) (*manifest, error) {
	name := filepath.Join(dir, ManifestName)
	data, err := os.ReadFile(name)
	if os.IsNotExist(err) {
		return nil, &Error{Reason: CodeNoManifest, Msg: fmt.Sprintf("%s holds no isolated workspace (no %s)", dir, ManifestName)}
	}
	if err != nil {
		return nil, err
	}
	m, err := parseManifest(data)
	if err != nil {
		return nil, &Error{Reason: CodeBadManifest, Msg: fmt.Sprintf("the manifest of %s cannot be read", dir), Err: err}
	}
	return m, nil
}

// readHeader reads only the first line of dir's manifest.
func readHeader(dir string) (header, error) {
	var h header
	f, err := os.Open(filepath.Join(dir, ManifestName))
	if err != nil {
		return h, err
	}
	defer f.Close()
	line, err := bufio.NewReaderSize(f, 4096).ReadBytes('\n')
	if err != nil {
		return h, err
	}
	err = json.Unmarshal(line, &h)
	return h, err
}

// leaveGroup says that dir no longer uses its group's shared base; the last to leave
// removes the base and the group. A rerun after a cut finishes what the cut left.
func leaveGroup(name, group string) error {
	member := filepath.Join(group, groupMembers, name)
	if err := os.Remove(member); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	step("leave group")
	left, err := os.ReadDir(filepath.Join(group, groupMembers))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil || len(left) > 0 {
		return err
	}
	// The last member: the base goes. Members that leave together may each find none
	// left; the one whose rename wins removes it.
	trash := filepath.Join(group, "removing-"+name)
	if err := os.Rename(filepath.Join(group, BaseDir), trash); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	baseListings.forget(filepath.Join(group, BaseDir))
	if err := destroySubvolume(trash); err != nil {
		return err
	}
	// Each member that got here tries both: the last to finish removes the group.
	for _, d := range []string{filepath.Join(group, groupMembers), group} {
		if err := os.Remove(d); err != nil && !errors.Is(err, os.ErrNotExist) && !errors.Is(err, unix.ENOTEMPTY) && !errors.Is(err, unix.EEXIST) {
			return err
		}
	}
	return nil
}

func parseManifest(data []byte) (*manifest, error) {
	nl := bytes.IndexByte(data, '\n')
	if nl < 0 {
		return nil, io.ErrUnexpectedEOF
	}
	m := &manifest{}
	if err := json.Unmarshal(data[:nl], &m.header); err != nil {
		return nil, err
	}
	if m.Version != manifestVersion && m.Version != 1 {
		return nil, fmt.Errorf("manifest version %d, want %d", m.Version, manifestVersion)
	}
	rest := data[nl+1:]
	m.records = make([]record, 0, m.Files+m.Dirs+m.Links)
	for len(rest) > 0 {
		end := bytes.IndexByte(rest, 0)
		if end < 0 {
			return nil, io.ErrUnexpectedEOF
		}
		r, err := parseRecord(rest[:end])
		if err != nil {
			return nil, err
		}
		m.records = append(m.records, r)
		rest = rest[end+1:]
	}
	return m, nil
}

func parseRecord(b []byte) (record, error) {
	var r record
	if len(b) < 2 || b[1] != ' ' {
		return r, fmt.Errorf("bad manifest record %q", b)
	}
	c := b[0]
	if c >= 'A' && c <= 'Z' {
		r.Racy = true
		c += 'a' - 'A'
	}
	switch c {
	case 'f':
		r.Kind = File
	case 'l':
		r.Kind = Symlink
	case 'd':
		r.Kind = Dir
	default:
		return r, fmt.Errorf("bad manifest record kind %q", c)
	}
	b = b[2:]
	var nums [10]int64
	for i := range nums {
		sp := bytes.IndexByte(b, ' ')
		if sp <= 0 {
			return r, fmt.Errorf("short manifest record")
		}
		neg := b[0] == '-'
		digits := b[:sp]
		if neg {
			digits = digits[1:]
		}
		if len(digits) == 0 || len(digits) > 20 {
			return r, fmt.Errorf("bad manifest number %q", b[:sp])
		}
		var n uint64
		for _, c := range digits {
			if c < '0' || c > '9' {
				return r, fmt.Errorf("bad manifest number %q", b[:sp])
			}
			d := uint64(c - '0')
			if n > (^uint64(0)-d)/10 {
				return r, fmt.Errorf("manifest number %q out of range", b[:sp])
			}
			n = n*10 + d
		}
		if neg {
			nums[i] = -int64(n)
		} else {
			nums[i] = int64(n) // inode numbers above 1<<63 wrap and come back as written
		}
		b = b[sp+1:]
	}
	if !validRel(string(b)) {
		return r, fmt.Errorf("bad manifest path %q", b)
	}
	r.Path = string(b)
	r.Parent = facts{Mode: uint32(nums[0]), Size: nums[1], Mtime: nums[2], Ctime: nums[3], Ino: uint64(nums[4])}
	r.Copy = facts{Mode: uint32(nums[5]), Size: nums[6], Mtime: nums[7], Ctime: nums[8], Ino: uint64(nums[9])}
	return r, nil
}

// validRel reports whether p is a clean relative slash path that stays below its root.
func validRel(p string) bool {
	if p == "" || p[0] == '/' || p[len(p)-1] == '/' {
		return false
	}
	for len(p) > 0 {
		i := bytes.IndexByte([]byte(p), '/')
		elem := p
		if i >= 0 {
			elem, p = p[:i], p[i+1:]
		} else {
			p = ""
		}
		if elem == "" || elem == "." || elem == ".." {
			return false
		}
	}
	return true
}
