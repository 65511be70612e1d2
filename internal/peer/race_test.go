package peer

import (
	"os"
	"slices"
	"strings"
	"testing"
)

// The programs the tests start inherit the race detector's option to exit at once, and Env
// carries it for a program given an environment of its own (race.go): without it every
// exit of a -race program sleeps a second.
func TestProgramsExitAtOnce(t *testing.T) {
	if !raceEnabled {
		if Env() != nil {
			t.Fatalf("Env() = %q without the race detector", Env())
		}
		return
	}
	opts := os.Getenv("GORACE")
	if f := strings.Fields(opts); len(f) == 0 || f[0] != "atexit_sleep_ms=0" {
		t.Fatalf("GORACE=%q: atexit_sleep_ms=0 is not first", opts)
	}
	if got := Env(); !slices.Equal(got, []string{"GORACE=" + opts}) {
		t.Fatalf("Env() = %q, want GORACE=%q", got, opts)
	}
}
