package workspace

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"github.com/go-git/go-git/v5/plumbing/format/gitignore"

	"github.com/paddockhq/paddock/internal/gitexec"
)

// MaxFiles is the most files (regular files and symlinks) an isolated workspace holds.
const MaxFiles = 100_000

// Kind is what a path holds.
type Kind uint8

// Kinds of entry. Absent is used by the hand-back for a path that holds nothing.
const (
	Absent Kind = iota
	File
	Symlink
	Dir
)

func (k Kind) String() string {
	switch k {
	case File:
		return "file"
	case Symlink:
		return "symlink"
	case Dir:
		return "dir"
	}
	return "absent"
}

// MarshalText is the kind's name, as String says it.
func (k Kind) MarshalText() ([]byte, error) { return []byte(k.String()), nil }

// Entry is one listed path, relative to the listed root, with slashes.
type Entry struct {
	Path string `json:"path"`
	Kind Kind   `json:"kind"`
}

// ListOptions adjusts List.
type ListOptions struct {
	// MaxFiles overrides the limit of MaxFiles when positive (tests use a small one).
	MaxFiles int
	// Exclude names paths (relative, with slashes) left out with everything under them.
	Exclude []string
}

// List returns the files of root that an isolated workspace copies, sorted by path: the
// tracked and untracked files that are not ignored, with `git ls-files` semantics when root
// is in a git work tree and every .gitignore file applied otherwise. It never lists .git or
// an ignored directory; symlinks are listed as symlinks, not followed; directories are
// listed too, so empty ones are kept. More than MaxFiles files is refused with an *Error of
// Code CodeTooManyFiles.
func List(ctx context.Context, root string, opts ListOptions) ([]Entry, error) {
	return list(ctx, root, opts, nil)
}

// list is List with git's rules or without them as useGit says, or as root is in a work
// tree or not when it is nil.
func list(ctx context.Context, root string, opts ListOptions, useGit *bool) ([]Entry, error) {
	fi, err := os.Stat(root)
	if err != nil {
		return nil, &Error{Reason: CodeNotDirectory, Msg: fmt.Sprintf("workspace %s cannot be listed", root), Err: err}
	}
	if !fi.IsDir() {
		return nil, &Error{Reason: CodeNotDirectory, Msg: fmt.Sprintf("workspace %s is not a directory", root)}
	}
	max := opts.MaxFiles
	if max <= 0 {
		max = MaxFiles
	}
	l := &lister{root: root, max: max, exclude: opts.Exclude}
	if useGit != nil && *useGit || useGit == nil && inGitWorkTree(ctx, root) {
		err = l.git(ctx)
	} else {
		err = l.walk(ctx)
	}
	if err != nil {
		return nil, err
	}
	slices.SortFunc(l.out, func(a, b Entry) int { return strings.Compare(a.Path, b.Path) })
	l.out = slices.CompactFunc(l.out, func(a, b Entry) bool { return a.Path == b.Path })
	return l.out, nil
}

type lister struct {
	root    string
	max     int
	exclude []string
	files   int
	out     []Entry
}

func (l *lister) excluded(rel string) bool {
	for _, x := range l.exclude {
		if rel == x || strings.HasPrefix(rel, x+"/") {
			return true
		}
	}
	return false
}

func (l *lister) add(rel string, k Kind) error {
	if k != Dir {
		l.files++
		if l.files > l.max {
			return &Error{Reason: CodeTooManyFiles, Msg: fmt.Sprintf(
				"the workspace holds more than %d files, too many to copy for an isolated workspace; use workspace=shared instead", l.max)}
		}
	}
	l.out = append(l.out, Entry{Path: rel, Kind: k})
	return nil
}

func kindOf(m fs.FileMode) Kind {
	switch {
	case m.IsRegular():
		return File
	case m&fs.ModeSymlink != 0:
		return Symlink
	case m.IsDir():
		return Dir
	}
	return Absent // fifos, sockets, devices: never copied
}

