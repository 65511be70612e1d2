package config

import (
	"errors"
	"path/filepath"
	"slices"
	"testing"

	"github.com/paddockhq/paddock/orchestrator/output"
)

// The trusted sources read as before: the global file's keys in any case, PADDOCK_* over it,
// and a project's file below both; each value's source is named.
func TestTrustedSourcesUnaffected(t *testing.T) {
	cfg := t.TempDir()
	t.Setenv("XDG_CONFIG_HOME", cfg)
	global := filepath.Join(cfg, "paddock", "settings.yaml")
	write(t, global, "KernelTransport:\n  Kind: local\n  WRAPPED: {argvPrefix: [box]}\nSSH: {Hosts: [box]}\nshell:\n  autoeffects: [read]\noutput: {lines: 7}\n")
	ws := t.TempDir()
	project := filepath.Join(ws, ".paddock", "settings.yaml")
	write(t, project, "OUTPUT:\n  Mode: head\n  lines: 3\n  bytes: 1000\nshell: {blockingBudget: 5s}\nkernelTranſport: {kind: docker}\n")
	t.Setenv("PADDOCK_OUTPUT_BYTES", "2000")
	t.Setenv("PADDOCK_SSH_HOSTS", "a,b")
	l, err := Load(Options{Workspace: ws})
	if err != nil {
		t.Fatal(err)
	}
	s := l.Settings
	if s.KernelTransport.Kind != "local" || !slices.Equal(s.KernelTransport.Wrapped.ArgvPrefix, []string{"box"}) ||
		!slices.Equal(s.SSH.Hosts, []string{"a", "b"}) || !slices.Equal(s.Shell.AutoEffects, []string{"read"}) ||
		s.Output.Limit != (output.Limit{Bytes: 2000, Lines: 7, Mode: output.Head}) || s.Shell.BlockingBudget != "5s" {
		t.Fatalf("settings %+v", s)
	}
	for k, src := range map[string]string{
		"kerneltransport.kind": global, "ssh.hosts": "env PADDOCK_SSH_HOSTS", "output.bytes": "env PADDOCK_OUTPUT_BYTES",
		"output.lines": global, "output.mode": project, "shell.blockingbudget": project, "shell.autoeffects": global,
	} {
		if l.Sources[k] != src {
			t.Errorf("source of %s = %q, want %q", k, l.Sources[k], src)
		}
	}
	if len(l.Ignored) != 1 || l.Ignored[0].Code() != IgnoredNotAllowed {
		t.Errorf("ignored %v", ignoredText(l.Ignored))
	}
}

// Two keys of one table of the global file that name one setting (they differ in case, or
// fold together in Unicode) make Load fail, naming both: which would win is a guess.
func TestGlobalAmbiguousKeysRefused(t *testing.T) {
	for name, body := range map[string]string{
		"settings.yaml":      "kernelTransport:\n  kind: local\n  Kind: docker\n",
		"settings.yml":       "ssh: {hosts: [a]}\nſsh: {hosts: [b]}\n",
		"settings.json":      `{"shell": {"rules": [{"action": "deny", "command": "rm"}, {"action": "deny", "Action": "allow", "command": "curl"}]}}`,
		"settings.toml":      "[kernelTransport]\nkind = \"local\"\n\"\u212aind\" = \"wrapped\"\n",
		"json-exact-twice":   `{"kernelTransport": {"kind": "local"}, "kernelTransport": {"kind": "wrapped"}}`,
		"yaml-nested-tables": "kernelTransport:\n  docker: {image: a}\n  Docker: {image: b}\n",
		// Read before this rule, this file gave kind local or wrapped at random.
		"yaml-long-s": "kernelTransport: {kind: local}\nkernelTran\u017fport: {kind: wrapped}\n",
	} {
		t.Run(name, func(t *testing.T) {
			file := name
			switch name {
			case "json-exact-twice":
				file = "settings.json"
			case "yaml-nested-tables", "yaml-long-s":
				file = "settings.yaml"
			}
			p := filepath.Join(t.TempDir(), file)
			write(t, p, body)
			t.Setenv("XDG_CONFIG_HOME", t.TempDir())
			_, err := Load(Options{GlobalFile: p})
			if !errors.Is(err, ErrAmbiguous) {
				t.Fatalf("Load = %v, want %v", err, ErrAmbiguous)
			}
		})
	}
}

// Distinct keys, the same key in different tables and a YAML merge are not ambiguous.
func TestGlobalKeysNotAmbiguous(t *testing.T) {
	for _, c := range []struct{ format, body string }{
		{"yaml", "kernelTransport:\n  kind: local\n  ssh: {host: a}\nssh: {hosts: [a]}\n"},
		{"yaml", "base: &b {image: a}\nkernelTransport:\n  docker:\n    <<: *b\n    image: b\n"},
		{"json", `{"shell": {"rules": [{"action": "deny", "command": "rm"}, {"action": "ask", "command": "curl"}]}}`},
		{"toml", "[kernelTransport]\nkind = \"local\"\n[kernelTransport.docker]\nkind = \"x\"\n"},
	} {
		if err := ambiguousKeys(c.format, []byte(c.body)); err != nil {
			t.Errorf("%s %q: %v", c.format, c.body, err)
		}
	}
}
