package session

import (
	"os"

	"github.com/paddockhq/paddock/orchestrator"
	"github.com/paddockhq/paddock/policy"
	"github.com/paddockhq/paddock/script"
	"github.com/paddockhq/paddock/transport/environ"
)

// Judge judges src, without running it, as a session opened with o would with nobody
// attached, working in cwd: each step's words expanded over this process's environment
// (credentials left out), its effects judged against o.Workspace and the session's own
// places (its audit file among them), and its verdict given by the settings' rules and auto
// set (policy.Check). A script that does not parse is its error.
func Judge(o Options, cwd, src string) (policy.Analysis, error) {
	if o.Settings == nil {
		return policy.Analysis{}, &OptionError{Msg: "session: no settings"}
	}
	pol, err := Policy(o.Settings)
	if err != nil {
		return policy.Analysis{}, err
	}
	pol.AuditFile = o.AuditFile
	sc, err := script.Parse(src)
	if err != nil {
		return policy.Analysis{}, err
	}
	ctx := &policy.Context{Cwd: cwd, Env: environ.Local(os.Environ()), Roots: []string{o.Workspace}, Settings: pol.Settings,
		Auto: *pol.Auto, Rules: pol.Rules, Own: orchestrator.OwnPlaces(orchestrator.Config{Policy: pol})}
	return policy.Check(ctx, sc), nil
}
