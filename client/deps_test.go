package client_test

import (
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/paddockhq/paddock/internal/peer"
)

// The Go client links the API's types and the error classes, and no other package of
// Paddock's: a harness that speaks to a daemon does not carry the engine.
func TestClientLinksNoEngine(t *testing.T) {
	t.Parallel()
	goBin := peer.Go(t)
	out, err := exec.Command(goBin, "list", "-deps", "github.com/paddockhq/paddock/client").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	var ours []string
	for _, p := range strings.Fields(string(out)) {
		if strings.HasPrefix(p, "github.com/paddockhq/paddock/") {
			ours = append(ours, p)
		}
	}
	slices.Sort(ours)
	want := []string{"github.com/paddockhq/paddock/client", "github.com/paddockhq/paddock/daemon/api", "github.com/paddockhq/paddock/errdefs"}
	if !slices.Equal(ours, want) {
		t.Errorf("the client links %v, want only %v", ours, want)
	}
}
