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
// filesystems still do by sharing extents; where it cannot, a plain read and write).
func copyBytes(dst, src int, size int64) error {
	var off, doff int64
	for off < size {
		n, err := unix.CopyFileRange(src, &off, dst, &doff, int(min(size-off, 1<<30)), 0)
		if err == unix.EXDEV || err == unix.ENOSYS || err == unix.EOPNOTSUPP || err == unix.EINVAL {
			return copyLoop(dst, src, off, size)
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