func inGitWorkTree(ctx context.Context, root string) bool {
	out, err := gitexec.Command(ctx, root, "rev-parse", "--is-inside-work-tree").Output()
	return err == nil && strings.TrimSpace(string(out)) == "true"
}

// gitLines runs a hardened git on root's repository (see gitexec) and returns the
// NUL-separated names it prints, paths left unquoted.
func gitLines(ctx context.Context, root string, args ...string) ([]string, error) {
	cmd := gitexec.Command(ctx, root, append([]string{"-c", "core.quotepath=off"}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("git %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	var lines []string
	for _, s := range bytes.Split(out, []byte{0}) {
		if len(s) > 0 {
			lines = append(lines, string(s))
		}
	}
	return lines, nil
}

// git lists root with git's rules: files from `git ls-files --cached --others
// --exclude-standard`; directories from a walk that skips .git, nested repositories and the
// directories git reports as ignored. The walk also gives each file's kind, so the files
// need no stat of their own, and it runs while git lists the files.
func (l *lister) git(ctx context.Context) error {
	var files []string
	var filesErr error
	listed := make(chan struct{})
	// The excludes file is given on the command line: the global configuration that would
	// name it is not read.
	var excludes []string
	if ex := excludesFile(ctx, l.root); ex != "" {
		excludes = []string{"-c", "core.excludesFile=" + ex}
	}
	go func() {
		defer close(listed)
		files, filesErr = gitLines(ctx, l.root, append(excludes, "ls-files", "-z", "--cached", "--others", "--exclude-standard")...)
	}()
	ignored, err := gitLines(ctx, l.root, append(excludes, "ls-files", "-z", "--others", "--ignored", "--exclude-standard", "--directory")...)
	if err != nil {
		<-listed
		return err
	}
	ignoredDirs := map[string]bool{}
	for _, p := range ignored {
		if strings.HasSuffix(p, "/") {
			ignoredDirs[strings.TrimSuffix(p, "/")] = true
		}
	}
	kinds := map[string]Kind{} // every entry of the walked directories
	dirs := map[string]bool{}
	var walk func(rel string) error
	walk = func(rel string) error {
		des, err := os.ReadDir(filepath.Join(l.root, filepath.FromSlash(rel)))
		if err != nil {
			return err
		}
		for _, de := range des {
			sub := path.Join(rel, de.Name())
			k := kindOf(de.Type())
			kinds[sub] = k
			if k != Dir || de.Name() == ".git" || ignoredDirs[sub] || l.excluded(sub) {
				continue
			}
			dirs[sub] = true
			if _, err := os.Lstat(filepath.Join(l.root, filepath.FromSlash(sub), ".git")); err == nil {
				continue // a nested repository
			}
			if err := walk(sub); err != nil {
				return err
			}
		}
		return nil
	}
	err = walk("")
	<-listed
	if err != nil {
		return err
	}
	if filesErr != nil {
		return filesErr
	}
	for _, rel := range files {
		if err := ctx.Err(); err != nil {
			return err
		}
		// An untracked nested repository is listed as "dir/": the directory, as the walk
		// found it.
		rel = strings.TrimSuffix(rel, "/")
		if l.excluded(rel) || hasGitElem(rel) || !filepath.IsLocal(filepath.FromSlash(rel)) {
			continue // a name out of root is no file of it, whatever the repository says
		}
		k, ok := kinds[rel]
		if !ok {
			fi, err := os.Lstat(filepath.Join(l.root, filepath.FromSlash(rel)))
			if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
				continue // tracked, removed from the work tree
			}
			if err != nil {
				return err
			}
			k = kindOf(fi.Mode())
		}
		switch k {
		case Absent:
			continue // tracked but gone, or a fifo, socket or device
		case Dir: // a submodule: its own repository, kept as a directory
			dirs[rel] = true
			continue
		}
		if err := l.add(rel, k); err != nil {
			return err
		}
		for d := path.Dir(rel); d != "." && !dirs[d]; d = path.Dir(d) {
			dirs[d] = true
		}
	}
	for d := range dirs {
		l.out = append(l.out, Entry{Path: d, Kind: Dir})
	}
	return nil
}

func hasGitElem(rel string) bool {
	return rel == ".git" || strings.HasPrefix(rel, ".git/") || strings.Contains(rel, "/.git/") || strings.HasSuffix(rel, "/.git")
}

// walk lists root without git: every .gitignore file applies to its directory and below.
// A directory whose entries are all ignored is itself ignored, as git has it; an empty one
// is kept.
func (l *lister) walk(ctx context.Context) error {
	dropped := map[string]bool{}
	err := walkTree(ctx, l.root, nil, func(rel string, k Kind) error {
		if l.excluded(rel) {
			return fs.SkipDir
		}
		return l.add(rel, k)
	}, func(rel string, entries, kept int) {
		if entries > 0 && kept == 0 {
			dropped[rel] = true
		}
	})
	if err != nil || len(dropped) == 0 {
		return err
	}
	l.out = slices.DeleteFunc(l.out, func(e Entry) bool { return dropped[e.Path] })
	return nil
}

// walkTree visits every entry under root that the .gitignore files in the tree (and the
// given patterns, of lowest priority) do not ignore, parents before children. It never
// visits .git. visit may return fs.SkipDir to leave out a directory. leave is called when
// a visited directory is done, with how many entries it holds and how many were kept
// (visited, and for a directory, not left with kept == 0 while holding entries).
func walkTree(ctx context.Context, root string, base []gitignore.Pattern, visit func(rel string, k Kind) error, leave func(rel string, entries, kept int)) error {
	var walk func(rel string, elems []string, ps []gitignore.Pattern) (bool, error)
	walk = func(rel string, elems []string, ps []gitignore.Pattern) (kept bool, err error) {
		if err := ctx.Err(); err != nil {
			return false, err
		}
		entries, keptN := 0, 0
		defer func() {
			if err == nil && rel != "" {
				leave(rel, entries, keptN)
				kept = entries == 0 || keptN > 0
			}
		}()
		dir := filepath.Join(root, filepath.FromSlash(rel))
		des, err := os.ReadDir(dir)
		if err != nil {
			return false, err
		}
		for _, de := range des {
			if de.Name() == ".gitignore" && de.Type().IsRegular() {
				more, err := readIgnoreFile(filepath.Join(dir, ".gitignore"), elems)
				if err != nil {
					return false, err
				}
				ps = append(slices.Clip(ps), more...)
				break
			}
		}
		m := gitignore.NewMatcher(ps)
		for _, de := range des {
			name := de.Name()
			if name == ".git" {
				continue
			}
			entries++
			k := kindOf(de.Type())
			if k == Absent {
				continue
			}
			sub := append(slices.Clip(elems), name)
			if m.Match(sub, k == Dir) {
				continue
			}
			srel := path.Join(rel, name)
			switch err := visit(srel, k); {
			case errors.Is(err, fs.SkipDir):
				continue
			case err != nil:
				return false, err
			}
			if k != Dir {
				keptN++
				continue
			}
			sk, err := walk(srel, sub, ps)
			if err != nil {
				return false, err
			}
			if sk {
				keptN++
			}
		}
		return true, nil
	}
	_, err := walk("", nil, base)
	return err
}

func readIgnoreFile(name string, domain []string) ([]gitignore.Pattern, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return parseIgnore(f, domain)
}

func parseIgnore(r interface{ Read([]byte) (int, error) }, domain []string) ([]gitignore.Pattern, error) {
	var ps []gitignore.Pattern
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	for sc.Scan() {
		s := strings.TrimSuffix(sc.Text(), "\r")
		if strings.HasPrefix(s, "#") || strings.TrimSpace(s) == "" {
			continue
		}
		ps = append(ps, gitignore.ParsePattern(s, domain))
	}
	return ps, sc.Err()
}
