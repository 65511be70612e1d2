package daemon

import (
	"fmt"
	"io/fs"

	"github.com/paddockhq/paddock/errdefs"
)

// The local-access decisions: which socket directory may be used, and which peer may
// speak. They are pure: the code around them gathers the facts (lstat, SO_PEERCRED).

// DirFacts are what the daemon knows of its socket directory, from lstat.
type DirFacts struct {
	Symlink bool
	Dir     bool
	UID     uint32
	Mode    fs.FileMode // permission bits
}

// Faults of a socket directory.
const (
	FaultSymlink = "symlink"     // the path is a symbolic link
	FaultNotDir  = "not_dir"     // the path is not a directory
	FaultOwner   = "owner"       // another uid owns it
	FaultMode    = "mode"        // group or others may write it
	FaultMissing = "cannot_make" // it is missing and could not be made
)

// DirFault decides whether a socket directory may be used by the daemon running as uid:
// "" when it is a real directory, owned by uid, with no group or other write; else the
// fault, in the order a person would fix them.
func DirFault(f DirFacts, uid uint32) string {
	switch {
	case f.Symlink:
		return FaultSymlink
	case !f.Dir:
		return FaultNotDir
	case f.UID != uid:
		return FaultOwner
	case f.Mode&0o022 != 0:
		return FaultMode
	}
	return ""
}

// DirError is a socket directory the daemon refuses: the directory, the fault and the fix.
type DirError struct {
	Dir   string
	Fault string
	Facts DirFacts
	UID   uint32 // the daemon's
	Err   error  // FaultMissing: why it could not be made
}

func (e *DirError) Error() string {
	var what, fix string
	switch e.Fault {
	case FaultSymlink:
		what = "is a symbolic link"
		fix = fmt.Sprintf("remove the link (rm %s) and let paddock make the directory, or choose another socket path", e.Dir)
	case FaultNotDir:
		what = "is not a directory"
		fix = fmt.Sprintf("remove it (rm %s) or choose another socket path", e.Dir)
	case FaultOwner:
		what = fmt.Sprintf("is owned by uid %d, not by the daemon's uid %d", e.Facts.UID, e.UID)
		fix = "remove it and let paddock make it, or choose a directory of your own (paddock serve --socket DIR/paddock.sock)"
	case FaultMode:
		what = fmt.Sprintf("has mode %04o: group or others may write it", e.Facts.Mode)
		fix = fmt.Sprintf("chmod 700 %s", e.Dir)
	default:
		what = fmt.Sprintf("could not be made: %v", e.Err)
		fix = "choose a socket path whose parent you can write (paddock serve --socket PATH)"
	}
	return fmt.Sprintf("socket directory %s %s; fix: %s", e.Dir, what, fix)
}

// Code is the stable code of the refusal.
func (e *DirError) Code() string { return "socket_dir_" + e.Fault }

// Class is the error's class.
func (e *DirError) Class() errdefs.Class { return errdefs.PermissionDenied }

func (e *DirError) Unwrap() error { return e.Err }

// PeerAllowed decides whether a peer may speak to the daemon running as uid: only when its
// uid could be read and is the daemon's own.
func PeerAllowed(peer uint32, readErr error, uid uint32) bool {
	return readErr == nil && peer == uid
}
