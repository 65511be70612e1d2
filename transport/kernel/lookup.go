//go:build linux

package kernel

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// defaultPath is searched when a command's environment has no PATH, as a shell would.
const defaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// notStarted is why a command did not start: its shell status and a message.
type notStarted struct {
	code int
	msg  string
}

func (e *notStarted) Error() string { return e.msg }

// lookPath finds the program a command names, as bash does: a name with a slash is taken as
// a path (relative to cwd); another is searched on PATH, whose empty or relative entries
// are relative to cwd too. The first executable regular file wins; without one, a file
// found but not executable gives 126, nothing found 127.
func lookPath(name, pathEnv, cwd string, hasPath bool) (string, *notStarted) {
	if name == "" {
		return "", &notStarted{codeNotFound, "paddock-kernel: : command not found"}
	}
	if strings.Contains(name, "/") {
		p := name
		if !filepath.IsAbs(p) {
			p = filepath.Join(cwd, p)
		}
		fi, err := os.Stat(p)
		switch {
		case err != nil && errors.Is(err, os.ErrNotExist):
			return "", &notStarted{codeNotFound, "paddock-kernel: " + name + ": No such file or directory"}
		case err != nil:
			return "", &notStarted{codeNotExecutable, "paddock-kernel: " + name + ": " + errText(err)}
		case fi.IsDir():
			return "", &notStarted{codeNotExecutable, "paddock-kernel: " + name + ": Is a directory"}
		case !executable(p):
			return "", &notStarted{codeNotExecutable, "paddock-kernel: " + name + ": Permission denied"}
		}
		return p, nil
	}
	if !hasPath {
		pathEnv = defaultPath
	}
	var denied string
	for _, dir := range filepath.SplitList(pathEnv) {
		if dir == "" {
			dir = "."
		}
		if !filepath.IsAbs(dir) {
			dir = filepath.Join(cwd, dir)
		}
		p := filepath.Join(dir, name)
		fi, err := os.Stat(p)
		if err != nil || fi.IsDir() {
			continue
		}
		if executable(p) {
			return p, nil
		}
		if denied == "" {
			denied = p
		}
	}
	if denied != "" {
		return "", &notStarted{codeNotExecutable, "paddock-kernel: " + denied + ": Permission denied"}
	}
	return "", &notStarted{codeNotFound, "paddock-kernel: " + name + ": command not found"}
}

// executable reports whether the kernel may execute path (the children run as the kernel's
// user).
func executable(path string) bool {
	return unix.Faccessat(unix.AT_FDCWD, path, unix.X_OK, unix.AT_EACCESS) == nil
}

// errText is an error's system text alone, without the operation and path os adds.
func errText(err error) string {
	var errno syscall.Errno
	if errors.As(err, &errno) {
		s := errno.Error()
		return strings.ToUpper(s[:1]) + s[1:]
	}
	return err.Error()
}
