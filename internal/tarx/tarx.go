// Package tarx carries a tree through a tar stream: the one writer of its entries (the image
// builder and the kubernetes workspace copy send a directory with it), and what a reader of a
// stream from a sandbox needs (sparse entries told apart, zeros written as holes).
package tarx

import (
	"archive/tar"
	"io"
	"io/fs"
	"os"
)

// WriteEntry writes the file at path, whose Lstat is fi, as the entry name (slash-separated,
// a directory's given its trailing slash here): its header with its mode and times, a
// symlink's target, a regular file's bytes. The owners' names are left out, and with anyUser
// the ids too (the reader's user takes the files).
func WriteEntry(tw *tar.Writer, path, name string, fi fs.FileInfo, anyUser bool) error {
	link := ""
	if fi.Mode()&fs.ModeSymlink != 0 {
		var err error
		if link, err = os.Readlink(path); err != nil {
			return err
		}
	}
	h, err := tar.FileInfoHeader(fi, link)
	if err != nil {
		return err
	}
	h.Name = name
	if fi.IsDir() {
		h.Name += "/"
	}
	h.Uname, h.Gname = "", ""
	if anyUser {
		h.Uid, h.Gid = 0, 0
	}
	if err := tw.WriteHeader(h); err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		return nil
	}
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = io.Copy(tw, f)
	return err
}
