package workspace

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The btrfs calls a snapshot workspace needs, made by hand: the Go libraries for btrfs
// either link libbtrfs through cgo (containerd/btrfs), which the host's static,
// cgo-free build cannot take, or are unmaintained. Three ioctls and their argument
// structs (linux/btrfs.h) are all it takes.

const (
	btrfsFirstFreeObjectID = 256 // the inode number of every subvolume's root directory
	btrfsSubvolNameMax     = 4039
	btrfsSubvolRdonly      = 1 << 1

	// _IOW(0x94, 23, struct btrfs_ioctl_vol_args_v2), a 4096-byte struct.
	btrfsIocSnapCreateV2 = 0x50009417
	// _IOW(0x94, 15, struct btrfs_ioctl_vol_args), a 4096-byte struct.
	btrfsIocSnapDestroy = 0x5000940f
	// _IOW(0x94, 26, __u64) and _IOR(0x94, 25, __u64).
	btrfsIocSubvolSetflags = 0x4008941a
	btrfsIocSubvolGetflags = 0x80089419
	// _IOWR(0x94, 61, struct btrfs_ioctl_get_subvol_rootref_args), a 4096-byte struct.
	btrfsIocGetSubvolRootref = 0xd000943d
)

// btrfsVolArgsV2 is struct btrfs_ioctl_vol_args_v2.
type btrfsVolArgsV2 struct {
	Fd      int64
	Transid uint64
	Flags   uint64
	Unused  [4]uint64
	Name    [btrfsSubvolNameMax + 1]byte
}

// btrfsVolArgs is struct btrfs_ioctl_vol_args.
type btrfsVolArgs struct {
	Fd   int64
	Name [4088]byte
}

// btrfsRootrefArgs is struct btrfs_ioctl_get_subvol_rootref_args.
type btrfsRootrefArgs struct {
	MinTreeID uint64
	Rootref   [255]struct{ TreeID, DirID uint64 }
	NumItems  uint8
	_         [7]uint8
}

var (
	_ [4096 - unsafe.Sizeof(btrfsVolArgsV2{})]byte
	_ [unsafe.Sizeof(btrfsVolArgsV2{}) - 4096]byte
	_ [4096 - unsafe.Sizeof(btrfsVolArgs{})]byte
	_ [unsafe.Sizeof(btrfsRootrefArgs{}) - 4096]byte
	_ [4096 - unsafe.Sizeof(btrfsRootrefArgs{})]byte
)

func ioctlPtr(fd int, req uintptr, arg unsafe.Pointer) error {
	if _, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), req, uintptr(arg)); errno != 0 {
		return errno
	}
	return nil
}

// subvolumeRoot reports whether dir is the root directory of a btrfs subvolume.
func subvolumeRoot(dir string) bool {
	var fs unix.Statfs_t
	if err := unix.Statfs(dir, &fs); err != nil || uint32(fs.Type) != unix.BTRFS_SUPER_MAGIC {
		return false
	}
	var st unix.Stat_t
	return unix.Lstat(dir, &st) == nil && st.Mode&unix.S_IFMT == unix.S_IFDIR && st.Ino == btrfsFirstFreeObjectID
}

// nestedSubvolumes reports whether the subvolume whose root is dir holds other subvolumes:
// a snapshot shows each as an empty directory, so it would not be the tree.
func nestedSubvolumes(dir string) (bool, error) {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return false, err
	}
	defer unix.Close(fd)
	var args btrfsRootrefArgs
	err = ioctlPtr(fd, btrfsIocGetSubvolRootref, unsafe.Pointer(&args))
	if err != nil && err != unix.EOVERFLOW { // EOVERFLOW: more than fit; some do
		return false, &pathError{op: "list subvolumes", path: dir, err: err}
	}
	return args.NumItems > 0, nil
}

