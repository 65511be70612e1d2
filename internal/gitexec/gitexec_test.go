package gitexec_test

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/creack/pty"

	"github.com/paddockhq/paddock/internal/gitexec"
	"github.com/paddockhq/paddock/internal/gitexec/gitexectest"
)

// hostCommands are the git commands the host runs on a workspace (see workspace), and
// status, which reads every file's state.
var hostCommands = [][]string{
	{"rev-parse", "--is-inside-work-tree"},
	{"rev-parse", "--show-toplevel"},
	{"rev-parse", "--git-path", "info/exclude"},
	{"-c", "core.quotepath=off", "ls-files", "-z", "--cached", "--others", "--exclude-standard"},
	{"-c", "core.quotepath=off", "ls-files", "-z", "--others", "--ignored", "--exclude-standard", "--directory"},
	{"config", "--path", "--get", "core.excludesFile"},
	{"status", "--porcelain"},
}

// Every git the host runs, on a repository whose configuration (plain, included, behind a
// .git file, above the workspace, bare) names a program for every way git has of running
// one, and with a caller whose GIT_* variables name them too, runs none: not with its
// output in a pipe, not on a terminal (where git starts a pager). Status reads files'
// content only through filters, which the host never asks for (its listing does not read
// content): it may run them, and nothing else.
// law: host_git_hardened
func TestCommandRunsNoProgram(t *testing.T) {
	tr := gitexectest.New(t)
	tr.SetEnv(t)
	ctx := context.Background()
	for _, l := range gitexectest.Layouts {
		ws := tr.Repo(t, l)
		for _, args := range hostCommands {
			for _, tty := range []bool{false, true} {
				cmd := gitexec.Command(ctx, ws, args...)
				if tty {
					f, err := pty.Start(cmd)
					if err != nil {
						t.Fatal(err)
					}
					io.Copy(io.Discard, f)
					cmd.Wait()
					f.Close()
				} else {
					cmd.Run()
				}
				got := tr.Sprung(t)
				if slices.Contains(args, "status") {
					got = slices.DeleteFunc(got, func(m string) bool { return slices.Contains(gitexectest.FilterMarks, m) })
				}
				if len(got) > 0 {
					t.Errorf("%s: git %s (terminal %v) ran %v", l, strings.Join(args, " "), tty, got)
				}
				tr.Clear(t)
			}
		}
		if _, err := gitexec.ConfigPath(ctx, ws, "core.excludesFile"); err != nil && l != gitexectest.Bare {
			t.Errorf("%s: ConfigPath: %v", l, err)
		}
		if got := tr.Sprung(t); len(got) > 0 {
			t.Errorf("%s: ConfigPath ran %v", l, got)
		}
	}
}

// The environment keeps none of the caller's GIT_* variables and reads no system or global
// configuration, but the user's own global file where it is asked for.
func TestEnv(t *testing.T) {
	in := []string{"PATH=/bin", "HOME=/home/u", "GIT_DIR=/elsewhere", "GIT_EXEC_PATH=/x",
		"GIT_CONFIG_PARAMETERS='core.pager'='x'", "GIT_CONFIG_GLOBAL=/home/u/g", "GIT_ALLOW_PROTOCOL=ext",
		"XGIT_KEPT=1"}
	for _, global := range []bool{false, true} {
		env := gitexec.Env(in, global)
		for _, want := range []string{"PATH=/bin", "HOME=/home/u", "XGIT_KEPT=1", "GIT_CONFIG_NOSYSTEM=1",
			"GIT_TERMINAL_PROMPT=0", "GIT_ALLOW_PROTOCOL="} {
			if !slices.Contains(env, want) {
				t.Errorf("global %v: %q lacks %s", global, env, want)
			}
		}
		for _, kv := range env {
			if strings.HasPrefix(kv, "GIT_DIR=") || strings.HasPrefix(kv, "GIT_EXEC_PATH=") ||
				strings.HasPrefix(kv, "GIT_CONFIG_PARAMETERS=") || kv == "GIT_ALLOW_PROTOCOL=ext" {
				t.Errorf("global %v: kept %s", global, kv)
			}
		}
		wantGlobal := "GIT_CONFIG_GLOBAL=/dev/null"
		if global {
			wantGlobal = "GIT_CONFIG_GLOBAL=/home/u/g"
		}
		var globals []string
		for _, kv := range env {
			if strings.HasPrefix(kv, "GIT_CONFIG_GLOBAL=") {
				globals = append(globals, kv)
			}
		}
		if !slices.Equal(globals, []string{wantGlobal}) {
			t.Errorf("global %v: %q, want %s", global, globals, wantGlobal)
		}
	}
}

// ConfigPath gives the repository's own value, else the user's global one; the commands
// the host runs read no global configuration.
func TestConfigPath(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	if out, err := gitexec.Command(ctx, dir, "init", "-q").CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	global := filepath.Join(t.TempDir(), "gitconfig")
	os.WriteFile(global, []byte("[core]\n\texcludesFile = ~/global-ignore\n[user]\n\tname = Global\n"), 0o644)
	t.Setenv("GIT_CONFIG_GLOBAL", global)
	t.Setenv("HOME", "/home/u")
	if got, err := gitexec.ConfigPath(ctx, dir, "core.excludesFile"); err != nil || got != "/home/u/global-ignore" {
		t.Errorf("the user's: %q, %v", got, err)
	}
	if out, _ := gitexec.Command(ctx, dir, "config", "--get", "user.name").Output(); len(out) > 0 {
		t.Errorf("Command read the global configuration: %q", out)
	}
	if out, err := gitexec.Command(ctx, dir, "config", "core.excludesFile", "/repo-ignore").CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if got, err := gitexec.ConfigPath(ctx, dir, "core.excludesFile"); err != nil || got != "/repo-ignore" {
		t.Errorf("the repository's: %q, %v", got, err)
	}
	if got, err := gitexec.ConfigPath(ctx, dir, "core.nosuchkey"); err != nil || got != "" {
		t.Errorf("unset: %q, %v", got, err)
	}
}
