package workspace

import (
	"golang.org/x/sys/unix"
)

// facts are the stat facts that show a file changed without reading it: a write changes
// size, mtime or ctime; a replace changes the inode; a chmod changes mode and ctime.
type facts struct {
	Mode  uint32 // type and permission bits, as st_mode
	Size  int64
	Mtime int64 // nanoseconds since the epoch
	Ctime int64
	Ino   uint64
}

func factsOf(st *unix.Stat_t) facts {
	return facts{
		Mode:  uint32(st.Mode),
		Size:  st.Size,
		Mtime: st.Mtim.Nano(),
		Ctime: st.Ctim.Nano(),
		Ino:   st.Ino,
	}
}

func kindOfMode(m uint32) Kind {
	switch m & unix.S_IFMT {
	case unix.S_IFREG:
		return File
	case unix.S_IFLNK:
		return Symlink
	case unix.S_IFDIR:
		return Dir
	}
	return Absent
}

// lstatFacts returns the facts of name, or Absent kind when it does not exist.
func lstatFacts(name string) (facts, Kind, error) {
	var st unix.Stat_t
	if err := unix.Lstat(name, &st); err != nil {
		if err == unix.ENOENT || err == unix.ENOTDIR {
			return facts{}, Absent, nil
		}
		return facts{}, Absent, &pathError{op: "lstat", path: name, err: err}
	}
	f := factsOf(&st)
	return f, kindOfMode(f.Mode), nil
}

type pathError struct {
	op, path string
	err      error
}

func (e *pathError) Error() string { return e.op + " " + e.path + ": " + e.err.Error() }
func (e *pathError) Unwrap() error { return e.err }
