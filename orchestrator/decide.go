package orchestrator

import (
	"context"
	"os"
	"slices"
	"sync"

	"github.com/paddockhq/paddock/policy"
)

// Policy is what decides a session's steps: the facts the policy judges paths by, the auto
// set, and the trusted rules.
type Policy struct {
	// Context holds the path facts; nil: built from the session (its workspace and
	// environment, the identity path map).
	Context *policy.Context
	// Auto is the auto set; nil: policy.DefaultAutoSet().
	Auto *policy.AutoSet
	// Rules are the trusted shell rules, evaluated before the auto set.
	Rules []policy.ShellRule
	// Settings are the settings files loaded: each is protected.
	Settings []string
	// AuditFile receives every verdict as a JSON line (created 0600): every step's, and
	// every file access's (fs.read, fs.write); "": audit.jsonl in the session's state
	// directory, when it has one.
	AuditFile string
	// Own are Paddock's own places to keep from the session beyond this host's defaults
	// (package place), its audit file and its kernel's listening directory: a daemon's state
	// directory and socket, say.
	Own policy.Own
}

// policyGate is a session's own gatekeeper: the policy gives a step's effects, the rules and
// the auto set decide, and a step that asks takes the approval route.
type policyGate struct {
	s     *Session
	pctx  *policy.Context
	auto  policy.AutoSet
	rules []policy.ShellRule
	// keeper, when set, decides steps in place of the rules, the auto set and the route.
	keeper Gatekeeper

	mu           sync.Mutex
	sessionRules []policy.ShellRule // guarded by mu: "allow for the rest of the session"
}

func newPolicyGate(s *Session, p Policy) *policyGate {
	g := &policyGate{s: s, pctx: p.Context, auto: policy.DefaultAutoSet(), rules: p.Rules}
	if p.Auto != nil {
		g.auto = *p.Auto
	}
	if g.pctx == nil {
		g.pctx = &policy.Context{Cwd: s.cwd, Env: s.cfg.Env, Roots: []string{s.cfg.Workspace}, Settings: p.Settings,
			Ephemeral: s.cfg.Ephemeral, Own: OwnPlaces(s.cfg)}
		g.pctx.Home, g.pctx.HostEnv, g.pctx.ConfigDir, g.pctx.Secrets = s.hostFacts()
		if s.cfg.PathMap != nil {
			if g.pctx.Home == "" {
				// The credential stores are the host's: a sandbox's HOME is not where they are.
				g.pctx.Home, _ = os.UserHomeDir()
			}
			m := s.cfg.PathMap
			g.pctx.ToHost = func(p string) (string, bool) {
				h, err := m.ToHost(p)
				return h, err == nil
			}
		}
	}
	return g
}

// Decide gives a step its effects and decides it, asking up the chain when it must.
func (g *policyGate) Decide(ctx context.Context, step Step) Verdict {
	var e policy.Effects
	var prefixes [][]string
	e = policy.StepEffects(g.pctx, policy.Step{Argv: step.Argv, Assigns: step.Assigns, Redirects: step.Redirects, Cwd: step.Cwd, Builtin: step.Builtin, Beside: step.Beside})
	if len(step.Argv) > 0 {
		prefixes = [][]string{step.Argv}
	}
	if g.keeper != nil {
		v := g.keeper.Decide(ctx, step)
		v.Effects = e
		rec := auditRecord{Session: g.s.id, Subagent: g.s.name, Step: step.Index, Command: step.Command, Effects: v.Effects, DecidedBy: "gatekeeper", Outcome: "run"}
		if !v.Run {
			rec.Outcome, rec.Code = "refused", v.Code
		}
		g.s.audit.record(rec)
		return v
	}
	g.mu.Lock()
	rules := append(slices.Clone(g.rules), g.sessionRules...)
	g.mu.Unlock()
	verdict, rule := policy.Decide(e, g.auto, rules, prefixes, g.s.firstRoute())
	rec := auditRecord{Session: g.s.id, Subagent: g.s.name, Step: step.Index, Command: step.Command, Effects: e, Rule: ruleText(rule)}
	v := Verdict{Effects: e}
	switch verdict {
	case policy.RunNow:
		v.Run = true
		rec.DecidedBy, rec.Outcome = "auto", "run"
		if rule != nil && rule.Action == policy.AllowRule {
			rec.DecidedBy = "rule"
		}
	case policy.Refuse:
		v.Code, v.Message = "denied", "a rule denies it: "+rule.String()
		rec.DecidedBy, rec.Outcome, rec.Code = "rule", "denied", v.Code
	default:
		q := Question{ID: newQuestionID(), Session: g.s.id, Step: step.Index, Command: step.Command, Effects: e}
		if g.s.parent != nil {
			q.Subagent = g.s.name
		}
		r := g.s.route(ctx, q, e)
		v.Run, v.Code = r.Run, r.Code
		rec.Question, rec.DecidedBy, rec.At, rec.By, rec.Outcome = q.ID, r.Outcome, r.At, r.By, r.Outcome
		if r.Run && r.Answer.ForSession && len(step.Argv) > 0 {
			g.mu.Lock()
			g.sessionRules = append(g.sessionRules, policy.ShellRule{Action: policy.AllowRule, Prefix: sessionPrefix(step.Argv), Source: "session",
				Bounded: true, Within: e})
			g.mu.Unlock()
		}
		if !v.Run {
			v.Message = refusalGuidance(v.Code)
			rec.Code = v.Code
		}
	}
	g.s.audit.record(rec)
	return v
}

// sessionPrefix is what "allow for the rest of the session" allows: the command, and its
// subcommand for tools that have them.
func sessionPrefix(argv []string) []string {
	switch argv[0] {
	case "git", "go", "npm", "pnpm", "yarn", "cargo", "docker", "kubectl", "make", "pip", "uv":
		if len(argv) > 1 && len(argv[1]) > 0 && argv[1][0] != '-' {
			return slices.Clone(argv[:2])
		}
	}
	return slices.Clone(argv[:1])
}

func ruleText(r *policy.ShellRule) string {
	if r == nil {
		return ""
	}
	return r.String()
}

// refusalGuidance is the next step the agent is told for each refusal.
func refusalGuidance(code string) string {
	switch code {
	case "denied":
		return "the user said no; do not retry it unless the user asks"
	case "unanswered":
		return "nobody was attached to answer; attach a client, or widen the auto set if the effect is not secret"
	case "gateway_refused":
		return "a protected or secret step cannot be approved from a gateway; run it from an interactive client"
	case "cancelled":
		return "the step was cancelled before it was answered"
	}
	return ""
}
