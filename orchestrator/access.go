package orchestrator

import (
	"context"
	"os"

	"github.com/paddockhq/paddock/policy"
)

// fsHandlers are the session's fs.read and fs.write: paths mapped and judged by the policy;
// an access outside the auto set takes the approval route like a step.
func (s *Session) fsHandlers() map[string]Handler {
	var home string
	if s.cfg.PathMap != nil { // a sandbox's HOME is not where the host's credential stores are
		home, _ = os.UserHomeDir()
	}
	return FSHandlers(FSConfig{
		Home:      home,
		PathMap:   s.cfg.PathMap,
		Roots:     []string{s.cfg.Workspace},
		Env:       s.cfg.Env,
		Settings:  s.cfg.Policy.Settings,
		Ephemeral: s.cfg.Ephemeral,
		Own:       OwnPlaces(s.cfg),
		Auto:      s.cfg.Policy.Auto,
		Ask:       s.askAccess,
	})
}

// askAccess puts a file access to the approval route and records the verdict.
func (s *Session) askAccess(ctx context.Context, op FSOp, e policy.Effects) (bool, string) {
	what := "fs.read " + op.Sandbox
	if op.Write {
		what = "fs.write " + op.Sandbox
	}
	q := Question{ID: newQuestionID(), Session: s.id, Step: -1, Command: policy.Quote([]string{what}), Effects: e.Strings()}
	if s.parent != nil {
		q.Subagent = s.name
	}
	r := s.route(ctx, q, e)
	if s.pgate != nil {
		s.pgate.record(auditRecord{Session: s.id, Subagent: s.name, Step: -1, Command: what, Effects: e.Strings(),
			Question: q.ID, DecidedBy: r.Outcome, At: r.At, By: r.By, Outcome: r.Outcome})
	}
	return r.Run, r.Code
}
