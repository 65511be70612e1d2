package session

import (
	"strings"
	"testing"

	"github.com/docker/docker/api/types"
)

// The doctor tells Podman's service from the Docker engine by its version's components.
func TestEngineName(t *testing.T) {
	t.Parallel()
	if got := engineName([]types.ComponentVersion{{Name: "Podman Engine", Version: "4.3.1"}}); !strings.HasPrefix(got, "Podman 4.3.1") {
		t.Errorf("podman: %q", got)
	}
	if got := engineName([]types.ComponentVersion{{Name: "Engine", Version: "20.10.24"}, {Name: "containerd"}}); strings.Contains(got, "Podman") {
		t.Errorf("docker: %q", got)
	}
}

// A runtime the engine has not registered is refused with how to register it, gVisor's
// with the daemon.json entry .ci/run writes.
func TestRegisterHint(t *testing.T) {
	t.Parallel()
	if h := registerHint("runsc"); !strings.Contains(h, `"runsc": {"path": "/usr/bin/runsc"`) || !strings.Contains(h, "SIGHUP") {
		t.Errorf("runsc: %q", h)
	}
	if h := registerHint("crun"); !strings.Contains(h, `"crun"`) {
		t.Errorf("crun: %q", h)
	}
}
