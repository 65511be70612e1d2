package docker

import (
	"os"
	"syscall"

	"github.com/paddockhq/paddock/transport"
)

// OwnerOf is the owner of the host directory bound where spec's kernel starts: the mount
// of the path map that holds spec.Cwd. Unknown when there is none or it cannot be read.
func OwnerOf(spec transport.Spec) WorkspaceOwner {
	if spec.PathMap == nil {
		return WorkspaceOwner{}
	}
	m, ok := spec.PathMap.Mount(spec.Cwd)
	if !ok {
		return WorkspaceOwner{}
	}
	fi, err := os.Stat(m.Host)
	if err != nil {
		return WorkspaceOwner{}
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return WorkspaceOwner{}
	}
	return WorkspaceOwner{UID: int(st.Uid), GID: int(st.Gid), Known: true}
}
