package orchestrator

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/paddockhq/paddock/images"
	"github.com/paddockhq/paddock/internal/place"
	"github.com/paddockhq/paddock/policy"
)

// Paddock's own places on this host, found as a session finds them (the XDG directories and
// TMPDIR of the host process, its kernel cache; a daemon's state directory and socket from
// the session's opener; its audit file), are kept from a local session: each is secret or
// protected in the context the session judges its steps by, named or through a link in the
// workspace. A step that reads a session's attach key, or a program in the sandbox asking
// the host for it (fs.read), is asked about — and refused, with nobody to answer — rather
// than run.
// law: gate_secret_read_needs_yes
func TestOwnPlacesKeptFromSession(t *testing.T) {
	kernel, err := images.Default.Find(context.Background(), runtime.GOARCH)
	if err != nil {
		t.Fatal(err)
	}
	base, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	at := func(p string) string { return filepath.Join(base, p) }
	t.Setenv("XDG_STATE_HOME", at("state"))
	t.Setenv("XDG_CONFIG_HOME", at("config"))
	t.Setenv("TMPDIR", at("tmp"))
	socketDir := at("tmp/paddock-" + strconv.Itoa(os.Getuid()))
	key := at("state/paddock/sessions/s1/session.json")
	files := map[string]string{
		key:                                       `{"key":"KEY-0123456789"}`,
		at("state/paddock/audit.jsonl"):           "{}\n",
		at("config/paddock/settings.yaml"):        "shell: {}\n",
		at("config/paddock/credentials.json"):     "{}\n",
		filepath.Join(socketDir, "paddock.sock"):  "",
		at("daemon/sessions/s2/session.json"):     `{"key":"KEY-other"}`,
		at("run/d.sock"):                          "",
		at("daemon/handbacks/child-1/copy/a.txt"): "a\n",
		at("ws/a.txt"):                            "a\n",
	}
	for p, body := range files {
		os.MkdirAll(filepath.Dir(p), 0o700)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	os.MkdirAll(at("audit"), 0o700)
	cache, err := place.KernelCache()
	if err != nil {
		t.Fatal(err)
	}
	links := map[string]string{"key": key, "sock": filepath.Join(socketDir, "paddock.sock"),
		"settings": at("config/paddock"), "kernels": cache}
	for name, target := range links {
		if err := os.Symlink(target, at("ws/"+name)); err != nil {
			t.Fatal(err)
		}
	}
	s := openLocal(t, at("ws"), Config{Policy: Policy{
		Own:       policy.Own{Secret: place.Daemon(at("daemon")), Sockets: []string{at("run/d.sock")}},
		AuditFile: at("audit/session.jsonl"),
	}})
	pctx := s.pgate.pctx
	for _, tc := range []struct {
		path        string
		read, write string // the effects beyond read / write of `cat path` and `echo x > path`
	}{
		{key, "secret", "secret"},
		{at("ws/key"), "secret", "secret"},
		{at("state/paddock/audit.jsonl"), "secret", "secret"},
		{at("audit/session.jsonl"), "secret", "secret"},
		{filepath.Join(socketDir, "paddock.sock"), "secret", "secret"},
		{at("ws/sock"), "secret", "secret"},
		{at("daemon/sessions/s2/session.json"), "secret", "secret"},
		{at("run/d.sock"), "secret", "secret"},
		{at("config/paddock/settings.yaml"), "", "protected"},
		{at("ws/settings/settings.yaml"), "", "protected"},
		{at("config/paddock/credentials.json"), "secret", "secret"},
		{filepath.Join(cache, "x"), "", "protected"},
		{at("ws/kernels/x"), "", "protected"},
		{at("daemon/handbacks/child-1/copy/a.txt"), "", "outside"},
		{at("ws/a.txt"), "", ""},
	} {
		read := policy.StepEffects(pctx, policy.Step{Argv: []string{"cat", tc.path}, Cwd: at("ws")})
		write := policy.StepEffects(pctx, policy.Step{Argv: []string{"echo", "x"}, Cwd: at("ws"),
			Redirects: []policy.Redirect{{FD: 1, Op: ">", Path: tc.path}}})
		if want := effects(policy.Read, tc.read); read != want {
			t.Errorf("cat %s: %s, want %s", tc.path, read, want)
		}
		if want := effects(policy.Write, tc.write); write != want {
			t.Errorf("echo x > %s: %s, want %s", tc.path, write, want)
		}
	}

	ctx := context.Background()
	for _, script := range []string{"cat " + key, "cat key", "cat " + at("daemon/sessions/s2/session.json")} {
		res, err := s.Bash(ctx, script)
		if err != nil {
			t.Fatal(err)
		}
		if res.End.Kind != Refused || res.End.Code != "unanswered" || strings.Contains(res.String(), "KEY-") {
			t.Errorf("%s: %s", script, res)
		}
	}
	// The body comes from a file: a step naming the key would be asked itself.
	os.WriteFile(at("ws/read.json"), []byte(`{"path":"`+key+`"}`), 0o644)
	res, err := s.Bash(ctx, kernel+` host fs.read - < read.json`)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Steps) != 1 || res.Steps[0].Status == 0 || strings.Contains(res.String(), "KEY-") {
		t.Errorf("fs.read of an attach key: %s", res)
	}
}

// effects is e with the effects named in more (comma-separated) added.
func effects(e policy.Effects, more string) policy.Effects {
	if more == "" {
		return e
	}
	for _, name := range strings.Split(more, ",") {
		m, ok := policy.ParseEffect(name)
		if !ok {
			panic("no effect " + name)
		}
		e |= m
	}
	return e
}
