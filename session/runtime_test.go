package session

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/docker/docker/api/types"

	"github.com/paddockhq/paddock/daemon/api"
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

// A docker session is looked for on the engine its opening read from the settings: the
// request's kernelTransport.docker.host over the workspace's and the user's, the user's
// alone without a request, the environment's ("") when none says; a workspace gone since
// leaves the request's and the user's.
func TestEngineHost(t *testing.T) {
	conf := t.TempDir()
	os.MkdirAll(filepath.Join(conf, "paddock"), 0o700)
	os.WriteFile(filepath.Join(conf, "paddock", "settings.yaml"), []byte("kernelTransport:\n  docker:\n    host: unix:///user.sock\n"), 0o600)
	t.Setenv("XDG_CONFIG_HOME", conf)
	ws := t.TempDir()
	named := map[string]string{"kernelTransport.docker.host": "unix:///request.sock"}
	for _, tc := range []struct {
		name string
		req  *api.OpenRequest
		want string
	}{
		{"no request", nil, "unix:///user.sock"},
		{"request without", &api.OpenRequest{Workspace: ws}, "unix:///user.sock"},
		{"request names one", &api.OpenRequest{Workspace: ws, Settings: named}, "unix:///request.sock"},
		{"workspace gone", &api.OpenRequest{Workspace: filepath.Join(ws, "gone"), Settings: named}, "unix:///request.sock"},
	} {
		if got := engineHost(tc.req); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	if got := engineHost(nil); got != "" {
		t.Errorf("no settings: %q, want the environment's (\"\")", got)
	}
}
