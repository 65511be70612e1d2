package ssh

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
)

// files moves files between the host and a box and looks at them there, in one of two
// ways: SFTP (sftpFiles), or commands on exec channels for a box with no SFTP subsystem
// (execFiles: cat for a single file, tar streams for a tree). What is moved, when, and what
// the box's answers mean is decided above it (upload, Sync), the same for both.
type files interface {
	// lstat describes each path, not following a final symlink; a path that cannot be
	// looked at is described as missing. When mkdir is not "" and not there, it is made
	// first (its parents as needed), with mode.
	lstat(ctx context.Context, mkdir string, mode fs.FileMode, paths ...string) ([]rstat, error)
	// put writes the local file (size bytes, content hash sum) at remote with mode: at a new
	// temporary name beside it, checked, then renamed over remote, so that no one ever sees a
	// part of it at remote.
	put(ctx context.Context, local, remote string, size int64, sum string, mode fs.FileMode) error
	// mkTree makes remote, a new directory (its parents as needed) for send to fill, and
	// returns the box's clock (unix seconds) no later than the moment it was made. It fails
	// when remote exists, or when the box cannot take a tree this way.
	mkTree(ctx context.Context, remote string) (int64, error)
	// send writes the items, read from under localRoot, under remote (made by mkTree).
	send(ctx context.Context, localRoot, remote string, items []item) error
	// walk calls fn on each entry of the tree under remote, a directory before what it holds;
	// an error of fn ends the walk.
	walk(ctx context.Context, remote string, fn func(listed) error) error
	// removeAll removes remote and everything under it.
	removeAll(ctx context.Context, remote string) error
	// close ends the way's channel, if it holds one.
	close() error
}

// rstat is what lstat learns of a path on the box.
type rstat struct {
	exists bool
	mode   fs.FileMode // type and permission bits
	size   int64
	uid    int // -1: not known
}

// item is one entry of a tree to send: a directory, a regular file or a symlink.
type item struct {
	rel   string      // slash path under the root
	mode  fs.FileMode // type and permission bits
	size  int64
	mtime int64  // unix seconds
	link  string // a symlink's target
}

// listed is one entry of a tree on the box, as walk lists it.
type listed struct {
	rel   string      // slash path under the root, as the box names it (unchecked)
	mode  fs.FileMode // type and permission bits
	size  int64
	mtime int64  // unix seconds
	link  string // a symlink's target
	// same, when set, names an entry listed before whose content this regular file shares (a
	// hard link in a tar stream, which carries the content once).
	same string
	// open reads a regular file's content; it may be called once, while fn runs.
	open func() (io.ReadCloser, error)
}

// ErrNoTar is the error of a sync to a box with neither an SFTP subsystem nor tar.
var ErrNoTar = errors.New("the box has no sftp subsystem and no tar program, so no workspace can be copied to it: install tar there, or enable sftp (`Subsystem sftp internal-sftp` in sshd_config)")

// noSFTPError says why the box takes no SFTP: the files then go over exec channels.
type noSFTPError struct{ err error }

func (e *noSFTPError) Error() string { return fmt.Sprintf("no sftp subsystem: %v", e.err) }
func (e *noSFTPError) Unwrap() error { return e.err }

// files returns the way files reach the box b behind c: SFTP (the probe's client, the
// first time), or exec channels where the box has no SFTP. The caller closes it.
func (c *Conn) files(b *box) (files, error) {
	if b.noSFTP != nil {
		return &execFiles{c: c}, nil
	}
	c.mu.Lock()
	f := b.sftp
	b.sftp = nil
	c.mu.Unlock()
	if f != nil {
		return f, nil
	}
	return c.openSFTP()
}