// snapshot makes dst (which must not exist) a snapshot of the subvolume whose root is src,
// read-only when readonly is set.
func snapshot(src, dst string, readonly bool) error {
	name := filepath.Base(dst)
	if len(name) > btrfsSubvolNameMax {
		return fmt.Errorf("snapshot name %q too long", name)
	}
	sfd, err := unix.Open(src, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return &pathError{op: "open", path: src, err: err}
	}
	defer unix.Close(sfd)
	dfd, err := unix.Open(filepath.Dir(dst), unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return &pathError{op: "open", path: filepath.Dir(dst), err: err}
	}
	defer unix.Close(dfd)
	args := btrfsVolArgsV2{Fd: int64(sfd)}
	if readonly {
		args.Flags = btrfsSubvolRdonly
	}
	copy(args.Name[:], name)
	if err := ioctlPtr(dfd, btrfsIocSnapCreateV2, unsafe.Pointer(&args)); err != nil {
		return &pathError{op: "snapshot", path: dst, err: err}
	}
	return nil
}

// destroySubvolume removes the subvolume whose root is name, whatever it holds: at once
// where the caller may (root, or user_subvol_rm_allowed), the filesystem freeing its
// extents in the background; else by making it writable, emptying it and removing the
// empty subvolume as a directory (its owner may). A name that is gone is no error.
func destroySubvolume(name string) error {
	var st unix.Stat_t
	if err := unix.Lstat(name, &st); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return nil
		}
		return &pathError{op: "lstat", path: name, err: err}
	}
	if st.Ino != btrfsFirstFreeObjectID || !subvolumeRoot(name) {
		return removeAll(name) // a plain directory: file clones, or a clone cut before its snapshot
	}
	dfd, err := unix.Open(filepath.Dir(name), unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return &pathError{op: "open", path: filepath.Dir(name), err: err}
	}
	defer unix.Close(dfd)
	var args btrfsVolArgs
	copy(args.Name[:], filepath.Base(name))
	switch err := ioctlPtr(dfd, btrfsIocSnapDestroy, unsafe.Pointer(&args)); err {
	case nil, unix.ENOENT:
		return nil
	case unix.EPERM, unix.EACCES:
	default:
		return &pathError{op: "destroy subvolume", path: name, err: err}
	}
	fd, err := unix.Open(name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return &pathError{op: "open", path: name, err: err}
	}
	var flags uint64
	if err := ioctlPtr(fd, btrfsIocSubvolGetflags, unsafe.Pointer(&flags)); err == nil && flags&btrfsSubvolRdonly != 0 {
		flags &^= btrfsSubvolRdonly
		err = ioctlPtr(fd, btrfsIocSubvolSetflags, unsafe.Pointer(&flags))
		if err != nil {
			unix.Close(fd)
			return &pathError{op: "make writable", path: name, err: err}
		}
	}
	unix.Close(fd)
	return removeAll(name)
}

// snapshotsHere reports whether a workspace of parent made in dir can be a pair of btrfs
// snapshots, and if not, why: parent must be the root of a subvolume holding no other, dir
// on the same filesystem and outside parent.
func snapshotsHere(parent, dir string) (bool, string) {
	if !subvolumeRoot(parent) {
		var fs unix.Statfs_t
		if unix.Statfs(parent, &fs) == nil && uint32(fs.Type) == unix.BTRFS_SUPER_MAGIC {
			return false, "the workspace is on btrfs but is not a subvolume (btrfs subvolume create)"
		}
		return false, "the workspace is not on btrfs"
	}
	if nested, err := nestedSubvolumes(parent); err != nil {
		return false, err.Error()
	} else if nested {
		return false, "the workspace's subvolume holds other subvolumes"
	}
	// Whether dir is on the same filesystem shows when the snapshot is made (EXDEV); each
	// subvolume has a device number and fsid of its own.
	var dfs unix.Statfs_t
	if unix.Statfs(filepath.Dir(dir), &dfs) != nil || uint32(dfs.Type) != unix.BTRFS_SUPER_MAGIC {
		return false, "the workspace directory is not on btrfs"
	}
	if fi, err := os.Lstat(filepath.Join(parent, ".git")); err == nil && !fi.IsDir() {
		return false, "the workspace's .git is a file (a linked work tree): its index is outside the snapshot"
	}
	return true, ""
}
