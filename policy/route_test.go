package policy

import (
	"math/rand/v2"
	"testing"
)

func TestNextRoute(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		chain []Presence
		from  int
		want  Route
	}{
		{"own client", []Presence{{Interactive: 1}}, 0, Route{AskClients, 0}},
		{"child answered by root", []Presence{{}, {}, {Interactive: 2}}, 0, Route{AskClients, 2}},
		{"nearest wins", []Presence{{}, {Interactive: 1}, {Interactive: 1}}, 0, Route{AskClients, 1}},
		{"gateway alone", []Presence{{Gateways: 1}, {Interactive: 1}}, 0, Route{ByGateway, 0}},
		{"client beside gateway", []Presence{{Interactive: 1, Gateways: 1}}, 0, Route{AskClients, 0}},
		{"left to the gateway", []Presence{{Gateways: 1}}, 0, Route{ByGateway, 0}},
		{"subagent reaches a gateway", []Presence{{}, {Gateways: 1}, {Interactive: 1}}, 0, Route{ByGateway, 1}},
		{"quiet chain", []Presence{{}, {}}, 0, Route{NoAnswer, 1}},
		{"from above", []Presence{{Interactive: 1}, {}, {Interactive: 1}}, 1, Route{AskClients, 2}},
	} {
		if got := NextRoute(tc.chain, tc.from); got != tc.want {
			t.Errorf("%s: NextRoute = %+v, want %+v", tc.name, got, tc.want)
		}
	}
}

func randomChain(rng *rand.Rand) []Presence {
	chain := make([]Presence, 1+rng.IntN(4))
	for i := range chain {
		if rng.IntN(3) == 0 {
			chain[i].Interactive = 1 + rng.IntN(2)
		}
		if rng.IntN(3) == 0 {
			chain[i].Gateways = 1
		}
	}
	return chain
}

// law: nearest_answer_wins, child_answered_by_root, unanswered_only_when_quiet, quiet_is_unanswered
func TestRouteLaws(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(3, 4))
	for i := 0; i < 10000; i++ {
		chain := randomChain(rng)
		r := NextRoute(chain, 0)
		// Nothing below the chosen session could answer.
		for j := 0; j < r.Session && r.Kind != NoAnswer; j++ {
			if chain[j].Interactive > 0 || chain[j].Gateways > 0 {
				t.Fatalf("%v: routed to %d past answering session %d", chain, r.Session, j)
			}
		}
		switch r.Kind {
		case AskClients:
			if chain[r.Session].Interactive == 0 {
				t.Fatalf("%v: asked a session with no interactive client", chain)
			}
		case ByGateway:
			// law: gateway_never_waits: a gateway-only session asks no one.
			if chain[r.Session].Interactive != 0 || chain[r.Session].Gateways == 0 {
				t.Fatalf("%v: gateway rule at a session that is not gateway-only", chain)
			}
		case NoAnswer:
			for _, p := range chain {
				if p.Interactive > 0 || p.Gateways > 0 {
					t.Fatalf("%v: unanswered though a session could answer", chain)
				}
			}
		}
	}
}

// law: gateway_refuses_protected, gateway_refuses_secret, gateway_runs_the_rest
func TestGatewayRule(t *testing.T) {
	t.Parallel()
	for e := Effects(0); e <= All; e++ {
		want := !e.Has(Protected) && !e.Has(Secret)
		if GatewayRule(e) != want {
			t.Errorf("GatewayRule(%v) = %v", e, !want)
		}
	}
}

// law: auto_never_sensitive, never_auto_is_routed, auto_needs_every_effect
func TestGateSecretNeverRunsUnasked(t *testing.T) {
	t.Parallel()
	for auto := Effects(0); auto <= grantable; auto++ {
		a := AutoSet{auto}
		for e := Effects(0); e <= All; e++ {
			for _, rule := range []RuleAction{NoRule, AllowRule, AskRule, DenyRule} {
				v := Gate(e, a, rule)
				if e.Has(Secret) && v == RunNow {
					t.Fatalf("secret ran unasked: effects %v, auto %v, rule %v", e, a, rule)
				}
				if rule == NoRule && (v == RunNow) != (e&^auto == 0) {
					t.Fatalf("effects %v, auto %v: %v", e, a, v)
				}
				if rule == DenyRule && v != Refuse {
					t.Fatalf("a deny rule did not refuse")
				}
			}
		}
	}
}

func TestMatchRules(t *testing.T) {
	t.Parallel()
	rules := []ShellRule{
		{Action: AllowRule, Prefix: []string{"go", "test"}},
		{Action: AskRule, Prefix: []string{"go"}},
		{Action: DenyRule, Prefix: []string{"go", "test", "-exec"}},
		{Action: AllowRule, Prefix: []string{"npm", "run", "lint"}},
	}
	for _, tc := range []struct {
		argv []string
		want RuleAction
	}{
		{[]string{"go", "test", "./..."}, AskRule}, // ask wins over allow
		{[]string{"go", "test", "-exec", "x"}, DenyRule},
		{[]string{"npm", "run", "lint"}, AllowRule},
		{[]string{"npm", "run"}, NoRule},
		{[]string{"ls"}, NoRule},
	} {
		if got, _ := MatchRules(rules, tc.argv); got != tc.want {
			t.Errorf("MatchRules(%v) = %v, want %v", tc.argv, got, tc.want)
		}
	}
}
