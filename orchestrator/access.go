package orchestrator

import (
	"context"
	"os"

	"github.com/paddockhq/paddock/policy"
)

// fsHandlers are the session's fs.read and fs.write: paths mapped and judged by the policy;
// an access outside the auto set takes the approval route like a step.
func (s *Session) fsHandlers() map[string]Handler {
	home, hostEnv, _, _ := s.hostFacts()
	if s.cfg.PathMap != nil && home == "" { // a sandbox's HOME is not where the host's credential stores are
		home, _ = os.UserHomeDir()
	}
	return FSHandlers(FSConfig{
		Home:      home,
		HostEnv:   hostEnv,
		PathMap:   s.cfg.PathMap,
		Roots:     []string{s.cfg.Workspace},
		Env:       s.cfg.Env,
		Settings:  s.cfg.Policy.Settings,
		Ephemeral: s.cfg.Ephemeral,
		Own:       OwnPlaces(s.cfg),
		Auto:      s.cfg.Policy.Auto,
		Ask:       s.askAccess,
		Record:    s.recordAccess,
	})
}

// askAccess puts a file access to the approval route.
func (s *Session) askAccess(ctx context.Context, op FSOp, e policy.Effects) FSAnswer {
	q := Question{ID: newQuestionID(), Session: s.id, Step: -1, Command: policy.Quote([]string{accessCommand(op)}), Effects: e}
	if s.parent != nil {
		q.Subagent = s.name
	}
	r := s.route(ctx, q, e)
	return FSAnswer{Run: r.Run, Code: r.Code, Question: q.ID, Outcome: r.Outcome, At: r.At, By: r.By}
}

// recordAccess keeps a file access's verdict in the session's audit, as a step's is kept.
func (s *Session) recordAccess(r FSRecord) {
	s.audit.record(auditRecord{Session: s.id, Subagent: s.name, Step: -1, Command: accessCommand(r.Op), Host: r.Op.Host,
		Effects: r.Effects, Question: r.Question, DecidedBy: r.DecidedBy, At: r.At, By: r.By,
		Outcome: r.Outcome, Code: r.Code})
}

// accessCommand is how a file access reads in a question and a record: fs.read <path>.
func accessCommand(op FSOp) string { return op.command() }
