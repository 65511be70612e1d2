package policy

import (
	"fmt"
	"strings"
)

// This file holds the approval decisions: which rule decides a step first, where a question
// goes when a step asks, and the gateway rule. All are pure.

// Presence is who is attached to one session of a chain.
type Presence struct {
	Interactive int // interactive clients (a terminal, a dashboard): they are shown questions
	Gateways    int // gateway clients (a phone, a bot): they show no question
}

// RouteKind is where a question goes next.
type RouteKind int

const (
	// AskClients: show the question to the interactive clients of the session.
	AskClients RouteKind = iota
	// ByGateway: the session's gateway rule answers at once.
	ByGateway
	// NoAnswer: no session in the chain can answer: the question is unanswered (a denial).
	NoAnswer
)

func (k RouteKind) String() string {
	return [...]string{"ask_clients", "gateway_rule", "unanswered"}[k]
}

// Route is the next place of a question: a kind and the session (an index into the chain).
type Route struct {
	Kind    RouteKind
	Session int
}

// NextRoute decides where a question goes, looking up the chain from session `from` (0 is
// the session whose step asks, the last the root): the first session with an interactive
// client is asked; a session on the way whose only clients are gateways answers by the
// gateway rule (a subagent's question fares there as that session's own step); past the
// root the question is unanswered. When the interactive clients of an asked session all
// leave without answering, the route is taken again from that session: its gateway, if it
// has one, answers; else the question goes on up.
func NextRoute(chain []Presence, from int) Route {
	for i := max(from, 0); i < len(chain); i++ {
		switch p := chain[i]; {
		case p.Interactive > 0:
			return Route{Kind: AskClients, Session: i}
		case p.Gateways > 0:
			return Route{Kind: ByGateway, Session: i}
		}
	}
	return Route{Kind: NoAnswer, Session: len(chain) - 1}
}

// GatewayRefuses are the effects the gateway rule refuses; it runs every other step.
const GatewayRefuses = Protected | Secret

// GatewayRule answers for a session whose only clients are gateways, which show no question:
// a step with protected or secret is refused, every other step runs.
func GatewayRule(e Effects) (run bool) { return e&GatewayRefuses == 0 }

// RuleAction is what a shell rule does with a step it matches.
type RuleAction int

const (
	NoRule    RuleAction = iota // no rule matched: the auto set decides
	AllowRule                   // run unasked (never a secret step)
	AskRule                     // ask, whatever the auto set
	DenyRule                    // refuse at once
)

func (a RuleAction) String() string {
	return [...]string{"none", "allow", "ask", "deny"}[a]
}

// ShellRule allows, asks for or denies the steps whose words start with Prefix.
type ShellRule struct {
	Action RuleAction
	Prefix []string // e.g. ["go", "test"]
	Source string   // where the rule came from: a settings file, "session"
	// Bounded rules cover only steps whose effects Within holds: the "always" a person gave
	// to a step covers the same command with no effect beyond those they saw (an always for
	// rm x is not one for rm -rf .git). A trusted rule from the settings is not bounded.
	Bounded bool
	Within  Effects
}

// Covers reports whether the rule may decide a step with effects e.
func (r ShellRule) Covers(e Effects) bool { return !r.Bounded || e&^r.Within == 0 }

// String writes the rule as settings spell it.
func (r ShellRule) String() string {
	return fmt.Sprintf("%s %q", r.Action, strings.Join(r.Prefix, " "))
}

// ParseRuleAction reads allow, ask or deny.
func ParseRuleAction(s string) (RuleAction, error) {
	switch s {
	case "allow":
		return AllowRule, nil
	case "ask":
		return AskRule, nil
	case "deny":
		return DenyRule, nil
	}
	return NoRule, fmt.Errorf("unknown rule action %q (want allow, ask or deny)", s)
}

// Matches reports whether argv starts with the rule's words.
func (r ShellRule) Matches(argv []string) bool {
	if len(r.Prefix) == 0 || len(argv) < len(r.Prefix) {
		return false
	}
	for i, w := range r.Prefix {
		if argv[i] != w {
			return false
		}
	}
	return true
}

// MatchRules returns the action of the rules for a step: deny wins, then ask, then allow; the
// rule returned is the one that decided (nil when none matched).
func MatchRules(rules []ShellRule, argv []string) (RuleAction, *ShellRule) {
	best, which := NoRule, -1
	for i, r := range rules {
		if r.Matches(argv) && r.Action > best {
			best, which = r.Action, i
		}
	}
	if which < 0 {
		return NoRule, nil
	}
	return best, &rules[which]
}

// Verdict is how a step fares before anyone is asked.
type Verdict int

const (
	RunNow   Verdict = iota // runs unasked
	AskFirst                // a question takes its route
	Refuse                  // refused at once by a deny rule
)

func (v Verdict) String() string {
	return [...]string{"run", "ask", "refuse"}[v]
}

// MarshalText writes the verdict's name.
func (v Verdict) MarshalText() ([]byte, error) { return []byte(v.String()), nil }

// Decide is how a step fares before anyone is asked, from its effects, the rules and the
// auto set, and where its question would go first (first: NextRoute's kind for the step's
// session). parts are the leading words of every command the step runs: a deny or an ask
// matching any part decides; an allow only when it matches every part. A bounded rule
// decides only a step its effects cover. An allow rule never takes the gateway rule's place:
// where the gateway rule would answer, a step with an effect it refuses takes the route.
// The rule returned is the one that decided (nil: none did).
//
// Laws: secret never runs unasked (auto_never_sensitive); a step runs unasked only within
// the auto set or by an allow rule that covers it (gate_needs_yes); the gateway rule refuses
// what it refuses whatever the rules (gateway_refuses_protected, gateway_refuses_secret).
func Decide(e Effects, auto AutoSet, rules []ShellRule, parts [][]string, first RouteKind) (Verdict, *ShellRule) {
	best, which := NoRule, (*ShellRule)(nil)
	allowed := 0
	for _, p := range parts {
		a, r := NoRule, -1
		for i, rule := range rules {
			if rule.Matches(p) && rule.Covers(e) && rule.Action > a {
				a, r = rule.Action, i
			}
		}
		if a == AllowRule {
			allowed++
		}
		if a > best {
			best, which = a, &rules[r]
		}
	}
	if best == AllowRule && allowed != len(parts) {
		best, which = NoRule, nil
	}
	if best == AllowRule && first == ByGateway && e&GatewayRefuses != 0 {
		return AskFirst, which
	}
	return Gate(e, auto, best), which
}

// Gate decides a step before anyone is asked: a deny rule refuses it; an ask rule asks; an
// allow rule runs it unless it has secret (then it asks); with no rule the auto set decides.
// Secret never runs unasked, whatever the rules and the auto set.
func Gate(e Effects, auto AutoSet, rule RuleAction) Verdict {
	switch rule {
	case DenyRule:
		return Refuse
	case AskRule:
		return AskFirst
	case AllowRule:
		if e.Has(Secret) {
			return AskFirst
		}
		return RunNow
	}
	if auto.Decide(e) == Run {
		return RunNow
	}
	return AskFirst
}
