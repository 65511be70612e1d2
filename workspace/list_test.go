package workspace

import (
	"context"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func git(t testing.TB, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-C", dir, "-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false"}, args...)...)
	cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_SYSTEM=/dev/null")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return string(out)
}

func needGit(t testing.TB) {
	if _, err := exec.LookPath("git"); err != nil {
		requireIntegration(t, "git not installed")
	}
	t.Setenv("GIT_CONFIG_GLOBAL", "/dev/null")
	t.Setenv("GIT_CONFIG_SYSTEM", "/dev/null")
}

func listed(t testing.TB, root string) (files, dirs []string) {
	t.Helper()
	es, err := List(context.Background(), root, ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range es {
		if e.Kind == Dir {
			dirs = append(dirs, e.Path)
		} else {
			files = append(files, e.Path)
		}
	}
	return files, dirs
}

func lsFiles(t testing.TB, root string, args ...string) []string {
	t.Helper()
	var out []string
	for _, p := range strings.Split(git(t, root, append([]string{"ls-files", "-z"}, args...)...), "\x00") {
		if p != "" {
			out = append(out, p)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

var listTree = spec(
	".gitignore=*.log\nbuild/\n!keep.log\n/top.txt\n",
	"src/main.go=x", "src/debug.log=x", "src/keep.log=x", "src/.gitignore=gen/\n*.o\n",
	"src/gen/out.go=x", "src/a.o=x", "build/x=x", "top.txt=x", "sub/top.txt=x",
	"empty/", "only-ignored/x.log=x", "deep/er/", "link->src/main.go", "dirlink->src",
	"forced.log=tracked anyway", "gone=x", "a b/c d=x",
)

// In a git work tree the listing is git's: `git ls-files --cached --others
// --exclude-standard`, with directories, empty ones too, never an ignored one or .git.
func TestListGit(t *testing.T) {
	needGit(t)
	root := t.TempDir()
	writeTree(t, root, listTree)
	git(t, root, "init", "-q")
	git(t, root, "add", "-f", "forced.log", "gone", "src/main.go")
	git(t, root, "commit", "-q", "-m", "x")
	os.Remove(filepath.Join(root, "gone"))
	files, dirs := listed(t, root)
	var want []string
	for _, p := range lsFiles(t, root, "--cached", "--others", "--exclude-standard") {
		if p != "gone" {
			want = append(want, p)
		}
	}
	if !slices.Equal(files, want) {
		t.Errorf("files = %q\nwant (git ls-files) %q", files, want)
	}
	wantDirs := []string{"a b", "deep", "deep/er", "empty", "src", "sub"} // only-ignored: all it holds is ignored
	if !slices.Equal(dirs, wantDirs) {
		t.Errorf("dirs = %q, want %q", dirs, wantDirs)
	}
	// A subdirectory of a work tree lists relative to itself with the same rules.
	files, _ = listed(t, filepath.Join(root, "src"))
	if want := []string{".gitignore", "keep.log", "main.go"}; !slices.Equal(files, want) {
		t.Errorf("files of src = %q, want %q", files, want)
	}
	es, _ := List(context.Background(), root, ListOptions{})
	for _, e := range es {
		if (e.Path == "link" || e.Path == "dirlink") && e.Kind != Symlink {
			t.Errorf("%s listed as %v, want symlink", e.Path, e.Kind)
		}
		if strings.HasPrefix(e.Path, ".git/") || e.Path == ".git" {
			t.Errorf("listed %s", e.Path)
		}
	}
}

// Without git, every .gitignore file applies, read by a real gitignore matcher: the files
// listed are exactly those git would list in the same tree.
func TestListNoGitMatchesGit(t *testing.T) {
	needGit(t)
	check := func(t *testing.T, tr tree) {
		t.Helper()
		plain, withGit := t.TempDir(), t.TempDir()
		writeTree(t, plain, tr)
		writeTree(t, withGit, tr)
		git(t, withGit, "init", "-q")
		files, dirs := listed(t, plain)
		want := lsFiles(t, withGit, "--others", "--exclude-standard")
		if !slices.Equal(files, want) {
			t.Fatalf("tree %v\nfiles = %q\nwant (git) %q", tr, files, want)
		}
		gfiles, gdirs := listed(t, withGit)
		if !slices.Equal(gfiles, files) || !slices.Equal(gdirs, dirs) {
			t.Fatalf("tree %v\nwithout git %q %q\nwith git %q %q", tr, files, dirs, gfiles, gdirs)
		}
	}
	t.Run("fixed", func(t *testing.T) {
		tr := tree{}
		for p, n := range listTree {
			tr[p] = n
		}
		delete(tr, "gone")
		delete(tr, "forced.log")
		check(t, tr)
	})
	t.Run("random", func(t *testing.T) {
		rng := rand.New(rand.NewPCG(5, 6))
		patterns := []string{"*.log", "b/", "!k.log", "/c", "a/**/b", "c?", "[ab].tmp", "a/*.o", "**/x", "!a/b", "d"}
		names := []string{"a", "b", "c", "d", "x", "k.log", "q.log", "a.tmp", "z.o", "cc"}
		for range 150 {
			tr := tree{}
			var fill func(dir string, depth int)
			fill = func(dir string, depth int) {
				for range 1 + rng.IntN(4) {
					p := path.Join(dir, names[rng.IntN(len(names))])
					if _, ok := tr[p]; ok {
						continue
					}
					if depth < 3 && rng.IntN(3) == 0 {
						tr[p] = node{Kind: Dir}
						fill(p, depth+1)
						continue
					}
					tr[p] = node{Kind: File, Data: "x"}
				}
				if rng.IntN(2) == 0 {
					var ps []string
					for range 1 + rng.IntN(3) {
						ps = append(ps, patterns[rng.IntN(len(patterns))])
					}
					tr[path.Join(dir, ".gitignore")] = node{Kind: File, Data: strings.Join(ps, "\n") + "\n"}
				}
			}
			fill("", 0)
			check(t, tr)
		}
	})
}

// More than the limit of files is refused, saying to use a shared workspace.
func TestListTooManyFiles(t *testing.T) {
	root := t.TempDir()
	var items []string
	for i := range 11 {
		items = append(items, "d/f"+strings.Repeat("x", i))
	}
	writeTree(t, root, spec(items...))
	_, err := List(context.Background(), root, ListOptions{MaxFiles: 10})
	var we *Error
	if !errors.As(err, &we) || we.Code() != CodeTooManyFiles || !errors.Is(err, &Error{Reason: CodeTooManyFiles}) {
		t.Fatalf("List = %v, want a %s error", err, CodeTooManyFiles)
	}
	if !strings.Contains(we.Msg, "workspace=shared") {
		t.Errorf("message %q does not say to use a shared workspace", we.Msg)
	}
	if _, err := List(context.Background(), root, ListOptions{MaxFiles: 11}); err != nil {
		t.Fatalf("11 files with a limit of 11: %v", err)
	}
	// The default limit is 100,000.
	if testing.Short() {
		return
	}
	big := t.TempDir()
	if mounts.xfs != "" {
		big = onFS(t, "xfs") // far quicker to fill than a slow disk
	}
	for d := range 101 {
		dir := filepath.Join(big, "d"+strings.Repeat("0", 3-len(itoa(d)))+itoa(d))
		os.Mkdir(dir, 0o755)
		for f := range 991 {
			if d*991+f > MaxFiles {
				break
			}
			if err := os.WriteFile(filepath.Join(dir, itoa(f)), nil, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	if _, err := List(context.Background(), big, ListOptions{}); !errors.Is(err, &Error{Reason: CodeTooManyFiles}) {
		t.Fatalf("List of %d files = %v, want %s", MaxFiles+1, err, CodeTooManyFiles)
	}
	// And Clone refuses before making anything.
	dir := filepath.Join(t.TempDir(), "ws")
	if _, err := Clone(context.Background(), big, dir, Options{}); !errors.Is(err, &Error{Reason: CodeTooManyFiles}) {
		t.Fatalf("Clone = %v, want %s", err, CodeTooManyFiles)
	}
	if _, err := os.Lstat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a refused clone left %s: %v", dir, err)
	}
}

func itoa(i int) string { return strings.TrimSpace(strings.Repeat(" ", 0) + fmtInt(i)) }

func fmtInt(i int) string {
	if i == 0 {
		return "0"
	}
	var b []byte
	for ; i > 0; i /= 10 {
		b = append([]byte{byte('0' + i%10)}, b...)
	}
	return string(b)
}

// A listing's JSON names each entry's path and kind.
func TestEntryJSON(t *testing.T) {
	t.Parallel()
	b, err := json.Marshal([]Entry{{"a", File}, {"d", Dir}, {"l", Symlink}, {"x", Absent}})
	want := `[{"path":"a","kind":"file"},{"path":"d","kind":"dir"},{"path":"l","kind":"symlink"},{"path":"x","kind":"absent"}]`
	if err != nil || string(b) != want {
		t.Errorf("%s, %v; want %s", b, err, want)
	}
}
