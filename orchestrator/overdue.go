package orchestrator

import (
	"fmt"
	"time"
)

// This file is the decision: whether a call has run past its limits. The watch around it
// (watch.go) only reads the clock and the call's last output, and kills what it says.

// Limits are a call's time limits; a zero field sets none.
type Limits struct {
	// NoOutput: the longest a call may print nothing.
	NoOutput time.Duration
	// Wall: the longest a call may run, from its start.
	Wall time.Duration
}

// Set reports whether any limit is set.
func (l Limits) Set() bool { return l.NoOutput > 0 || l.Wall > 0 }

// Codes of a call killed past a limit (End.Code).
const (
	CodeTimeout  = "timeout"   // it ran past its time limit (shell.jobTimeout)
	CodeNoOutput = "no_output" // it printed nothing for its no-output timeout
)

// Overdue decides whether a call goes on at now: it started at start and last printed at last;
// asking says a question of its session waits for an answer, which counts as output (the call
// waits with it). Past a limit it returns the end that kills the call; the wall-clock limit
// is judged first.
func Overdue(l Limits, now, start, last time.Time, asking bool) (End, bool) {
	if l.Wall > 0 && now.Sub(start) >= l.Wall {
		return End{Kind: Killed, Status: 137, Code: CodeTimeout,
			Message: fmt.Sprintf("it ran for %s, its time limit (shell.jobTimeout)", l.Wall)}, true
	}
	if l.NoOutput > 0 && !asking && now.Sub(last) >= l.NoOutput {
		return End{Kind: Killed, Status: 137, Code: CodeNoOutput,
			Message: fmt.Sprintf("it printed nothing for %s, its no-output timeout", l.NoOutput)}, true
	}
	return End{}, false
}

// watchPeriod is how often a watch looks: an eighth of the shortest limit, between 10 ms and
// a second, so a call is killed within an eighth of its limit past it.
func watchPeriod(l Limits) time.Duration {
	p := time.Second
	for _, d := range []time.Duration{l.NoOutput, l.Wall} {
		if d > 0 {
			p = min(p, d/8)
		}
	}
	return max(p, 10*time.Millisecond)
}
