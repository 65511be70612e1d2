package ssh

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/paddockhq/paddock/internal/tarx"
	xssh "golang.org/x/crypto/ssh"
)

// execFiles moves files with commands on exec channels, for a box with no SFTP subsystem:
// a single file with cat (its content hash checked on the box before it is renamed into
// place), a tree as a tar stream (tar -x and tar -c on the box). Every word of a command
// that names a path is quoted with Quote; nothing the box lists is ever put in a command.
//
// The commands are POSIX sh scripts, each on one line, run as sh -c SCRIPT: the login shell
// that reads the exec request may be zsh (no word splitting), fish or csh (other syntax),
// and all it has to do then is run sh.
type execFiles struct{ c *Conn }

// shell is the exec request that runs the script with sh, whatever the login shell.
func shell(script string) string { return "exec sh -c " + Quote(script) }

func (x *execFiles) close() error { return nil }

// run runs the sh script on a new session channel, stdin read from in (nil: none), stdout
// written to out (nil: discarded). Its error holds the end of what it wrote to stderr.
func (x *execFiles) run(ctx context.Context, script string, in io.Reader, out io.Writer) error {
	s, err := x.c.NewSession()
	if err != nil {
		return fmt.Errorf("open a session: %w", err)
	}
	var errOut tail
	s.Stdin, s.Stdout, s.Stderr = in, out, &errOut
	return commandError(runCtx(ctx, s, shell(script)), errOut.last())
}

// commandError is a command's error with what it wrote to stderr.
func commandError(err error, stderr []byte) error {
	if err == nil {
		return nil
	}
	if msg := strings.TrimSpace(string(stderr)); msg != "" {
		return fmt.Errorf("%w: %s", err, msg)
	}
	return err
}

// exitStatus is the exit status in err, or -1.
func exitStatus(err error) int {
	var ee *xssh.ExitError
	if errors.As(err, &ee) {
		return ee.ExitStatus()
	}
	return -1
}

// lstatScript makes mkdir (when not "") if it is not there, then prints one line per path:
// "-" for a path that is not there, else the mode, owner and size columns of ls -ldn (POSIX
// ls; the name, which may hold anything, is not printed).
func lstatScript(mkdir string, mode fs.FileMode, paths []string) string {
	var b strings.Builder
	if mkdir != "" {
		d := Quote(mkdir)
		fmt.Fprintf(&b, "[ -e %s ] || [ -h %s ] || { mkdir -p -- %s && chmod %04o -- %s; } || exit 1; ", d, d, d, mode.Perm(), d)
	}
	b.WriteString("set -f; for p in")
	for _, p := range paths {
		b.WriteString(" " + Quote(p))
	}
	b.WriteString(`; do if [ -e "$p" ] || [ -h "$p" ]; then l=$(LC_ALL=C ls -ldn -- "$p" 2>/dev/null) || l=; set -- $l; printf '%s %s %s\n' "${1:-?}" "${3:-?}" "${5:-?}"; else echo -; fi; done`)
	return b.String()
}

// parseStat reads one line of lstatScript's output.
func parseStat(line string) (rstat, error) {
	if line == "-" {
		return rstat{}, nil
	}
	f := strings.Fields(line)
	if len(f) != 3 || len(f[0]) < 10 {
		return rstat{}, fmt.Errorf("cannot read %q as ls -ldn's mode, owner and size", line)
	}
	mode, err := parseMode(f[0][:10])
	if err != nil {
		return rstat{}, err
	}
	uid, err := strconv.Atoi(f[1])
	if err != nil || uid < 0 {
		return rstat{}, fmt.Errorf("cannot read the owner %q", f[1])
	}
	size, err := strconv.ParseInt(f[2], 10, 64)
	if err != nil || size < 0 {
		// A device shows "major, minor" there: no size, and none needed.
		if mode.IsRegular() {
			return rstat{}, fmt.Errorf("cannot read the size %q", f[2])
		}
		size = 0
	}
	return rstat{exists: true, mode: mode, size: size, uid: uid}, nil
}

