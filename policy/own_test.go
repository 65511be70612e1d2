package policy

import (
	"strings"
	"testing"
)

// ownContext is a session's context with Paddock's own places on a host whose directories
// are not where the session's environment says (a sandbox's XDG_CONFIG_HOME).
func ownContext() *Context {
	return &Context{
		Cwd:   "/ws",
		Home:  "/home/u",
		Env:   []string{"HOME=/home/u", "PATH=/usr/bin:/bin", "XDG_CONFIG_HOME=/sandbox/xdg"},
		Roots: []string{"/ws"},
		Own: Own{
			ConfigDir: "/host/xdg/paddock",
			Secret:    []string{"/host/state/paddock/sessions", "/host/state/paddock/audit.jsonl", "/srv/daemon/sessions"},
			Sockets:   []string{"/tmp/paddock-1000", "/srv/run/d.sock"},
			Protected: []string{"/host/cache/paddock/kernel"},
		},
		FS: NewMapFS(
			"/ws/a.txt",
			"/ws/key -> /host/state/paddock/sessions/s1/session.json",
			"/ws/state -> /host/state/paddock",
			"/ws/sock -> /tmp/paddock-1000/paddock.sock",
			"/ws/kernel -> /host/cache/paddock/kernel/k",
			"/ws/settings -> /host/xdg/paddock",
			"/host/state/paddock/sessions/s1/session.json",
			"/host/state/paddock/audit.jsonl",
			"/host/state/paddock/handbacks/child-1/copy/a.txt",
			"/srv/daemon/sessions/s2/session.json",
			"/srv/run/d.sock",
			"/tmp/paddock-1000/paddock.sock",
			"/tmp/scratch/x",
			"/host/cache/paddock/kernel/k",
			"/host/xdg/paddock/settings.yaml",
			"/host/xdg/paddock/credentials.json",
			"/usr/bin/cat",
		),
		Auto: DefaultAutoSet(),
	}
}

// Paddock's own places are kept from a session, named directly or through a link in the
// workspace: its secrets (a daemon's sessions with their attach keys, the audit logs) and
// the daemon's socket are secret to read or write; its settings and kernel cache are
// protected to write, the credentials among its settings secret. A directory above the
// socket directory is protected, not secret (a socket's content cannot be copied); a
// daemon's children's clones, next to its sessions, are none of these.
// law: path_secret_wins, path_ancestor_guarded
func TestOwnPlaces(t *testing.T) {
	t.Parallel()
	ctx := ownContext()
	for _, tc := range []struct {
		line string
		out  string // a path written with > ("": none)
		want string
	}{
		{"cat /host/state/paddock/sessions/s1/session.json", "", "read,secret"},
		{"cat key", "", "read,secret"},
		{"cat state/sessions/s1/session.json", "", "read,secret"},
		{"cat /host/state/paddock/audit.jsonl", "", "read,secret"},
		{"echo x", "/host/state/paddock/audit.jsonl", "secret,write"},
		{"cat /srv/daemon/sessions/s2/session.json", "", "read,secret"},
		{"grep -r key /host/state/paddock", "", "read,secret"},
		{"cat /tmp/paddock-1000/paddock.sock", "", "read,secret"},
		{"cat sock", "", "read,secret"},
		{"curl --unix-socket /srv/run/d.sock http://d/v1/sessions", "", "net,secret"},
		{"ls /tmp", "", "read"},
		{"touch /tmp", "", "protected,write"},
		{"cat /tmp/scratch/x", "", "read"},
		{"echo x", "/tmp/scratch/x", "outside,write"},
		{"cat /host/cache/paddock/kernel/k", "", "read"},
		{"echo x", "/host/cache/paddock/kernel/k", "protected,write"},
		{"echo x", "kernel", "protected,write"},
		{"cat /host/xdg/paddock/settings.yaml", "", "read"},
		{"echo x", "/host/xdg/paddock/settings.yaml", "protected,write"},
		{"echo x", "settings/settings.yaml", "protected,write"},
		{"cat settings/credentials.json", "", "read,secret"},
		{"echo x", "/host/state/paddock/handbacks/child-1/copy/a.txt", "outside,write"},
		{"echo x", "a.txt", "write"},
	} {
		st := Step{Argv: strings.Fields(tc.line), Cwd: "/ws"}
		if tc.out != "" {
			st.Redirects = []Redirect{{FD: 1, Op: ">", Path: tc.out}}
		}
		if got := StepEffects(ctx, st); got.String() != tc.want {
			t.Errorf("%s > %q: %s, want %s", tc.line, tc.out, got, tc.want)
		}
	}
	// The settings directory is the host's, not the one the session's environment names.
	if got := Class(ctx, "/sandbox/xdg/paddock/settings.yaml"); got != ClassOutside {
		t.Errorf("the sandbox's settings directory: %s", got)
	}
}
