package orchestrator

import (
	"context"
	"encoding/json"
	"errors"

	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/paddockhq/paddock/images"
	"github.com/paddockhq/paddock/policy"
)

// hostFixture is a host whose home holds credentials and whose config directory and PATH
// directory are the protected places a sandbox might want to move.
type hostFixture struct {
	home, creds, awsFile, xdg, bin, ws string
	env                                []string
}

func newHostFixture(t *testing.T) hostFixture {
	t.Helper()
	// The config directory and the PATH directory lie in the workspace: only their being
	// protected makes a write there ask.
	f := hostFixture{home: t.TempDir(), ws: t.TempDir()}
	f.xdg, f.bin = filepath.Join(f.ws, "xdg"), filepath.Join(f.ws, "bin")
	os.MkdirAll(f.bin, 0o755)
	os.MkdirAll(filepath.Join(f.home, ".ssh"), 0o700)
	f.creds = filepath.Join(f.home, ".ssh", "id_rsa")
	os.WriteFile(f.creds, []byte("PRIVATE KEY\n"), 0o600)
	f.awsFile = filepath.Join(t.TempDir(), "aws-creds")
	os.WriteFile(f.awsFile, []byte("AWS SECRET\n"), 0o600)
	os.MkdirAll(filepath.Join(f.xdg, "paddock"), 0o700)
	f.env = []string{"PATH=" + f.bin + ":/usr/bin:/bin", "HOME=" + f.home, "XDG_CONFIG_HOME=" + f.xdg,
		"AWS_SHARED_CREDENTIALS_FILE=" + f.awsFile, "LC_ALL=C"}
	return f
}

// spawnAndCollect starts a child through the session's own session.spawn handler, as a
// program in its sandbox does, and collects it.
func spawnAndCollect(t *testing.T, s *Session, req SpawnRequest) Collected {
	t.Helper()
	ctx := context.Background()
	body, _ := json.Marshal(req)
	out, err := s.Serve(ctx, TypeSpawn, body)
	if err != nil {
		t.Fatalf("session.spawn: %v", err)
	}
	c, err := s.Collect(ctx, out.(Spawned).Child, 0)
	if err != nil || c.Result == nil {
		t.Fatalf("collect: %v %+v", err, c)
	}
	return c
}

// A child's policy locates the host's secrets and protected places by its parent's host
// facts: an environment the sandbox passes with session.spawn (HOME, XDG_CONFIG_HOME, PATH,
// a credential variable) cannot move them. Nobody is attached, so whatever asks is refused.
func TestSpawnEnvCannotMoveGuards(t *testing.T) {
	f := newHostFixture(t)
	auto, _ := policy.ParseAutoSet([]string{"read", "write", "exec", "net"})
	s := openLocal(t, f.ws, Config{Env: f.env, Policy: Policy{Auto: &auto}})
	for _, tc := range []struct {
		name   string
		env    []string
		script string
		marker string // must not appear in the child's output
		file   string // must not exist afterwards
	}{
		{"home moved, ssh key read", []string{"HOME=/nonexistent"}, "cat " + f.creds, "PRIVATE KEY", ""},
		{"home moved to the workspace", []string{"HOME=" + f.ws}, "cat " + f.creds, "PRIVATE KEY", ""},
		{"credential variable moved", []string{"AWS_SHARED_CREDENTIALS_FILE=/nonexistent"}, "cat " + f.awsFile, "AWS SECRET", ""},
		{"config home moved, paddock settings written", []string{"XDG_CONFIG_HOME=/nonexistent"},
			"echo 'kernelTransport: {}' > " + filepath.Join(f.xdg, "paddock", "settings.yaml"), "", filepath.Join(f.xdg, "paddock", "settings.yaml")},
		{"path moved, a program planted", []string{"PATH=/nonexistent"},
			"touch " + filepath.Join(f.bin, "git"), "", filepath.Join(f.bin, "git")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := spawnAndCollect(t, s, SpawnRequest{Name: "kid", Script: tc.script, Env: tc.env})
			if tc.marker != "" && strings.Contains(c.Result.String(), tc.marker) {
				t.Fatalf("the child read the host's secret:\n%s", c.Result)
			}
			if tc.file != "" {
				if _, err := os.Stat(tc.file); err == nil {
					t.Fatalf("the child wrote %s", tc.file)
				}
			}
			if c.Result.End.Kind != Refused || c.Result.End.Code != "unanswered" {
				t.Fatalf("the step was not asked: %s", c.Result)
			}
		})
	}
}

