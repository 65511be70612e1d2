//go:build linux

package kernel

import (
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"github.com/paddockhq/paddock/transport/wire"
)

// pathBody reads the body of readdir, stat and realpath.
func pathBody(raw json.RawMessage) (wire.Path, error) {
	var p wire.Path
	if err := body(raw, &p); err != nil {
		return p, err
	}
	if p.Path == "" {
		return p, errorf(CodeBadRequest, "no path")
	}
	return p, nil
}

// readdir lists a directory, entries sorted by name; a symlink is reported as itself.
func readdir(raw json.RawMessage) (any, error) {
	p, err := pathBody(raw)
	if err != nil {
		return nil, err
	}
	des, err := os.ReadDir(p.Path)
	if err != nil {
		return nil, classify(err)
	}
	dir := wire.Dir{Entries: make([]wire.Entry, 0, len(des))}
	for _, de := range des {
		fi, err := de.Info()
		if err != nil {
			continue // removed since the listing
		}
		dir.Entries = append(dir.Entries, entry(de.Name(), fi, filepath.Join(p.Path, de.Name())))
	}
	return dir, nil
}

// stat gives one path's facts, following a final symlink unless told not to.
func stat(raw json.RawMessage) (any, error) {
	p, err := pathBody(raw)
	if err != nil {
		return nil, err
	}
	get := os.Stat
	if p.NoFollow {
		get = os.Lstat
	}
	fi, err := get(p.Path)
	if err != nil {
		return nil, classify(err)
	}
	return entry(filepath.Base(p.Path), fi, p.Path), nil
}

// realpath gives a path's absolute form with every symlink resolved.
func realpath(raw json.RawMessage) (any, error) {
	p, err := pathBody(raw)
	if err != nil {
		return nil, err
	}
	r, err := filepath.EvalSymlinks(p.Path)
	if err != nil {
		return nil, classify(err)
	}
	abs, err := filepath.Abs(r)
	if err != nil {
		return nil, classify(err)
	}
	return wire.Path{Path: abs}, nil
}

// chdir makes a directory the kernel's own working directory: a kernel started ahead for
// a pool takes on the directory of the session that claims it.
func chdir(raw json.RawMessage) (any, error) {
	p, err := pathBody(raw)
	if err != nil {
		return nil, err
	}
	if err := os.Chdir(p.Path); err != nil {
		return nil, classify(err)
	}
	return struct{}{}, nil
}

// entry is a file's facts on the wire; path is where to read a symlink's target.
func entry(name string, fi fs.FileInfo, path string) wire.Entry {
	e := wire.Entry{
		Name:    name,
		Type:    wire.TypeOther,
		Mode:    uint32(fi.Mode().Perm()),
		Size:    fi.Size(),
		ModTime: fi.ModTime().UnixNano(),
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		e.Mode = st.Mode & 0o7777 // with setuid, setgid and sticky
	}
	switch {
	case fi.Mode()&fs.ModeSymlink != 0:
		e.Type = wire.TypeSymlink
		e.Target, _ = os.Readlink(path)
	case fi.IsDir():
		e.Type = wire.TypeDir
	case fi.Mode().IsRegular():
		e.Type = wire.TypeFile
	}
	return e
}
