package main

import (
	"fmt"
	"slices"
	"strings"
)

// flagKinds are the transports each transport-specific flag applies to; a flag not listed
// applies to every transport. A flag given for a transport it does not apply to is refused
// rather than silently ignored: --memory on the local transport would otherwise read as a
// limit that does not exist.
var flagKinds = map[string][]string{
	"image":          {"docker", "containerd"},
	"network":        {"docker", "containerd"},
	"memory":         {"docker", "containerd"},
	"pids-limit":     {"docker", "containerd"},
	"user":           {"docker", "containerd"},
	"writable-root":  {"docker", "containerd"},
	"cap-add":        {"docker", "containerd"},
	"new-privileges": {"docker", "containerd"},
	"no-tmpfs":       {"docker", "containerd"},
	"pool":           {"docker", "containerd"},
	"mount":          {"docker", "containerd", "wrapped"},
	"wrap":           {"wrapped"},
	"kernel-path":    {"wrapped"},
	"kernel-cache":   {"ssh"},
	"sync":           {"ssh"},
}

// whyNot says why a kind of transport cannot honour a flag.
var whyNot = map[string]string{
	"local":   "the local transport runs the kernel as a host process, unconfined, in the workspace itself",
	"wrapped": "the wrapper command makes the sandbox",
	"ssh":     "the kernel runs on the box as its user",
}

// refusedFlags is the usage error for the flags given (changed) that the transport kind
// does not apply; nil when each applies.
func refusedFlags(kind string, changed func(name string) bool) *usageError {
	var bad []string
	for _, name := range slices.Sorted(func(yield func(string) bool) {
		for n := range flagKinds {
			if !yield(n) {
				return
			}
		}
	}) {
		if changed(name) && !slices.Contains(flagKinds[name], kind) {
			bad = append(bad, fmt.Sprintf("--%s (%s only)", name, strings.Join(flagKinds[name], ", ")))
		}
	}
	if len(bad) == 0 {
		return nil
	}
	msg := fmt.Sprintf("the %s transport does not apply %s", kind, strings.Join(bad, ", "))
	if w := whyNot[kind]; w != "" {
		msg += ": " + w
	}
	return &usageError{msg: msg}
}
