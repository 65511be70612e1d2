package policy

import (
	"fmt"
	"strings"
)

// grantable are the effects an auto set may hold. Secret is not among them: a step that
// names a secret always asks.
const grantable = Read | Write | Exec | Net | Outside | Protected

// AutoSet is the set of effects a step may have and still run at once, unasked. Its zero
// value grants nothing: every step with an effect asks.
type AutoSet struct{ e Effects }

// DefaultAutoSet is the auto set when no trusted setting names one: every effect but secret.
func DefaultAutoSet() AutoSet { return AutoSet{grantable} }

// AutoSetError is an auto set that names an effect it cannot hold.
type AutoSetError struct {
	Name string
	// Code is "unknown_effect" for a name that is no effect, "not_grantable" for secret.
	Code string
}

func (e *AutoSetError) Error() string {
	if e.Code == "not_grantable" {
		return fmt.Sprintf("the auto set cannot hold %q: a step with it always asks", e.Name)
	}
	return fmt.Sprintf("unknown effect %q in the auto set (known: %s)", e.Name, grantable)
}

// ParseAutoSet reads an auto set from effect names (surrounding spaces ignored, empty names
// skipped). An unknown name or secret is an *AutoSetError.
func ParseAutoSet(names []string) (AutoSet, error) {
	var a AutoSet
	for _, n := range names {
		n = strings.TrimSpace(n)
		if n == "" {
			continue
		}
		e, ok := ParseEffect(n)
		switch {
		case !ok:
			return AutoSet{}, &AutoSetError{Name: n, Code: "unknown_effect"}
		case e&grantable == 0:
			return AutoSet{}, &AutoSetError{Name: n, Code: "not_grantable"}
		}
		a.e |= e
	}
	return a, nil
}

// Effects returns the effects the set grants.
func (a AutoSet) Effects() Effects { return a.e & grantable }

// String is the sorted names joined by commas.
func (a AutoSet) String() string { return a.Effects().String() }

// Held returns the effects of e that the set does not grant: why a step asks.
func (a AutoSet) Held(e Effects) Effects { return e &^ a.Effects() }

// Decision is whether a step runs at once or asks.
type Decision int

const (
	// Run: every effect of the step is in the auto set.
	Run Decision = iota
	// Ask: some effect is not; a person (or the gateway rule) must answer.
	Ask
)

func (d Decision) String() string {
	if d == Run {
		return "run"
	}
	return "ask"
}

// Decide says whether a step with effects e runs at once: only when every effect is in the
// auto set. Secret is never in it, so a step with secret always asks.
func (a AutoSet) Decide(e Effects) Decision {
	if a.Held(e) != 0 {
		return Ask
	}
	return Run
}
