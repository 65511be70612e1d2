package policy

import (
	"encoding/json"
	"math/rand/v2"
	"slices"
	"testing"
)

func TestEffectsStrings(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		e    Effects
		want string
	}{
		{0, ""},
		{Read, "read"},
		{Write | Read, "read,write"},
		{All, "exec,net,outside,protected,read,secret,write"},
		{Secret | Exec | Net, "exec,net,secret"},
	} {
		if got := tc.e.String(); got != tc.want {
			t.Errorf("%08b: %q, want %q", tc.e, got, tc.want)
		}
	}
}

// Any set's names are sorted, name each bit once, and read back to the same set, in JSON too.
func TestEffectsRoundTrip(t *testing.T) {
	t.Parallel()
	for e := Effects(0); e <= All; e++ {
		names := e.Strings()
		if !slices.IsSorted(names) || len(names) != e.Len() {
			t.Fatalf("%08b: %v", e, names)
		}
		var back Effects
		for _, n := range names {
			x, ok := ParseEffect(n)
			if !ok {
				t.Fatalf("%q does not parse", n)
			}
			back |= x
		}
		if back != e {
			t.Fatalf("%08b: names %v read back as %08b", e, names, back)
		}
		b, err := json.Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		var j Effects
		if err := json.Unmarshal(b, &j); err != nil || j != e {
			t.Fatalf("%s: %08b, %v", b, j, err)
		}
	}
	if b, _ := json.Marshal(Effects(0)); string(b) != "[]" {
		t.Errorf("empty set: %s, want []", b)
	}
	var e Effects
	if err := json.Unmarshal([]byte(`["read","nope"]`), &e); err == nil {
		t.Error("an unknown name unmarshalled")
	}
}

// randomEffects draws a random set.
func randomEffects(r *rand.Rand) Effects { return Effects(r.IntN(int(All) + 1)) }
