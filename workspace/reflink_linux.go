package workspace

import (
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// reflink clones the extents of the open file src into the new empty file dst (FICLONE).
// It returns errNoReflink when the filesystem cannot share extents between them.
func reflink(dst, src int, _, _ string) error {
	err := unix.IoctlFileClone(dst, src)
	switch err {
	case nil:
		return nil
	case unix.EOPNOTSUPP, unix.EXDEV, unix.EINVAL, unix.ENOTTY, unix.ENOSYS, unix.EPERM:
		return errNoReflink
	}
	return err
}

// reflinkCreates is whether reflink makes dst itself (clonefile) rather than filling an
// open one.
const reflinkCreates = false

// copyBytes copies size bytes of src into dst from offset 0 (copy_file_range, which some
// filesystems still do by sharing extents; where it cannot, a plain read and write). Only
// src's data is copied: its holes (SEEK_DATA, SEEK_HOLE) stay holes in dst, as cp keeps them,
// so a file a sandbox made with truncate costs the host no disk when it is copied (a plain
// copy_file_range writes a hole's zeros out).
func copyBytes(dst, src int, size int64) error {
	end := size
	for off := int64(0); off < size; {
		data, err := unix.Seek(src, off, unix.SEEK_DATA)
		if err == unix.ENXIO {
			break // no data past off: the rest is a hole
		}
		if err != nil {
			// A filesystem that cannot tell: the rest is copied as it reads.
			return copyRange(dst, src, off, size)
		}
		if data >= size {
			break
		}
		hole, err := unix.Seek(src, data, unix.SEEK_HOLE)
		if err != nil {
			return copyRange(dst, src, data, size)
		}
		hole = min(hole, size)
		if err := copyRange(dst, src, data, hole); err != nil {
			return err
		}
		off = hole
	}
	// The file's length, a trailing hole included; a source that shrank under us ends where
	// it ends now, as a plain copy would.
	var st unix.Stat_t
	if err := unix.Fstat(src, &st); err == nil && st.Size < end {
		end = st.Size
	}
	return unix.Ftruncate(dst, end)
}

// copyRange copies src's bytes from off up to end into dst at the same offsets.
func copyRange(dst, src int, off, end int64) error {
	doff := off
	for off < end {
		n, err := unix.CopyFileRange(src, &off, dst, &doff, int(min(end-off, 1<<30)), 0)
		if err == unix.EXDEV || err == unix.ENOSYS || err == unix.EOPNOTSUPP || err == unix.EINVAL {
			return copyLoop(dst, src, off, end)
		}
		if err != nil {
			return err
		}
		if n == 0 {
			break // the file shrank under us
		}
	}
	return nil
}

// futimens sets the times of the open file fd (utimensat with no path).
func futimens(fd int, _ string, ts []unix.Timespec) error {
	_, _, errno := unix.Syscall6(unix.SYS_UTIMENSAT, uintptr(fd), 0, uintptr(unsafe.Pointer(&ts[0])), 0, 0, 0)
	if errno != 0 {
		return errno
	}
	return nil
}

// tickClock is the clock the kernel stamps file times with (the coarse realtime clock),
// in nanoseconds: a file's ctime is never later than its reading at the change.
func tickClock() int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_REALTIME_COARSE, &ts); err != nil {
		return time.Now().UnixNano()
	}
	return ts.Nano()
}
