//go:build !race

package orchestrator

const raceOn = false
