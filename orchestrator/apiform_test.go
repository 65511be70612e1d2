package orchestrator

import (
	"encoding/json"
	"math/rand"
	"reflect"
	"testing"
	"testing/quick"

	"github.com/paddockhq/paddock/policy"
)

// The API's forms of the orchestrator's records are the records: for any result, question,
// settlement and collection, the form's JSON is the record's, byte for byte, and a result
// read back from its form is the result (TestOpenAPISchemasMatchTypes holds the forms to
// the API's document).
func TestAPIFormsMatch(t *testing.T) {
	t.Parallel()
	same := func(what string, a, b any) bool {
		ja, err := json.Marshal(a)
		if err != nil {
			t.Fatal(err)
		}
		jb, err := json.Marshal(b)
		if err != nil {
			t.Fatal(err)
		}
		if string(ja) != string(jb) {
			t.Errorf("%s: the record's JSON\n%s\nits API form's\n%s", what, ja, jb)
			return false
		}
		return true
	}
	cfg := &quick.Config{MaxCount: 300, Values: func(v []reflect.Value, r *rand.Rand) {
		for i, typ := range []reflect.Type{reflect.TypeFor[*Result](), reflect.TypeFor[Question](), reflect.TypeFor[Settlement](), reflect.TypeFor[Collected]()} {
			x, ok := quick.Value(typ, r)
			if !ok {
				t.Fatalf("no random %v", typ)
			}
			v[i] = x
		}
		// Effects are sets of the effects there are: other bits have no name.
		for _, res := range []*Result{v[0].Interface().(*Result), v[3].Interface().(Collected).Result} {
			if res != nil {
				res.End.Effects &= policy.All
				for i := range res.Steps {
					res.Steps[i].Effects &= policy.All
				}
			}
		}
		q := v[1].Interface().(Question)
		q.Effects &= policy.All
		v[1] = reflect.ValueOf(q)
	}}
	prop := func(r *Result, q Question, s Settlement, c Collected) bool {
		ok := same("result", r, r.API()) && same("question", &q, q.API()) && same("settlement", &s, s.API())
		c.Handback = nil // the workspace's report has its own test
		ok = ok && same("collected", c, c.API())
		if back := ResultOf(r.API()); !reflect.DeepEqual(back, r) {
			t.Errorf("a result read back from its API form:\n%+v\nwas\n%+v", back, r)
			return false
		}
		return ok
	}
	if err := quick.Check(prop, cfg); err != nil {
		t.Error(err)
	}
	// The edges: no result, no steps, an empty set of effects.
	same("nil", (*Result)(nil), (*Result)(nil).API())
	same("empty", &Result{}, (&Result{}).API())
	same("question without effects", &Question{ID: "q"}, (&Question{ID: "q"}).API())
}
