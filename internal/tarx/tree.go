package tarx

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// TreeOptions say what WriteTree sends.
type TreeOptions struct {
	// AnyUser leaves the owners' ids out too (the reader's user takes the files).
	AnyUser bool
	// Plain sends only directories, regular files and symlinks (no socket, device or pipe).
	Plain bool
	// Skip, when set, leaves out the entry rel (a slash path under the root), and with all a
	// directory's entries as well.
	Skip func(rel string, dir bool) (skip, all bool, err error)
}

// WriteTree writes the tree at root as a tar stream, paths relative to root: each entry with
// its mode and times (not its owners' names), a symlink's target, a file's bytes.
func WriteTree(w io.Writer, root string, o TreeOptions) error {
	tw := tar.NewWriter(w)
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, p)
		if err != nil || rel == "." {
			return err
		}
		rel = filepath.ToSlash(rel)
		if o.Skip != nil {
			skip, all, err := o.Skip(rel, d.IsDir())
			switch {
			case err != nil:
				return err
			case skip && all && d.IsDir():
				return filepath.SkipDir
			case skip:
				return nil
			}
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		if o.Plain && !fi.IsDir() && !fi.Mode().IsRegular() && fi.Mode()&fs.ModeSymlink == 0 {
			return nil
		}
		return WriteEntry(tw, p, rel, fi, o.AnyUser)
	})
	if err != nil {
		return err
	}
	return tw.Close()
}

// ReadTree writes a tar stream from a sandbox under root (from names the stream in errors:
// "the pod's tree"). Whatever the stream holds, nothing
// is written outside root: a name that is absolute or climbs out is refused, a path never
// goes through a symlink the stream made (each parent must be a directory it made), and
// only directories, regular files and symlinks are made. A sparse entry is refused, and
// zeros are written as holes: what the sandbox claims takes no disk it did not send.
func ReadTree(r io.Reader, root, from string) error {
	tr := tar.NewReader(r)
	dirs := map[string]bool{".": true}
	type stamp struct {
		path string
		t    time.Time
	}
	var times []stamp
	type perm struct {
		path string
		mode fs.FileMode
	}
	var perms []perm // directories' modes, set last (from a list: a deferred call each cost more)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
		name := filepath.Clean(filepath.FromSlash(strings.TrimPrefix(h.Name, "./")))
		if name == "." {
			continue
		}
		if filepath.IsAbs(name) || name == ".." || strings.HasPrefix(name, ".."+string(filepath.Separator)) {
			return fmt.Errorf("%s names %q, outside the tree", from, h.Name)
		}
		if !dirs[filepath.Dir(name)] {
			return fmt.Errorf("%s names %q before its directory", from, h.Name)
		}
		if Sparse(h) {
			return fmt.Errorf("%s holds %q as a sparse file, which it has no need of", from, h.Name)
		}
		p := filepath.Join(root, name)
		mode := fs.FileMode(h.Mode).Perm()
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.Mkdir(p, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
				return err
			}
			if fi, err := os.Lstat(p); err != nil || !fi.IsDir() {
				return fmt.Errorf("%s names %q as a directory and as something else", from, h.Name)
			}
			dirs[name] = true
			perms = append(perms, perm{p, mode | 0o700})
		case tar.TypeReg:
			f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
			if err != nil {
				return err
			}
			_, err = CopyHoles(f, tr)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return err
			}
		case tar.TypeSymlink:
			if err := os.Symlink(h.Linkname, p); err != nil {
				return err
			}
			continue
		default:
			continue
		}
		times = append(times, stamp{p, h.ModTime})
	}
	// Modes and times last, a directory's after what was made in it.
	for i := len(perms) - 1; i >= 0; i-- {
		os.Chmod(perms[i].path, perms[i].mode)
	}
	for i := len(times) - 1; i >= 0; i-- {
		os.Chtimes(times[i].path, times[i].t, times[i].t)
	}
	return nil
}
