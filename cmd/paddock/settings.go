package main

import (
	"fmt"
	"io"
	"maps"
	"os"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/paddockhq/paddock/config"
	"github.com/paddockhq/paddock/daemon"
	"github.com/paddockhq/paddock/orchestrator"
	"github.com/paddockhq/paddock/place"
	"github.com/paddockhq/paddock/policy"
)

// loadSettings reads the settings for a command working in workspace, binding the command's
// flags named in keys; warnings go to w.
func loadSettings(workspace string, fs *pflag.FlagSet, keys map[string]string, w io.Writer) (*config.Loaded, error) {
	l, err := config.Load(config.Options{Workspace: workspace, Flags: fs, FlagKeys: keys})
	if err != nil {
		// The settings are the command line's extension: one that cannot be read is a usage
		// error, as a bad flag is.
		return nil, &usageError{msg: err.Error(), err: err}
	}
	for _, warn := range l.Warnings {
		fmt.Fprintln(w, "paddock: warning:", warn)
	}
	return l, nil
}

// sessionPolicy is the policy the settings give a session.
func sessionPolicy(l *config.Loaded) (orchestrator.Policy, error) {
	auto, err := policy.ParseAutoSet(l.Settings.Shell.AutoEffects)
	if err != nil {
		return orchestrator.Policy{}, &usageError{msg: "shell.autoEffects: " + err.Error()}
	}
	p := orchestrator.Policy{Auto: &auto, Settings: l.Files, AuditFile: auditFile()}
	for i, r := range l.Settings.Shell.Rules {
		a, err := policy.ParseRuleAction(r.Action)
		if err != nil {
			return orchestrator.Policy{}, &usageError{msg: fmt.Sprintf("shell.rules[%d]: %v", i, err)}
		}
		p.Rules = append(p.Rules, policy.ShellRule{Action: a, Prefix: strings.Fields(r.Command), Source: l.Sources["shell.rules"]})
	}
	return p, nil
}

// jobTimeout reads shell.jobTimeout: a duration such as 30m, or a bare number of seconds; ""
// or "-1": none.
func jobTimeout(l *config.Loaded) (time.Duration, error) {
	v := l.Settings.Shell.JobTimeout
	if v == "" {
		return 0, nil
	}
	d, err := daemon.ParseDuration(v)
	if err != nil {
		return 0, &usageError{msg: "shell.jobTimeout: " + err.Error()}
	}
	return max(d, 0), nil
}

// withKeys joins flag-to-key bindings.
func withKeys(sets ...map[string]string) map[string]string {
	out := map[string]string{}
	for _, s := range sets {
		maps.Copy(out, s)
	}
	return out
}

// auditFile is where the CLI's own sessions record their verdicts, one JSON line each:
// audit.jsonl in place.StateDir(). "" when the directory cannot be made.
func auditFile() string {
	dir := place.StateDir()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return ""
	}
	return place.AuditFile(dir)
}
