package lifecycle

import "testing"

func TestCheckFindsWhatIsWrong(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		moves map[string]map[string]string
		bad   bool
	}{
		{"good", map[string]map[string]string{"a": {"go": "b", "stop": "c"}, "b": {"stop": "c"}}, false},
		{"unreachable", map[string]map[string]string{"a": {"stop": "c"}, "b": {"stop": "c"}}, true},
		{"never ends", map[string]map[string]string{"a": {"go": "b"}, "b": {"back": "a"}}, true},
		{"a loop that can end", map[string]map[string]string{"a": {"go": "b"}, "b": {"back": "a", "stop": "c"}}, false},
	} {
		m := Machine[string, string]{Name: tc.name, Start: "a", Moves: tc.moves}
		if err := m.Check(); (err != nil) != tc.bad {
			t.Errorf("%s: Check() = %v, want bad %v", tc.name, err, tc.bad)
		}
	}
}

func TestNextRefusesWhatTheTableDoesNotHold(t *testing.T) {
	t.Parallel()
	m := Machine[string, string]{Name: "m", Start: "a", Moves: map[string]map[string]string{"a": {"stop": "z"}}}
	if to, ok := m.Next("a", "stop"); !ok || to != "z" {
		t.Fatalf("Next(a, stop) = %q %v", to, ok)
	}
	if _, ok := m.Next("z", "stop"); ok {
		t.Fatal("a final state moved")
	}
	if _, ok := m.Next("a", "go"); ok {
		t.Fatal("an event the table does not name moved")
	}
	if !m.Final("z") || m.Final("a") {
		t.Fatal("Final is wrong")
	}
}
