package workspace

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/go-git/go-git/v5/plumbing/format/gitignore"
	"golang.org/x/sys/unix"

	"github.com/paddockhq/paddock/internal/gitexec"
)

// ignoreFacts records, for a parent in a git work tree, the ignore rules that apply to it
// but that its copy does not hold: .git/info/exclude, the global excludes file, and the
// .gitignore files of the directories above the parent inside the work tree.
func ignoreFacts(ctx context.Context, parent string) (header, error) {
	var h header
	// One git for the three facts: outside a work tree it fails (or says false).
	out, err := gitexec.Command(ctx, parent, "-c", "core.quotepath=off",
		"rev-parse", "--is-inside-work-tree", "--show-toplevel", "--git-path", "info/exclude").Output()
	lines := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
	if err != nil || len(lines) != 3 || lines[0] != "true" {
		return h, nil
	}
	h.Git = true
	top, exclude := lines[1], lines[2]
	if rp, err := filepath.EvalSymlinks(parent); err == nil {
		if rel, err := filepath.Rel(top, rp); err == nil && rel != "." && !strings.HasPrefix(rel, "..") {
			h.Prefix = strings.Split(filepath.ToSlash(rel), "/")
		}
	}
	var tooLarge error
	add := func(name string, domain []string) {
		data, err := readSmall(name, maxIgnoreFile, true)
		if errors.Is(err, errTooLarge) && tooLarge == nil {
			tooLarge = fmt.Errorf("the ignore file %s is larger than %d bytes", name, maxIgnoreFile)
		}
		if err != nil {
			return
		}
		var ps []string
		for _, l := range strings.Split(string(data), "\n") {
			l = strings.TrimSuffix(l, "\r")
			if l != "" && !strings.HasPrefix(l, "#") && strings.TrimSpace(l) != "" {
				ps = append(ps, l)
			}
		}
		if len(ps) > 0 {
			h.Ignore = append(h.Ignore, ignoreSet{Domain: domain, Patterns: ps})
		}
	}
	// Lowest priority first: the global file, info/exclude, then .gitignore files downwards.
	if ex := excludesFile(ctx, parent); ex != "" {
		add(ex, nil)
	}
	if !filepath.IsAbs(exclude) {
		exclude = filepath.Join(parent, exclude)
	}
	add(exclude, nil)
	for i := range h.Prefix {
		add(filepath.Join(append([]string{top}, append(h.Prefix[:i:i], ".gitignore")...)...), h.Prefix[:i:i])
	}
	if tooLarge != nil {
		return header{}, tooLarge
	}
	return h, nil
}

// The most bytes of a repository's configuration snapshotFacts scans, and of an ignore
// file ignoreFacts records: the parent's program writes them, and may make them sparse
// files of any size.
const (
	maxGitConfig  = 1 << 20
	maxIgnoreFile = 16 << 20
)

var errTooLarge = errors.New("file too large")

// readSmall reads the regular file name, of at most limit bytes (errTooLarge if larger,
// found before it is read). It opens without blocking, so a FIFO in its place is refused
// rather than waited on, and follows a symlink in its last element only when follow is set.
func readSmall(name string, limit int64, follow bool) ([]byte, error) {
	flags := unix.O_RDONLY | unix.O_NONBLOCK | unix.O_NOCTTY | unix.O_CLOEXEC
	if !follow {
		flags |= unix.O_NOFOLLOW
	}
	fd, err := unix.Open(name, flags, 0)
	if err != nil {
		return nil, &pathError{op: "open", path: name, err: err}
	}
	f := os.NewFile(uintptr(fd), name)
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, &pathError{op: "fstat", path: name, err: err}
	}
	if kindOfMode(uint32(st.Mode)) != File {
		return nil, &pathError{op: "read", path: name, err: unix.EINVAL}
	}
	if st.Size > limit {
		return nil, errTooLarge
	}
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_SETFL, 0); err != nil {
		return nil, &pathError{op: "fcntl", path: name, err: err}
	}
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > limit {
		return nil, errTooLarge // it grew while read
	}
	return data, nil
}

// snapshotFacts gives, without running git, the header facts of a snapshot workspace of
// parent, the root of a btrfs subvolume, read from its read-only base snapshot (as parent
// was when snapshotted; "parent" below), where they can be known so; ok is false where a
// git must read them:
//
//   - parent holds no .git: there are none. Git looks for a repository upwards only as far
//     as the device number stays the same (GIT_DISCOVERY_ACROSS_FILESYSTEM, which gitexec
//     never passes), and each subvolume has one of its own: none above parent is found.
//   - parent holds a .git directory that lies wholly in the subvolume, its configuration
//     naming no work tree and including no file (a plain scan: a mention of either, even in
//     a comment, sends it to git): the base snapshot holds the repository as it was, so the
//     hand-back reads the facts from there (GitFromBase), as it lists the base with git.
func snapshotFacts(parent string) (header, bool) {
	gitDir := filepath.Join(parent, ".git")
	fi, err := os.Lstat(gitDir)
	if errors.Is(err, fs.ErrNotExist) {
		return header{}, true
	}
	if err != nil || !fi.IsDir() {
		return header{}, false
	}
	if _, err := os.Lstat(filepath.Join(gitDir, "commondir")); !errors.Is(err, fs.ErrNotExist) {
		return header{}, false // the repository's files lie elsewhere
	}
	// info/exclude is read through no symlink that could lead out of the snapshot.
	for _, name := range []string{"info", "info/exclude"} {
		if fi, err := os.Lstat(filepath.Join(gitDir, name)); err == nil && fi.Mode()&fs.ModeSymlink != 0 || err != nil && !errors.Is(err, fs.ErrNotExist) {
			return header{}, false
		}
	}
	data, err := readSmall(filepath.Join(gitDir, "config"), maxGitConfig, false)
	if err != nil {
		return header{}, false // larger than any hand-made configuration: git reads it
	}
	low := bytes.ToLower(data)
	if bytes.Contains(low, []byte("worktree")) || bytes.Contains(low, []byte("include")) {
		return header{}, false
	}
	return header{GitFromBase: true}, true
}

// excludesFile is the excludes file git applies in root: the one the repository's or the
// user's global configuration names, else git's default ($XDG_CONFIG_HOME/git/ignore, or
// ~/.config/git/ignore); "" when there is none.
func excludesFile(ctx context.Context, root string) string {
	if ex, err := gitexec.ConfigPath(ctx, root, "core.excludesFile"); err == nil && ex != "" {
		return ex
	}
	if x := os.Getenv("XDG_CONFIG_HOME"); x != "" {
		return filepath.Join(x, "git", "ignore")
	}
	if home, err := os.UserHomeDir(); err == nil {
		return filepath.Join(home, ".config", "git", "ignore")
	}
	return ""
}

// patterns are the recorded ignore rules, parsed.
func (h *header) patterns() []gitignore.Pattern {
	var ps []gitignore.Pattern
	for _, s := range h.Ignore {
		for _, p := range s.Patterns {
			ps = append(ps, gitignore.ParsePattern(p, s.Domain))
		}
	}
	return ps
}
