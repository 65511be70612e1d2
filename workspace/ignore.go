package workspace

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/go-git/go-git/v5/plumbing/format/gitignore"

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
	add := func(name string, domain []string) {
		data, err := os.ReadFile(name)
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
	return h, nil
}

// snapshotFacts gives, without running git, the header facts of a snapshot workspace of
// parent, the root of a btrfs subvolume, where they can be known so; ok is false where a
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
	name := filepath.Join(gitDir, "config")
	if fi, err := os.Lstat(name); err != nil || !fi.Mode().IsRegular() {
		return header{}, false
	}
	data, err := os.ReadFile(name)
	if err != nil {
		return header{}, false
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