// parseMode reads ls -l's ten mode characters.
func parseMode(s string) (fs.FileMode, error) {
	var m fs.FileMode
	switch s[0] {
	case '-':
	case 'd':
		m = fs.ModeDir
	case 'l':
		m = fs.ModeSymlink
	case 'p':
		m = fs.ModeNamedPipe
	case 's':
		m = fs.ModeSocket
	case 'c':
		m = fs.ModeDevice | fs.ModeCharDevice
	case 'b':
		m = fs.ModeDevice
	default:
		m = fs.ModeIrregular
	}
	// Each triple: r, w, then x or a special letter (s/S setuid/setgid, t/T sticky;
	// lowercase: executable too).
	special := []fs.FileMode{fs.ModeSetuid, fs.ModeSetgid, fs.ModeSticky}
	for i := 0; i < 3; i++ {
		r, w, x := s[1+3*i], s[2+3*i], s[3+3*i]
		shift := uint(6 - 3*i)
		switch r {
		case 'r':
			m |= 4 << shift
		case '-':
		default:
			return 0, fmt.Errorf("cannot read the mode %q", s)
		}
		switch w {
		case 'w':
			m |= 2 << shift
		case '-':
		default:
			return 0, fmt.Errorf("cannot read the mode %q", s)
		}
		sp := byte('s')
		if i == 2 {
			sp = 't'
		}
		switch x {
		case 'x':
			m |= 1 << shift
		case '-':
		case sp:
			m |= 1<<shift | special[i]
		case sp - 'a' + 'A':
			m |= special[i]
		default:
			return 0, fmt.Errorf("cannot read the mode %q", s)
		}
	}
	return m, nil
}

func (x *execFiles) lstat(ctx context.Context, mkdir string, mode fs.FileMode, paths ...string) ([]rstat, error) {
	var out bytes.Buffer
	if err := x.run(ctx, lstatScript(mkdir, mode, paths), nil, &out); err != nil {
		return nil, fmt.Errorf("look at %s: %w", strings.Join(paths, ", "), err)
	}
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if len(lines) != len(paths) {
		return nil, fmt.Errorf("look at %s: %d lines for %d paths: %q", strings.Join(paths, ", "), len(lines), len(paths), out.String())
	}
	st := make([]rstat, len(paths))
	for i, l := range lines {
		var err error
		if st[i], err = parseStat(l); err != nil {
			return nil, fmt.Errorf("look at %s: %w", paths[i], err)
		}
	}
	return st, nil
}

// putScript writes stdin to a new temporary name beside remote (noclobber: never over
// something there), checks its content hash (sha256sum or shasum; with neither, its size),
// gives it mode and renames it over remote. On any failure the temporary goes.
func putScript(remote, tmp string, size int64, sum string, mode fs.FileMode) string {
	return strings.Join([]string{
		"t=" + Quote(tmp),
		"set -C",
		`cat > "$t" || { rm -f -- "$t"; exit 1; }`,
		"h=",
		`if command -v sha256sum >/dev/null 2>&1; then h=$(sha256sum < "$t") && h=${h%% *}; elif command -v shasum >/dev/null 2>&1; then h=$(shasum -a 256 < "$t") && h=${h%% *}; fi`,
		fmt.Sprintf(`if [ -n "$h" ]; then [ "$h" = %s ] || { echo "the copy's content hash on the box is $h, not %s" >&2; rm -f -- "$t"; exit 1; }; `+
			`else n=$(wc -c < "$t") && [ $n -eq %d ] || { echo "the copy on the box has $n bytes, not %d" >&2; rm -f -- "$t"; exit 1; }; fi`, sum, sum, size, size),
		fmt.Sprintf(`chmod %04o -- "$t" && mv -f -- "$t" %s || { rm -f -- "$t"; exit 1; }`, mode.Perm(), Quote(remote)),
	}, "; ")
}

func (x *execFiles) put(ctx context.Context, local, remote string, size int64, sum string, mode fs.FileMode) error {
	src, err := os.Open(local)
	if err != nil {
		return err
	}
	defer src.Close()
	var rnd [6]byte
	rand.Read(rnd[:])
	tmp := remote + ".tmp-" + hex.EncodeToString(rnd[:])
	if err := x.run(ctx, putScript(remote, tmp, size, sum, mode), src, nil); err != nil {
		return fmt.Errorf("copy to %s over exec: %w", remote, err)
	}
	return nil
}