// The same through the real kernel: a program in the sandbox spawns a child with its own
// HOME, and the child's file request for the key is refused.
func TestSandboxSpawnEnvFileAccess(t *testing.T) {
	f := newHostFixture(t)
	kernel, err := images.Default.Find(context.Background(), runtime.GOARCH)
	if err != nil {
		t.Fatal(err)
	}
	s := openLocal(t, f.ws, Config{Env: f.env})
	// The requests' bodies come from files: a step naming the key would be asked itself.
	os.WriteFile(filepath.Join(f.ws, "read.json"), []byte(`{"path":"`+f.creds+`"}`), 0o644)
	req, _ := json.Marshal(SpawnRequest{Name: "kid", Env: []string{"HOME=/nonexistent"},
		Script: kernel + ` host fs.read - < read.json`})
	os.WriteFile(filepath.Join(f.ws, "spawn.json"), req, 0o644)
	res, err := s.Bash(context.Background(), kernel+" host session.spawn - < spawn.json")
	if err != nil || len(res.Steps) != 1 || res.Steps[0].Status != 0 {
		t.Fatalf("%v %s", err, res)
	}
	var sp Spawned
	if err := json.Unmarshal([]byte(res.Steps[0].Stdout.Text), &sp); err != nil {
		t.Fatalf("spawn reply %q: %v", res.Steps[0].Stdout.Text, err)
	}
	c, err := s.Collect(context.Background(), sp.Child, 0)
	if err != nil || c.Result == nil {
		t.Fatal(err)
	}
	out := c.Result.String()
	if strings.Contains(out, "PRIVATE KEY") || !strings.Contains(out, FSNeedsYes) {
		t.Fatalf("the child's fs.read was not refused:\n%s", out)
	}
}

// Spawns from the sandbox are bounded: children running at once, and depth.
func TestSpawnBounds(t *testing.T) {
	ws := t.TempDir()
	s := openLocal(t, ws, Config{MaxChildren: 2, MaxDepth: 2})
	ctx := context.Background()
	spawn := func(s *Session, script string) (string, error) {
		body, _ := json.Marshal(SpawnRequest{Name: "kid", Script: script})
		out, err := s.Serve(ctx, TypeSpawn, body)
		if err != nil {
			return "", err
		}
		return out.(Spawned).Child, nil
	}
	block := filepath.Join(ws, "go")
	wait := "while [ ! -e " + block + " ]; do sleep 0.01; done"
	a, err := spawn(s, wait)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := spawn(s, wait); err != nil {
		t.Fatal(err)
	}
	_, err = spawn(s, "true")
	var le *SpawnLimitError
	if !errors.As(err, &le) || le.Limit != "children" || le.Code() != "spawn_limit" {
		t.Fatalf("a third running child: %v", err)
	}
	os.WriteFile(block, nil, 0o644)
	if _, err := s.Collect(ctx, a, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := spawn(s, "true"); err != nil {
		t.Fatalf("a place freed by a collect: %v", err)
	}

	// Depth: the root is at 0, a child at 1, its child at 2; a child of that is refused.
	c1, err := s.Spawn(ctx, ChildConfig{Name: "one"})
	if err != nil {
		t.Fatal(err)
	}
	defer c1.Close()
	c2, err := c1.Spawn(ctx, ChildConfig{Name: "two"})
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	_, err = spawn(c2, "true")
	if !errors.As(err, &le) || le.Limit != "depth" {
		t.Fatalf("a spawn below the depth bound: %v", err)
	}
}

// Concurrent spawns cannot overshoot the bound: places are taken under the lock that
// counts them.
func TestSpawnBoundConcurrent(t *testing.T) {
	s := openLocal(t, t.TempDir(), Config{MaxChildren: 3})
	body, _ := json.Marshal(SpawnRequest{Name: "kid", Script: "true"})
	var ok, refused atomic.Int32
	done := make(chan struct{})
	for range 10 {
		go func() {
			defer func() { done <- struct{}{} }()
			_, err := s.Serve(context.Background(), TypeSpawn, body)
			var le *SpawnLimitError
			switch {
			case err == nil:
				ok.Add(1)
			case errors.As(err, &le):
				refused.Add(1)
			default:
				t.Error(err)
			}
		}()
	}
	for range 10 {
		<-done
	}
	if ok.Load() != 3 || refused.Load() != 7 {
		t.Fatalf("%d spawned, %d refused; want 3 and 7", ok.Load(), refused.Load())
	}
}

// law: gate_covers_every_runner
// A handler an embedding program adds cannot replace one the session serves, and its
// requests pass the gate: run unasked only when the auto set holds exec, recorded either way.
func TestHandlersAreGated(t *testing.T) {
	echo := func(_ context.Context, req HostRequest) (any, error) { return "ran", nil }
	for _, typ := range builtinTypes {
		_, err := Open(context.Background(), Config{Workspace: t.TempDir(), Handlers: map[string]Handler{typ: echo}})
		var he *HandlerError
		if !errors.As(err, &he) || he.Type != typ {
			t.Errorf("a handler replacing %s: %v", typ, err)
		}
	}
	// Every type the session serves itself is in builtinTypes.
	for typ := range (&Session{}).hostHandlers() {
		found := false
		for _, b := range builtinTypes {
			found = found || b == typ
		}
		if !found {
			t.Errorf("%s is served by the session but a handler could replace it", typ)
		}
	}

	for _, tc := range []struct {
		auto []string
		ran  bool
	}{
		{[]string{"read", "write"}, false},
		{[]string{"read", "write", "exec"}, true},
	} {
		auto, _ := policy.ParseAutoSet(tc.auto)
		audit := filepath.Join(t.TempDir(), "audit.jsonl")
		var ran atomic.Int32
		s := openLocal(t, t.TempDir(), Config{Policy: Policy{Auto: &auto, AuditFile: audit},
			Handlers: map[string]Handler{"test.run": func(context.Context, HostRequest) (any, error) {
				ran.Add(1)
				return "ran", nil
			}}})
		out, err := s.Serve(context.Background(), "test.run", json.RawMessage(`{}`))
		if got := ran.Load() == 1; got != tc.ran || (err == nil) != tc.ran {
			t.Fatalf("auto %v: ran %v (%v, %v), want %v", tc.auto, got, out, err, tc.ran)
		}
		var c Coded
		if !tc.ran && (!errors.As(err, &c) || c.Code() != "unanswered") {
			t.Fatalf("refusal %v, want code unanswered", err)
		}
		b, _ := os.ReadFile(audit)
		lines := strings.Split(strings.TrimSpace(string(b)), "\n")
		if len(lines) != 1 || !strings.Contains(lines[0], `"command":"test.run"`) {
			t.Fatalf("audit of a handler's request:\n%s", b)
		}
	}
}

// A Gatekeeper decides steps, and each of its verdicts is recorded with the step's effects.
func TestGatekeeperRecorded(t *testing.T) {
	audit := filepath.Join(t.TempDir(), "audit.jsonl")
	s := openLocal(t, t.TempDir(), Config{Gatekeeper: &refuseAt{prefix: "touch"}, Policy: Policy{AuditFile: audit}})
	res, err := s.Bash(context.Background(), "echo a; touch b")
	if err != nil || res.End.Kind != Refused {
		t.Fatalf("%v %s", err, res)
	}
	b, _ := os.ReadFile(audit)
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], `"outcome":"run"`) || !strings.Contains(lines[1], `"outcome":"refused","code":"denied"`) ||
		!strings.Contains(lines[1], `"effects":["write"]`) {
		t.Fatalf("audit:\n%s", b)
	}

}

