package ssh

import (
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func TestJudge(t *testing.T) {
	sent := facts{perm: 0o644, size: 10, mtime: 100}
	for _, c := range []struct {
		name       string
		box        facts
		wasSent    bool
		loc        facts
		locRegular bool
		want       fileVerdict
	}{
		{"as sent, older than the upload", sent, true, sent, true, keep},
		{"new on the box", sent, false, facts{}, false, take},
		{"size changed", facts{0o644, 11, 100}, true, sent, true, take},
		{"mode changed", facts{0o600, 10, 100}, true, sent, true, take},
		{"time changed", facts{0o644, 10, 150}, true, sent, true, take},
		{"local copy not a file", sent, true, facts{}, false, take},
		{"local copy another size", sent, true, facts{0o644, 9, 100}, true, take},
	} {
		if got := judge(c.box, sent, c.wasSent, c.loc, c.locRegular, 120); got != c.want {
			t.Errorf("%s: %v; want %v", c.name, got, c.want)
		}
	}
	// A file sent with a time in the upload's second, left as it was: compared by content.
	late := facts{0o644, 10, 120}
	if got := judge(late, late, true, late, true, 120); got != compare {
		t.Errorf("a file whose time is the upload's second: %v; want compare", got)
	}
}

// law: path_rejects_escape — a path the box lists above or outside the tree is refused,
// never cleaned into it.
func TestLocal(t *testing.T) {
	for rel, want := range map[string]bool{
		"a": true, "a/b": true, "-rf": true, "a b/\nc": true, "..a": true, "a..": true,
		"": false, ".": false, "..": false, "../a": false, "a/../b": false, "a/..": false,
		"/etc/passwd": false, "a//b": false, "a/./b": false, "./a": false, "a/": false,
	} {
		if got := local(rel); got != want {
			t.Errorf("local(%q) = %v; want %v", rel, got, want)
		}
	}
}

func TestParseStat(t *testing.T) {
	for line, want := range map[string]rstat{
		"-":                    {},
		"-rwxr-xr-x 0 123":     {exists: true, mode: 0o755, uid: 0, size: 123},
		"drwx------ 1000 4096": {exists: true, mode: fs.ModeDir | 0o700, uid: 1000, size: 4096},
		"drwxrwxrwt+ 0 4096":   {exists: true, mode: fs.ModeDir | fs.ModeSticky | 0o777, size: 4096},
		"lrwxrwxrwx. 5 7":      {exists: true, mode: fs.ModeSymlink | 0o777, uid: 5, size: 7},
		"-rwsr-S--T 0 1":       {exists: true, mode: fs.ModeSetuid | fs.ModeSetgid | fs.ModeSticky | 0o740, size: 1},
		"crw-rw-rw- 0 3":       {exists: true, mode: fs.ModeDevice | fs.ModeCharDevice | 0o666, size: 3},
		"crw-rw-rw- 0 1,":      {exists: true, mode: fs.ModeDevice | fs.ModeCharDevice | 0o666},
	} {
		got, err := parseStat(line)
		if err != nil || got != want {
			t.Errorf("parseStat(%q) = %+v, %v; want %+v", line, got, err, want)
		}
	}
	for _, bad := range []string{"", "?", "-rwxr-xr-x 0", "-rwxr-xr-x x 1", "-rwxr-xr-x 0 ?", "-rwxq-xr-x 0 1", "-rwx 0 1", "-rwxr-xr-x -1 1"} {
		if st, err := parseStat(bad); err == nil {
			t.Errorf("parseStat(%q) = %+v; want an error", bad, st)
		}
	}
}

// What ls -ldn says, read back, is what lstat says: the script against the real shell and
// ls, on names no shell word may be built from by hand.
func TestLstatScriptDifferential(t *testing.T) {
	dir := t.TempDir()
	names := []string{"plain", "a b", "new\nline", "-rf", "--", "'q\"", "$(touch pwned)", "*", "ünï", "tab\t"}
	var paths []string
	for i, n := range names {
		p := filepath.Join(dir, n)
		switch i % 3 {
		case 0:
			os.WriteFile(p, []byte(strings.Repeat("x", i)), fs.FileMode(0o600+i))
		case 1:
			os.Mkdir(p, 0o750)
		case 2:
			os.Symlink(n, p)
		}
		paths = append(paths, p)
	}
	made := filepath.Join(dir, "-made\n $(x)", "dir") // made first, as the kernel cache is
	paths = append(paths, filepath.Join(dir, "missing"), filepath.Join(dir, "missing", "below"), made)
	cmd := exec.Command("bash", "-c", shell(lstatScript(made, 0o700, paths))) // bash as the login shell
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
	if len(lines) != len(paths) {
		t.Fatalf("%d lines for %d paths: %q", len(lines), len(paths), out)
	}
	for i, p := range paths {
		got, err := parseStat(lines[i])
		if err != nil {
			t.Fatalf("%q: %v", p, err)
		}
		fi, err := os.Lstat(p)
		if err != nil {
			if got.exists {
				t.Errorf("%q: %+v; it is not there", p, got)
			}
			continue
		}
		if !got.exists || got.mode != fi.Mode() || (fi.Mode().IsRegular() && got.size != fi.Size()) || got.uid != os.Getuid() {
			t.Errorf("%q: %+v; lstat says mode %v size %d", p, got, fi.Mode(), fi.Size())
		}
	}
	if fi, err := os.Lstat(made); err != nil || fi.Mode() != fs.ModeDir|0o700 {
		t.Fatalf("the directory to make: %v %v", fi, err)
	}
	if _, err := os.Lstat(filepath.Join(dir, "pwned")); err == nil {
		t.Fatal("a name was run as a command")
	}
}

// The copy script against the real shell: the content lands at the name, with its mode,
// only when its hash is the one given; a wrong hash leaves nothing, not even the temporary.
func TestPutScript(t *testing.T) {
	dir := t.TempDir()
	content := make([]byte, 100_000)
	for i := range content {
		content[i] = byte(rand.IntN(256))
	}
	src := filepath.Join(t.TempDir(), "src")
	os.WriteFile(src, content, 0o600)
	sum, err := hashFile(src)
	if err != nil {
		t.Fatal(err)
	}
	run := func(remote, sum string) error {
		f, _ := os.Open(src)
		defer f.Close()
		cmd := exec.Command("bash", "-c", shell(putScript(remote, remote+".tmp-x", int64(len(content)), sum, 0o755)))
		cmd.Stdin = f
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Logf("%s", out)
		}
		return err
	}
	remote := filepath.Join(dir, "-k 'e'\nrnel $(x)")
	if err := run(remote, strings.Repeat("0", 64)); err == nil {
		t.Fatal("a copy with another hash was accepted")
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Fatalf("a refused copy left %v", ents)
	}
	if err := run(remote, sum); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(remote)
	fi, _ := os.Stat(remote)
	if err != nil || string(got) != string(content) || fi.Mode().Perm() != 0o755 {
		t.Fatalf("the copy: %d bytes, mode %v, %v", len(got), fi.Mode(), err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Fatalf("the copy left %v", ents)
	}
}

func FuzzParseStat(f *testing.F) {
	for _, s := range []string{"-", "-rwxr-xr-x 0 123", "drwx------+ 1000 4096", "crw-rw-rw- 0 1,", "lrwxrwxrwx 0 x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, line string) {
		st, err := parseStat(line)
		if err != nil {
			return
		}
		if st.exists && (st.uid < 0 || st.size < 0) {
			t.Fatalf("%q: %+v", line, st)
		}
		if !st.exists && st != (rstat{}) {
			t.Fatalf("%q: %+v", line, st)
		}
	})
}

// The scripts are one line each (a csh login shell takes no newline inside quotes), unless
// a path they name holds one.
func TestScriptsOneLine(t *testing.T) {
	for _, sc := range []string{
		lstatScript("/a b/c", 0o700, []string{"/a", "/b c"}),
		putScript("/k", "/k.tmp", 10, strings.Repeat("0", 64), 0o755),
		needTar,
	} {
		if strings.Contains(sc, "\n") {
			t.Errorf("a script of several lines: %q", sc)
		}
	}
}
