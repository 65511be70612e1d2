package script

import (
	"io/fs"
	"slices"
	"strings"
	"testing"
)

// dirs is a sandbox of directories for cd, the rest files.
func dirs(ds ...string) func(string) (bool, error) {
	return func(p string) (bool, error) {
		if slices.Contains(ds, p) {
			return true, nil
		}
		if p == "/w/file" {
			return false, nil
		}
		return false, fs.ErrNotExist
	}
}

// A script's steps are worked out on the state the steps before them left: words expanded
// over its variables, redirections joined to its directory, cd moving only into a directory,
// export, unset and assignments kept; a redirection that is not one word fails the step.
func TestStatePlansSteps(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		src   string
		argv  []string // of the last step
		redir string   // the last step's redirections, Path@Word
		cwd   string   // where the last step starts
		err   string   // the last step's planning error
	}{
		{src: "echo $HOME", argv: []string{"echo", "/home/u"}, cwd: "/w"},
		{src: "X=1; echo $X", argv: []string{"echo", "1"}, cwd: "/w"},
		{src: "export Y=2; echo $Y", argv: []string{"echo", "2"}, cwd: "/w"},
		{src: "unset HOME; echo $HOME", argv: []string{"echo"}, cwd: "/w"},
		{src: "cd sub; pwd", argv: []string{"pwd"}, cwd: "/w/sub"},
		{src: "cd sub; cd ..; pwd", argv: []string{"pwd"}, cwd: "/w"},
		{src: "cd nowhere; pwd", argv: []string{"pwd"}, cwd: "/w"},
		{src: "cd file; pwd", argv: []string{"pwd"}, cwd: "/w"},
		{src: "cd; pwd", argv: []string{"pwd"}, cwd: "/home/u"},
		{src: "cd sub; echo x > out 2>&1", argv: []string{"echo", "x"}, redir: "/w/sub/out@out 1@1", cwd: "/w/sub"},
		{src: "echo x > a*", argv: []string{"echo", "x"}, redir: "/w/a.txt@a.txt", cwd: "/w"},
		{src: "echo x >> /tmp/log", argv: []string{"echo", "x"}, redir: "/tmp/log@/tmp/log", cwd: "/w"},
		{src: "TWO='a b'; echo x > $TWO", err: "$TWO: ambiguous redirect"},
		{src: "echo x > *.txt", err: "*.txt: ambiguous redirect"},
	} {
		s, err := Parse(c.src)
		if err != nil || s.Grammar != Steps {
			t.Fatalf("%q: %v %s", c.src, err, s.Grammar)
		}
		sh := NewState(c.src, "/w", []string{"HOME=/home/u", "PATH=/bin"})
		sh.IsDir = dirs("/w", "/w/sub", "/home/u")
		sh.ReadDir = func(dir string) ([]fs.DirEntry, error) {
			if dir != "/w" && dir != "." {
				return nil, fs.ErrNotExist
			}
			return []fs.DirEntry{entry("a.txt"), entry("b.txt")}, nil
		}
		var p Planned
		for i, st := range s.Steps {
			p, err = sh.Plan(st)
			if i < len(s.Steps)-1 {
				if err != nil {
					t.Fatalf("%q: step %d: %v", c.src, i, err)
				}
				sh.Builtin(p)
			}
		}
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%q: %v, want an error saying %q", c.src, err, c.err)
			}
			continue
		}
		var rs []string
		for _, r := range p.Redirects {
			rs = append(rs, r.Path+"@"+r.Word)
		}
		if err != nil || !slices.Equal(p.Argv, c.argv) || strings.Join(rs, " ") != c.redir || p.Cwd != c.cwd {
			t.Errorf("%q: %v %q %q cwd %s; want %q %q cwd %s", c.src, err, p.Argv, rs, p.Cwd, c.argv, c.redir, c.cwd)
		}
	}
}

type entry string

func (e entry) Name() string               { return string(e) }
func (e entry) IsDir() bool                { return false }
func (e entry) Type() fs.FileMode          { return 0 }
func (e entry) Info() (fs.FileInfo, error) { return nil, fs.ErrInvalid }

// The builtins the host runs say what bash says, with its statuses.
func TestStateBuiltins(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		argv   []string
		status int
		stderr string
		exit   bool
	}{
		{[]string{"cd", "nowhere"}, 1, "cd: nowhere: No such file or directory", false},
		{[]string{"cd", "file"}, 1, "cd: file: Not a directory", false},
		{[]string{"exit"}, 3, "", true},
		{[]string{"exit", "258"}, 2, "", true},
		{[]string{"exit", "x"}, 2, "exit: x: numeric argument required", true},
		{[]string{"export", "A"}, 0, "", false},
	} {
		sh := NewState("", "/w", nil)
		sh.Status = 3
		sh.IsDir = dirs("/w")
		done, status, stderr, exit := sh.Builtin(Planned{Argv: c.argv, Cwd: "/w"})
		if !done || status != c.status || stderr != c.stderr || exit != c.exit {
			t.Errorf("%q: %v %d %q %v; want %d %q %v", c.argv, done, status, stderr, exit, c.status, c.stderr, c.exit)
		}
	}
	sh := NewState("", "/w", nil)
	if done, _, _, _ := sh.Builtin(Planned{Argv: []string{"ls"}}); done {
		t.Error("ls is not the host's to run")
	}
	// With no way to look, cd moves nowhere.
	if done, status, _, _ := sh.Builtin(Planned{Argv: []string{"cd", "/"}}); !done || status != 1 || sh.Cwd != "/w" {
		t.Errorf("cd with no IsDir: %v %d %s", done, status, sh.Cwd)
	}
}
