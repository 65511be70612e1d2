// Package gitexec makes every git the host runs for Paddock itself, on workspaces it does
// not trust.
//
// A repository's own configuration (its .git/config, the files that includes, the directory
// a .git file points to) can name programs git runs: an fsmonitor, hooks, a pager, diff
// drivers, textconv and filters, credential and askpass helpers, an ssh command, editors,
// signature programs, remote helpers. The host reads workspaces with git (to list them for
// an isolated copy), so every such git is made here: with policy.GitOptions before the
// subcommand, which switch each of those programs off from the command line (a setting
// there wins over any file's), with policy.GitEnv, with neither the system's nor the
// user's global configuration, and with none of the caller's GIT_* variables (GIT_DIR,
// GIT_CONFIG_PARAMETERS, GIT_EXTERNAL_DIFF, GIT_EXEC_PATH… would each undo a part).
//
// Two things git reads whatever the command line says: the includes of a repository's
// configuration (only read: every value they set is overridden all the same) and its
// filter drivers, which run only when git reads a work-tree file's content — none of the
// commands the host runs does (rev-parse, ls-files --cached --others, config --get).
// A repository owned by another user is refused by git itself (safe.directory is honoured
// only from the global configuration, which is not read), and is then listed without git.
package gitexec

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"

	"github.com/paddockhq/paddock/policy"
)

// Command returns git running args on the repository of dir (git -C dir …), hardened.
func Command(ctx context.Context, dir string, args ...string) *exec.Cmd {
	argv := append([]string{"-C", dir}, policy.GitOptions()...)
	cmd := exec.CommandContext(ctx, "git", append(argv, args...)...)
	cmd.Env = Env(os.Environ(), false)
	return cmd
}

// Env returns environ without its GIT_* entries, with policy.GitEnv and no system
// configuration; the user's global configuration is left out too unless global is set,
// when the caller's GIT_CONFIG_GLOBAL (the user's choice of that file) is kept.
func Env(environ []string, global bool) []string {
	out := make([]string, 0, len(environ)+8)
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(name, "GIT_") && !(global && name == "GIT_CONFIG_GLOBAL") {
			continue
		}
		out = append(out, kv)
	}
	out = append(out, policy.GitEnv...)
	out = append(out, "GIT_CONFIG_NOSYSTEM=1", "GIT_ATTR_NOSYSTEM=1")
	if !global {
		out = append(out, "GIT_CONFIG_GLOBAL=/dev/null")
	}
	return out
}

// ConfigPath returns the path a configuration key names for the repository of dir, as git
// would use it there ("" when no file sets it): the repository's own value, else the
// user's global one. It is the one git the host runs that reads the user's global
// configuration — for this key alone, which the commands that need it are then given on
// their command line (core.excludesFile, say).
func ConfigPath(ctx context.Context, dir, key string) (string, error) {
	argv := append([]string{"-C", dir}, policy.GitOptions()...)
	cmd := exec.CommandContext(ctx, "git", append(argv, "config", "--path", "--get", key)...)
	cmd.Env = Env(os.Environ(), true)
	out, err := cmd.Output()
	var ee *exec.ExitError
	if errors.As(err, &ee) && ee.ExitCode() == 1 {
		return "", nil // the key is not set
	}
	if err != nil {
		return "", err
	}
	return strings.TrimSuffix(string(out), "\n"), nil
}
