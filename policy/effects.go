package policy

import (
	"encoding/json"
	"fmt"
	"math/bits"
	"strings"
)

// Effects is a set of effects a step has. The zero value is the empty set.
type Effects uint8

// The effects, one bit each.
const (
	// Read: the step reads files (their content or, for ls-like tools, their names).
	Read Effects = 1 << iota
	// Write: the step creates, changes or removes files.
	Write
	// Exec: the step runs a program whose behaviour the table does not know.
	Exec
	// Net: the step talks to the network.
	Net
	// Outside: a writing step names a path outside every workspace root.
	Outside
	// Protected: a writing step names a protected path (Paddock's config, .git, PATH, …),
	// or a git step destroys refs or history or moves where a repository's configuration
	// and hooks come from (git.go).
	Protected
	// Secret: the step names a path that is or holds a secret (a credential store).
	Secret

	// All is every effect.
	All = Read | Write | Exec | Net | Outside | Protected | Secret
)

// effectNames are the names, in the order of the bits.
var effectNames = [...]string{"read", "write", "exec", "net", "outside", "protected", "secret"}

// sortedBits lists the bits in the alphabetical order of their names, the order of every
// printed form.
var sortedBits = func() []Effects {
	var out []Effects
	for _, n := range []string{"exec", "net", "outside", "protected", "read", "secret", "write"} {
		e, _ := ParseEffect(n)
		out = append(out, e)
	}
	return out
}()

// ParseEffect returns the effect of a name; ok is false for an unknown name.
func ParseEffect(name string) (e Effects, ok bool) {
	for i, n := range effectNames {
		if n == name {
			return 1 << i, true
		}
	}
	return 0, false
}

// Has reports whether every effect of o is in e.
func (e Effects) Has(o Effects) bool { return e&o == o }

// Len is the number of effects in e.
func (e Effects) Len() int { return bits.OnesCount8(uint8(e & All)) }

// Strings returns the names of the effects, sorted; never nil.
func (e Effects) Strings() []string {
	out := make([]string, 0, e.Len())
	for _, b := range sortedBits {
		if e&b != 0 {
			out = append(out, effectNames[bits.TrailingZeros8(uint8(b))])
		}
	}
	return out
}

// String is the sorted names joined by commas ("" for none).
func (e Effects) String() string { return strings.Join(e.Strings(), ",") }

// MarshalJSON writes the sorted list of names.
func (e Effects) MarshalJSON() ([]byte, error) { return json.Marshal(e.Strings()) }

// UnmarshalJSON reads a list of names.
func (e *Effects) UnmarshalJSON(b []byte) error {
	var names []string
	if err := json.Unmarshal(b, &names); err != nil {
		return err
	}
	var out Effects
	for _, n := range names {
		x, ok := ParseEffect(n)
		if !ok {
			return fmt.Errorf("policy: unknown effect %q", n)
		}
		out |= x
	}
	*e = out
	return nil
}
