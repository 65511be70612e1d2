package policy

import (
	"slices"
	"testing"
)

func TestHarden(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		argv, want []string
		changed    bool
	}{
		{[]string{"curl", "-s", "x"}, []string{"curl", "-q", "-s", "x"}, true},
		{[]string{"curl", "-q", "x"}, []string{"curl", "-q", "x"}, false},
		{[]string{"curl"}, []string{"curl", "-q"}, true},
		{[]string{"cat", "x"}, []string{"cat", "x"}, false},
		{[]string{"less", "x"}, []string{"less", "x"}, false},
	} {
		got, _, changed := Harden(tc.argv)
		if !slices.Equal(got, tc.want) || changed != tc.changed {
			t.Errorf("Harden(%q) = %q %v, want %q %v", tc.argv, got, changed, tc.want, tc.changed)
		}
	}
	if got, env, ok := Harden([]string{"git", "log"}); !ok || len(env) == 0 || got[0] != "git" || len(got) <= 2 {
		t.Errorf("git log: %q %q %v", got, env, ok)
	}
	if !slices.Contains(StepEnv, "LESSSECURE=1") {
		t.Error("less runs without its secure mode")
	}
}