// An isolated child's directory that its spawn made goes with a clean hand-back; one whose
// hand-back kept a conflicted version stays, the report naming it.
func TestCleanChildLeavesNothing(t *testing.T) {
	ws, state := t.TempDir(), t.TempDir()
	os.WriteFile(filepath.Join(ws, "a.txt"), []byte("parent\n"), 0o644)
	s := openLocal(t, ws, Config{StateDir: state})
	ctx := context.Background()
	clean, err := s.Spawn(ctx, ChildConfig{Name: "clean", Workspace: Isolated})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := clean.Bash(ctx, "echo new > b.txt"); err != nil {
		t.Fatal(err)
	}
	clean.Close()
	if rep := clean.Handback(); rep == nil || len(rep.Taken) != 1 || rep.Dir != "" {
		t.Fatalf("clean hand-back: %+v", rep)
	}
	if left, _ := filepath.Glob(filepath.Join(state, "child-*")); len(left) != 0 {
		t.Fatalf("a clean child left %v", left)
	}
	kid, err := s.Spawn(ctx, ChildConfig{Name: "kid", Workspace: Isolated})
	if err != nil {
		t.Fatal(err)
	}
	kid.Bash(ctx, "echo child > a.txt")
	os.WriteFile(filepath.Join(ws, "a.txt"), []byte("parent changed\n"), 0o644)
	kid.Close()
	rep := kid.Handback()
	if rep == nil || len(rep.Conflicts) != 1 || rep.Dir == "" {
		t.Fatalf("conflicted hand-back: %+v", rep)
	}
	if b, err := os.ReadFile(filepath.Join(rep.Dir, "conflicts", "a.txt")); err != nil || string(b) != "child\n" {
		t.Fatalf("the child's version: %q %v", b, err)
	}
}
