package main

import (
	"slices"
	"strings"
	"testing"
)

// A transport-specific flag given for a transport it does not apply to is refused, naming
// the flag and where it applies; every flag applies to the transports it names.
func TestRefusedFlags(t *testing.T) {
	kinds := []string{"local", "docker", "containerd", "wrapped", "ssh"}
	for name, applies := range flagKinds {
		for _, kind := range kinds {
			err := refusedFlags(kind, func(n string) bool { return n == name })
			if want := !slices.Contains(applies, kind); (err != nil) != want {
				t.Errorf("--%s on %s: refused %v, want %v", name, kind, err, want)
			}
			if err != nil && (!strings.Contains(err.Error(), "--"+name) || !isUsage(err)) {
				t.Errorf("--%s on %s: %v", name, kind, err)
			}
		}
	}
	for _, kind := range kinds {
		if err := refusedFlags(kind, func(string) bool { return false }); err != nil {
			t.Errorf("no flags given on %s: %v", kind, err)
		}
	}
	// Every flag named is one the transport flags register.
	var f transportFlags
	fs := newRoot().Flags()
	f.register(fs)
	for name := range flagKinds {
		if fs.Lookup(name) == nil {
			t.Errorf("--%s is not a transport flag", name)
		}
	}
}
