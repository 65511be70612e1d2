package policy_test

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/paddockhq/paddock/internal/peer"
)

// The policy is pure decisions: neither it nor its tests reach a transport, Docker,
// containerd, or the orchestrator that drives them (DESIGN.md, "The one architectural rule").
func TestImportsNoTransport(t *testing.T) {
	t.Parallel()
	goBin := peer.Go(t)
	out, err := exec.Command(goBin, "list", "-deps", "-test", "github.com/paddockhq/paddock/policy").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	pkgs := strings.Fields(string(out))
	if len(pkgs) < 10 {
		t.Fatalf("go list gave %d packages: %s", len(pkgs), out)
	}
	for _, p := range pkgs {
		switch {
		case strings.HasPrefix(p, "github.com/paddockhq/paddock/transport"),
			strings.HasPrefix(p, "github.com/paddockhq/paddock/orchestrator"),
			strings.Contains(p, "docker"), strings.Contains(p, "containerd"):
			t.Errorf("policy depends on %s", p)
		}
	}
}
