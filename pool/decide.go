package pool

import (
	"encoding/json"
	"maps"
	"slices"

	"github.com/paddockhq/paddock/transport"
)

// This file holds the pool's rules, pure: which warm kernel may serve which session, when a
// session waits for a kernel in flight rather than starting its own, and how many kernels a
// refill starts.

// SessionLabel is the label naming a kernel's session; it is the session's own, never part
// of what a warm kernel shares with it.
const SessionLabel = "paddock.session"

// Label marks what a pool started: the pool's id.
const Label = "paddock.pool"

// Key is what a warm kernel shares with every session it may serve: the kernel binary and
// its arguments, the path map (each mount's sandbox path, host path and mode, in order) and
// the labels other than the session's. The session, its working directory, its environment
// and its session label are not in it: they are the session's own, applied at claim (the
// kernel moves to the session's directory; each exec carries the session's environment).
// Two specs with the same Key start the same sandbox.
func Key(spec transport.Spec) string {
	type mount struct {
		S, H string
		RO   bool
	}
	k := struct {
		Kernel string
		Args   []string
		Mounts []mount
		Map    bool
		Labels [][2]string
	}{Kernel: spec.Kernel, Args: spec.Args}
	if spec.PathMap != nil {
		k.Map = true
		for _, m := range spec.PathMap.Mounts() {
			k.Mounts = append(k.Mounts, mount{m.Sandbox, m.Host, m.ReadOnly})
		}
	}
	for _, name := range slices.Sorted(maps.Keys(spec.Labels)) {
		if name != SessionLabel {
			k.Labels = append(k.Labels, [2]string{name, spec.Labels[name]})
		}
	}
	b, _ := json.Marshal(k) // strings and bools only: cannot fail
	return string(b)
}

// Wait reports whether a session that finds no warm kernel waits for one in flight: only
// when more are in flight than sessions already wait for them. Otherwise it starts its own
// at once, which is never slower than waiting for a start that has not begun.
func Wait(starting, waiting int) bool {
	return starting > waiting
}

// MaxFailures is how many starts in a row may fail before a pool stops refilling a spec
// until a session asks for it again.
const MaxFailures = 3

// ToStart is how many kernels a refill starts now: enough that ready and starting reach
// size, at most parallel in flight at once, none while the last MaxFailures starts failed.
func ToStart(size, ready, starting, parallel, failures int) int {
	if failures >= MaxFailures {
		return 0
	}
	n := size - ready - starting
	if room := parallel - starting; n > room {
		n = room
	}
	if n < 0 {
		return 0
	}
	return n
}
