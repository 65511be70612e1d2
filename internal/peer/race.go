//go:build race

package peer

import "os"

const raceEnabled = true

// A program built with the race detector sleeps a second at every exit while any other
// goroutine lives (the detector's atexit_sleep_ms, default 1000: time for a race report in
// flight to be printed). The tests start the programs Build compiles hundreds of times, the
// CLI above all, and paid as many seconds for nothing: a race is still reported where it
// happens. So the test's own environment says otherwise, and every program it starts with
// that environment inherits it; a test that gives a program an environment of its own adds
// Env(). Options already in GORACE come after, so that they win.
var raceEnv = func() string {
	opts := "atexit_sleep_ms=0"
	if user := os.Getenv("GORACE"); user != "" {
		opts += " " + user
	}
	os.Setenv("GORACE", opts)
	return "GORACE=" + opts
}()

// Env is what a program Build compiled needs in its environment to exit at once: the race
// detector's options when the tests run with it, nothing otherwise.
func Env() []string { return []string{raceEnv} }
