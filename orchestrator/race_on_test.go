//go:build race

package orchestrator

// raceOn: the race detector is on (its sync.Pool drops what is put back, so allocation
// counts mean nothing).
const raceOn = true
