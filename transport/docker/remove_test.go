package docker

import (
	"errors"
	"testing"
)

// Which refusals of a forced removal are tried again: Podman's, when the container stopped
// while it was being killed; not a refusal of another kind.
func TestStopRaced(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		msg  string
		want bool
	}{
		{"Error response from daemon: cannot remove container db76ae4c4978 as it could not be stopped: sending SIGKILL to container db76ae4c4978: container state improper: stopped", true},
		{"Error response from daemon: cannot remove container db76ae4c4978 as it could not be stopped: sending SIGKILL to container db76ae4c4978: container state improper: exited", true},
		{"Error response from daemon: removal of container db76ae4c4978 is already in progress", false},
		{"Error response from daemon: No such container: db76ae4c4978", false},
		{"Error response from daemon: cannot remove container db76ae4c4978 as it could not be stopped: permission denied", false},
	} {
		if got := stopRaced(errors.New(tc.msg)); got != tc.want {
			t.Errorf("%q: %v, want %v", tc.msg, got, tc.want)
		}
	}
}
