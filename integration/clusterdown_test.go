package integration

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/paddockhq/paddock/internal/peer"
)

// integration/k8s/down on a state directory up never started in (.ci/run tears the cluster
// down whatever happened, a failure before up included) leaves the host as it is: it once
// took every network namespace of the machine for one of the pods' (and the kubelet's
// directories and iptables chains with them), having no record of those there were before.
func TestClusterDownBeforeUp(t *testing.T) {
	ip := peer.Program(t, "ip", "iproute2")
	if os.Geteuid() != 0 {
		peer.Missing(t, "not root: network namespaces cannot be made")
	}
	ns := randomName("paddock-down-test-")
	if out, err := exec.Command(ip, "netns", "add", ns).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add: %v: %s", err, out)
	}
	t.Cleanup(func() { exec.Command(ip, "netns", "delete", ns).Run() })
	kubelet := filepath.Join("/var/lib/kubelet", randomName("paddock-down-test-"))
	if _, err := os.Stat("/var/lib/kubelet"); err == nil {
		kubelet = "" // a kubelet's own: not touched by the test
	} else if err := os.MkdirAll(kubelet, 0o700); err != nil {
		t.Fatal(err)
	} else {
		// Its own directory, then /var/lib/kubelet if empty: the test cluster's kubelet,
		// running beside the tests, may have made it since.
		t.Cleanup(func() { os.Remove(kubelet); os.Remove("/var/lib/kubelet") })
	}

	state := t.TempDir()
	if out, err := exec.Command(filepath.Join(repoRoot(t), "integration", "k8s", "down"), state).CombinedOutput(); err != nil {
		t.Fatalf("down: %v: %s", err, out)
	}
	out, err := exec.Command(ip, "netns", "list").Output()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(out), ns) {
		t.Errorf("down removed the network namespace %s, which up never made", ns)
	}
	if kubelet != "" {
		if _, err := os.Stat(kubelet); err != nil {
			t.Errorf("down removed %s, which up never made: %v", kubelet, err)
		}
	}
}
