//go:build !race

package peer

const raceEnabled = false

// Env is what a program Build compiled needs in its environment to exit at once: nothing
// without the race detector (see race.go).
func Env() []string { return nil }
