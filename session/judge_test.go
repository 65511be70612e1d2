package session

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/paddockhq/paddock/config"
	"github.com/paddockhq/paddock/errdefs"
	"github.com/paddockhq/paddock/policy"
)

// A script is judged as its session would judge it with nobody attached: the global
// settings' rules and auto set decide each step, the session's audit file is a secret, and a
// script that does not parse is the caller's to fix.
func TestJudge(t *testing.T) {
	cfg := t.TempDir()
	t.Setenv("XDG_CONFIG_HOME", cfg)
	os.MkdirAll(filepath.Join(cfg, "paddock"), 0o700)
	global := "shell:\n  autoEffects: [read, write]\n  rules:\n    - {action: deny, command: rm}\n"
	if err := os.WriteFile(filepath.Join(cfg, "paddock", "settings.yaml"), []byte(global), 0o600); err != nil {
		t.Fatal(err)
	}
	ws := t.TempDir()
	l, err := config.Load(config.Options{Workspace: ws})
	if err != nil {
		t.Fatal(err)
	}
	audit := filepath.Join(t.TempDir(), "audit.jsonl")
	o := Options{Workspace: ws, Settings: l, AuditFile: audit}
	a, err := Judge(o, ws, "touch a; rm a; cat "+audit+"; curl example.com")
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		verdict policy.Verdict
		effect  policy.Effects
	}{{policy.RunNow, policy.Write}, {policy.Refuse, policy.Write}, {policy.AskFirst, policy.Secret}, {policy.AskFirst, policy.Net}}
	if len(a.Steps) != len(want) {
		t.Fatalf("steps %+v", a.Steps)
	}
	for i, w := range want {
		if s := a.Steps[i]; s.Verdict != w.verdict || s.Effects&w.effect == 0 {
			t.Errorf("step %d (%s): %v %v, want %v with %v", i+1, s.Command, s.Verdict, s.Effects, w.verdict, w.effect)
		}
	}
	if a.Steps[1].Rule == "" {
		t.Errorf("the deny rule is not named: %+v", a.Steps[1])
	}
	if _, err := Judge(o, ws, "echo 'open"); err == nil {
		t.Error("a script that does not parse was judged")
	} else if c, _ := errdefs.Of(err); c != errdefs.InvalidArgument {
		t.Errorf("syntax error of class %v", c)
	}
	var oe *OptionError
	if _, err := Judge(Options{Workspace: ws}, ws, "true"); !errors.As(err, &oe) {
		t.Errorf("no settings: %v", err)
	}
}
