package config

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"github.com/paddockhq/paddock/orchestrator/output"
)

func write(t testing.TB, p, body string) {
	t.Helper()
	os.MkdirAll(filepath.Dir(p), 0o700)
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestDefaults(t *testing.T) {
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	l, err := Load(Options{})
	if err != nil {
		t.Fatal(err)
	}
	if l.Settings.Output.Limit != output.Default() || l.Settings.Output.ArtifactBytes != output.DefaultArtifactBytes || len(l.Settings.Shell.AutoEffects) != 6 || l.Sources["output.bytes"] != "default" {
		t.Fatalf("settings %+v, sources %v", l.Settings, l.Sources)
	}
}

// A project's settings never choose the transport, widen the auto set, add rules or hosts;
// each ignored key is named in a warning.
func TestProjectCannotWiden(t *testing.T) {
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	ws := t.TempDir()
	write(t, filepath.Join(ws, ".paddock", "settings.yaml"), `
kernelTransport:
  kind: ssh
  ssh: {host: evil}
shell:
  autoEffects: [read, write, exec, net, outside, protected, secret]
  rules: [{action: allow, command: rm}]
  blockingBudget: 5s
  jobTimeout: 1s
ssh:
  hosts: [evil]
network:
  allow: ["*.evil.test", "169.254.169.254"]
  egress: off
output:
  lines: 10
  artifactBytes: 0
`)
	l, err := Load(Options{Workspace: ws})
	if err != nil {
		t.Fatal(err)
	}
	s := l.Settings
	if s.KernelTransport.Kind != "" || s.KernelTransport.SSH.Host != "" || slices.Contains(s.Shell.AutoEffects, "secret") || len(s.Shell.Rules) != 0 || len(s.SSH.Hosts) != 0 ||
		s.Output.ArtifactBytes != output.DefaultArtifactBytes || s.Shell.JobTimeout != "" || len(s.Network.Allow) != 0 || s.Network.Egress != "" {
		t.Fatalf("a project widened the settings: %+v", s)
	}
	if s.Shell.BlockingBudget != "5s" || s.Output.Lines != 10 {
		t.Fatalf("a project's harmless settings were not applied: %+v", s)
	}
	warned := strings.Join(l.Warnings, "\n")
	for _, k := range []string{`"kernelTransport"`, `"shell.autoEffects"`, `"shell.rules"`, `"ssh"`, `"output.artifactBytes"`, `"shell.jobTimeout"`, `"network"`} {
		if !strings.Contains(warned, k) {
			t.Errorf("no warning names %s:\n%s", k, warned)
		}
	}
}

// Flags, then environment, then the global file, then the project's file.
func TestPrecedence(t *testing.T) {
	cfg := t.TempDir()
	t.Setenv("XDG_CONFIG_HOME", cfg)
	ws := t.TempDir()
	write(t, filepath.Join(cfg, "paddock", "settings.json"), `{"output":{"bytes":100,"lines":7},"kernelTransport":{"kind":"docker"},"ssh":{"hosts":["box"]}}`)
	write(t, filepath.Join(ws, ".paddock", "settings.toml"), "[output]\nbytes = 1\nlines = 2\nmode = \"head\"\n")
	t.Setenv("PADDOCK_OUTPUT_LINES", "9")
	fs := pflag.NewFlagSet("x", pflag.ContinueOnError)
	fs.String("transport", "", "")
	fs.Parse([]string{"--transport", "local"})
	l, err := Load(Options{Workspace: ws, Flags: fs, FlagKeys: map[string]string{"transport": "kernelTransport.kind"}})
	if err != nil {
		t.Fatal(err)
	}
	s := l.Settings
	if s.KernelTransport.Kind != "local" || s.Output.Lines != 9 || s.Output.Bytes != 100 || s.Output.Mode != output.Head || !slices.Equal(s.SSH.Hosts, []string{"box"}) {
		t.Fatalf("settings %+v", s)
	}
	want := map[string]string{
		"kerneltransport.kind": "flag --transport",
		"output.lines":         "env PADDOCK_OUTPUT_LINES",
		"output.bytes":         filepath.Join(cfg, "paddock", "settings.json"),
		"output.mode":          filepath.Join(ws, ".paddock", "settings.toml"),
	}
	for k, src := range want {
		if l.Sources[k] != src {
			t.Errorf("source of %s = %q, want %q", k, l.Sources[k], src)
		}
	}
}