// needTar makes a command exit 127 with a word on stderr when the box has no tar.
const needTar = "command -v tar >/dev/null 2>&1 || { echo 'no tar on the box' >&2; exit 127; }; "

// mkTree makes the directory and reads its modification time from a tar stream of it, empty:
// tar is what fills it, so a box without tar is found out before anything is sent.
func (x *execFiles) mkTree(ctx context.Context, remote string) (int64, error) {
	cmd := needTar + fmt.Sprintf("mkdir -p -- %s && mkdir -- %s && cd %s && exec tar -cf - .",
		Quote(path.Dir(remote)), Quote(remote), Quote(remote))
	var out bytes.Buffer
	if err := x.run(ctx, cmd, nil, &out); err != nil {
		if exitStatus(err) == 127 {
			return 0, ErrNoTar
		}
		return 0, fmt.Errorf("%s (it must not exist): %w", remote, err)
	}
	h, err := tar.NewReader(&out).Next()
	if err != nil {
		return 0, fmt.Errorf("%s: the box's tar stream of it: %w", remote, err)
	}
	return h.ModTime.Unix(), nil
}

// treeRWX is the mode a directory is sent with: its own, plus the owner's rwx, so that it
// can be filled; directories that lack some are given their own mode after.
const treeRWX = 0o700

// send writes the items as one tar stream into tar -x on the box, then gives the
// directories that lack the owner's rwx their own modes, deepest first.
func (x *execFiles) send(ctx context.Context, localRoot, remote string, items []item) error {
	s, err := x.c.NewSession()
	if err != nil {
		return fmt.Errorf("open a session: %w", err)
	}
	defer s.Close()
	stop := context.AfterFunc(ctx, func() { s.Close() })
	defer stop()
	stdin, err := s.StdinPipe()
	if err != nil {
		return err
	}
	var errOut tail
	s.Stderr = &errOut
	// -p: the modes as sent, whatever the umask; -o: owned by the user, whatever the stream
	// says (root would otherwise take its uids).
	if err := s.Start(shell(needTar + "cd " + Quote(remote) + " && exec tar -x -p -o -f -")); err != nil {
		return fmt.Errorf("start tar -x: %w", err)
	}
	werr := writeTar(stdin, localRoot, items)
	stdin.Close()
	err = commandError(s.Wait(), errOut.last())
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if exitStatus(err) == 127 {
		return ErrNoTar
	}
	if err != nil {
		return fmt.Errorf("tar -x on the box: %w", err)
	}
	if werr != nil {
		return werr
	}
	var fix strings.Builder
	for _, it := range slices.Backward(items) {
		if it.mode.IsDir() && it.mode.Perm()&treeRWX != treeRWX {
			fmt.Fprintf(&fix, "chmod %04o -- %s || exit 1\n", it.mode.Perm(), Quote(path.Join(remote, it.rel)))
		}
	}
	if fix.Len() > 0 {
		// On stdin: the list may be longer than a command line.
		if err := x.run(ctx, "exec sh", strings.NewReader(fix.String()), nil); err != nil {
			return fmt.Errorf("the directories' modes: %w", err)
		}
	}
	return nil
}

// writeTar writes the items as a tar stream, contents read from under root.
func writeTar(w io.Writer, root string, items []item) error {
	tw := tar.NewWriter(w)
	for _, it := range items {
		h := &tar.Header{Name: it.rel, Mode: int64(it.mode.Perm()), ModTime: time.Unix(it.mtime, 0), Format: tar.FormatGNU}
		switch {
		case it.mode.IsDir():
			h.Typeflag, h.Name, h.Mode = tar.TypeDir, it.rel+"/", h.Mode|treeRWX
		case it.mode&fs.ModeSymlink != 0:
			h.Typeflag, h.Linkname, h.Mode = tar.TypeSymlink, it.link, 0o777
		case it.mode.IsRegular():
			h.Typeflag, h.Size = tar.TypeReg, it.size
		default:
			continue
		}
		if err := tw.WriteHeader(h); err != nil {
			return fmt.Errorf("%s: %w", it.rel, err)
		}
		if h.Typeflag == tar.TypeReg {
			if err := copyFile(tw, filepath.Join(root, filepath.FromSlash(it.rel)), it.size); err != nil {
				return fmt.Errorf("%s: %w", it.rel, err)
			}
		}
	}
	return tw.Close()
}

