package policy

import (
	"errors"
	"math/rand/v2"
	"testing"
)

func TestParseAutoSet(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		names []string
		want  Effects
		code  string
	}{
		{nil, 0, ""},
		{[]string{"read", " write ", ""}, Read | Write, ""},
		{[]string{"read", "write", "exec", "net", "outside", "protected"}, All &^ Secret, ""},
		{[]string{"read", "secret"}, 0, "not_grantable"},
		{[]string{"reed"}, 0, "unknown_effect"},
		{[]string{"READ"}, 0, "unknown_effect"},
	} {
		a, err := ParseAutoSet(tc.names)
		var ae *AutoSetError
		switch {
		case tc.code == "" && err != nil:
			t.Errorf("%q: %v", tc.names, err)
		case tc.code != "" && (!errors.As(err, &ae) || ae.Code != tc.code):
			t.Errorf("%q: err %v, want code %s", tc.names, err, tc.code)
		case tc.code == "" && a.Effects() != tc.want:
			t.Errorf("%q: %s, want %s", tc.names, a, tc.want)
		}
	}
}

// law: default_auto_is_grantable
func TestDefaultAutoSet(t *testing.T) {
	t.Parallel()
	if got := DefaultAutoSet().Effects(); got != All&^Secret {
		t.Fatalf("default auto set %s, want every effect but secret", got)
	}
	var zero AutoSet
	if zero.Decide(Read) != Ask || zero.Decide(0) != Run {
		t.Fatal("the zero auto set must grant nothing")
	}
}

// randomAutoSet draws an auto set the way a setting would name it.
func randomAutoSet(r *rand.Rand) AutoSet {
	var names []string
	for _, n := range effectNames {
		if n != "secret" && r.IntN(2) == 0 {
			names = append(names, n)
		}
	}
	a, err := ParseAutoSet(names)
	if err != nil {
		panic(err)
	}
	return a
}

// law: auto_needs_every_effect, auto_never_sensitive, auto_runs_within
func TestDecideLaws(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 20000; i++ {
		a, e := randomAutoSet(r), randomEffects(r)
		d := a.Decide(e)
		within := e&^a.Effects() == 0
		switch {
		case e.Has(Secret) && d != Ask:
			t.Fatalf("auto %s, effects %s: %s; a secret step must ask", a, e, d)
		case within && d != Run:
			t.Fatalf("auto %s, effects %s: %s; within the set it runs", a, e, d)
		case !within && d != Ask:
			t.Fatalf("auto %s, effects %s: %s; an effect outside the set asks", a, e, d)
		case a.Held(e) != e&^a.Effects():
			t.Fatalf("held %s", a.Held(e))
		}
	}
	for e := Effects(0); e <= All; e++ {
		if e.Has(Secret) && DefaultAutoSet().Decide(e) != Ask {
			t.Fatalf("default set runs %s", e)
		}
	}
}
