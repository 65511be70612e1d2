package policy

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// Examples of Decide: an "always" covers only what the person saw; an allow rule never
// takes the gateway rule's place; deny and ask rules decide on any part.
func TestDecide(t *testing.T) {
	t.Parallel()
	auto, _ := ParseAutoSet([]string{"read"})
	always := ShellRule{Action: AllowRule, Prefix: []string{"rm"}, Source: "session", Bounded: true, Within: Write}
	trusted := ShellRule{Action: AllowRule, Prefix: []string{"touch"}, Source: "settings"}
	deny := ShellRule{Action: DenyRule, Prefix: []string{"curl"}}
	for _, tc := range []struct {
		name  string
		e     Effects
		rules []ShellRule
		parts [][]string
		first RouteKind
		want  Verdict
	}{
		{"always covers the same command, same effects", Write, []ShellRule{always}, [][]string{{"rm", "y"}}, AskClients, RunNow},
		{"always does not cover more effects (rm -rf .git)", Write | Protected, []ShellRule{always}, [][]string{{"rm", "-rf", ".git"}}, AskClients, AskFirst},
		{"always does not cover outside", Write | Outside, []ShellRule{always}, [][]string{{"rm", "/etc/x"}}, AskClients, AskFirst},
		{"always covers fewer effects", 0, []ShellRule{always}, [][]string{{"rm", "-h"}}, AskClients, RunNow},
		{"a trusted allow runs a protected write for a person", Write | Protected, []ShellRule{trusted}, [][]string{{"touch", ".git/hooks/x"}}, AskClients, RunNow},
		{"a trusted allow yields to the gateway rule", Write | Protected, []ShellRule{trusted}, [][]string{{"touch", ".git/hooks/x"}}, ByGateway, AskFirst},
		{"a trusted allow, nothing the gateway refuses", Write, []ShellRule{trusted}, [][]string{{"touch", "x"}}, ByGateway, RunNow},
		{"allow never runs secret", Read | Secret, []ShellRule{trusted}, [][]string{{"touch", "~/.ssh/x"}}, AskClients, AskFirst},
		{"allow must match every part", Write, []ShellRule{trusted}, [][]string{{"touch", "x"}, {"chmod", "x"}}, AskClients, AskFirst},
		{"deny on any part", Read, []ShellRule{trusted, deny}, [][]string{{"touch", "x"}, {"curl", "u"}}, AskClients, Refuse},
		{"no rule: the auto set", Read, nil, [][]string{{"cat", "x"}}, ByGateway, RunNow},
	} {
		if got, _ := Decide(tc.e, auto, tc.rules, tc.parts, tc.first); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

// law: gate_needs_yes
// Over random rule sets, steps, auto sets and routes, a step runs unasked only when nothing
// about it needs a yes: no secret, and either the auto set holds its effects and no rule
// that covers it asks or denies, or an allow rule that covers it matches every part and the
// gateway rule would not refuse it. A bounded rule that does not cover a step never changes
// its verdict. A deny rule that matches a part refuses.
func TestDecideNeedsYes(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(7, 13))
	words := []string{"rm", "git", "touch", "cat", "curl"}
	second := []string{"x", "-rf", "commit", "push", ".git"}
	for range 200_000 {
		var rules []ShellRule
		for range r.IntN(5) {
			p := []string{words[r.IntN(len(words))]}
			if r.IntN(3) == 0 {
				p = append(p, second[r.IntN(len(second))])
			}
			rules = append(rules, ShellRule{Action: RuleAction(1 + r.IntN(3)), Prefix: p,
				Bounded: r.IntN(2) == 0, Within: Effects(r.IntN(int(All) + 1))})
		}
		var parts [][]string
		for range 1 + r.IntN(3) {
			parts = append(parts, []string{words[r.IntN(len(words))], second[r.IntN(len(second))]})
		}
		e := Effects(r.IntN(int(All) + 1))
		auto := AutoSet{}
		for _, x := range []Effects{Read, Write, Exec, Net, Outside, Protected} {
			if r.IntN(2) == 0 {
				auto, _ = ParseAutoSet(append(auto.Effects().Strings(), x.String()))
			}
		}
		first := RouteKind(r.IntN(3))
		v, _ := Decide(e, auto, rules, parts, first)

		covering := func(a RuleAction, p []string) bool {
			return slices.ContainsFunc(rules, func(ru ShellRule) bool { return ru.Action == a && ru.Matches(p) && ru.Covers(e) })
		}
		anyPart := func(a RuleAction) bool {
			return slices.ContainsFunc(parts, func(p []string) bool { return covering(a, p) })
		}
		everyPart := func(a RuleAction) bool {
			return !slices.ContainsFunc(parts, func(p []string) bool { return !covering(a, p) })
		}
		if anyPart(DenyRule) != (v == Refuse) {
			t.Fatalf("deny: %v for %v %v %v", v, e, rules, parts)
		}
		if v != RunNow {
			continue
		}
		byAuto := auto.Decide(e) == Run && !anyPart(AskRule) && !anyPart(DenyRule)
		byRule := everyPart(AllowRule) && !anyPart(AskRule) && !anyPart(DenyRule) &&
			!(first == ByGateway && e&GatewayRefuses != 0)
		if e.Has(Secret) || !(byAuto || byRule) {
			t.Fatalf("ran unasked: effects %v, auto %v, rules %+v, parts %v, route %v", e, auto.Effects(), rules, parts, first)
		}
		// A bounded rule that does not cover the step changes nothing.
		var kept []ShellRule
		for _, ru := range rules {
			if ru.Covers(e) {
				kept = append(kept, ru)
			}
		}
		if w, _ := Decide(e, auto, kept, parts, first); w != v {
			t.Fatalf("a rule that does not cover the step changed its verdict: %v vs %v", v, w)
		}
	}
}