// copyFile copies a local file of size bytes to w; a file that changed size is an error.
func copyFile(w io.Writer, name string, size int64) error {
	f, err := os.Open(name)
	if err != nil {
		return err
	}
	defer f.Close()
	n, err := io.Copy(w, io.LimitReader(f, size))
	if err == nil && n != size {
		err = fmt.Errorf("%d bytes, not %d: it changed while it was sent", n, size)
	}
	return err
}

// walk reads the tree as a tar stream from tar -c on the box, an entry at a time; a file's
// content is the stream's until the next entry.
func (x *execFiles) walk(ctx context.Context, remote string, fn func(listed) error) error {
	s, err := x.c.NewSession()
	if err != nil {
		return fmt.Errorf("open a session: %w", err)
	}
	defer s.Close()
	stop := context.AfterFunc(ctx, func() { s.Close() })
	defer stop()
	stdout, err := s.StdoutPipe()
	if err != nil {
		return err
	}
	var errOut tail
	s.Stderr = &errOut
	if err := s.Start(shell(needTar + "cd " + Quote(remote) + " && exec tar -c -f - .")); err != nil {
		return fmt.Errorf("start tar -c: %w", err)
	}
	rerr := readTar(stdout, fn)
	if rerr != nil {
		s.Close()
	} else {
		io.Copy(io.Discard, stdout) // what follows the end marker
	}
	err = commandError(s.Wait(), errOut.last())
	switch {
	case ctx.Err() != nil:
		return ctx.Err()
	case rerr != nil:
		return rerr
	case exitStatus(err) == 127:
		return ErrNoTar
	case err != nil:
		return fmt.Errorf("tar -c on the box: %w", err)
	}
	return nil
}

// readTar calls fn on each entry of a tar stream of a tree (names as tar -c . writes them:
// "./a", "./d/"). A hard link is a regular file with the size of the one it shares content
// with, listed before.
func readTar(r io.Reader, fn func(listed) error) error {
	tr := tar.NewReader(r)
	sizes := map[string]int64{}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("the box's tar stream: %w", err)
		}
		rel := tarName(h.Name)
		if rel == "" {
			continue // the root
		}
		if tarx.Sparse(h) {
			return fmt.Errorf("the box's tar stream: %q is a sparse file, which tar -c does not write", rel)
		}
		e := listed{rel: rel, size: h.Size, mtime: h.ModTime.Unix()}
		switch h.Typeflag {
		case tar.TypeDir:
			e.mode = fs.ModeDir | fs.FileMode(h.Mode).Perm()
		case tar.TypeSymlink:
			e.mode, e.link = fs.ModeSymlink|0o777, h.Linkname
		case tar.TypeReg: // archive/tar reads the old regular type (TypeRegA) as this one
			e.mode = fs.FileMode(h.Mode).Perm()
			e.open = func() (io.ReadCloser, error) { return io.NopCloser(tr), nil }
			sizes[rel] = h.Size
		case tar.TypeLink:
			e.mode, e.same = fs.FileMode(h.Mode).Perm(), tarName(h.Linkname)
			size, ok := sizes[e.same]
			if !ok {
				return fmt.Errorf("the box's tar stream: %q is a hard link to %q, which it did not list before", rel, e.same)
			}
			e.size = size
			sizes[rel] = size
		default:
			e.mode = fs.ModeIrregular | fs.FileMode(h.Mode).Perm()
		}
		if err := fn(e); err != nil {
			return err
		}
	}
}

// tarName is a member's name as a slash path under the root: its "./" and final "/"
// dropped; "" for the root. It is not judged here: the caller does.
func tarName(name string) string {
	name = strings.TrimSuffix(name, "/")
	if name == "." {
		return ""
	}
	return strings.TrimPrefix(name, "./")
}

func (x *execFiles) removeAll(ctx context.Context, remote string) error {
	if err := x.run(ctx, "rm -rf -- "+Quote(remote), nil, nil); err != nil {
		return fmt.Errorf("rm -rf %s: %w", remote, err)
	}
	return nil
}
