package place_test

import (
	"os"
	"strconv"
	"testing"

	"github.com/paddockhq/paddock/config"
	"github.com/paddockhq/paddock/internal/place"
)

// The settings directory the policy keeps from sessions is the one the settings are read
// from, whatever the environment.
func TestConfigDirIsConfigs(t *testing.T) {
	for _, tc := range []struct{ xdg, home string }{
		{"", "/home/u"}, {"/x/config", "/home/u"}, {"/x/config", ""},
	} {
		t.Setenv("XDG_CONFIG_HOME", tc.xdg)
		t.Setenv("HOME", tc.home)
		if got, want := place.ConfigDir(), config.Dir(); got != want {
			t.Errorf("XDG_CONFIG_HOME=%q HOME=%q: %s, settings in %s", tc.xdg, tc.home, got, want)
		}
	}
}

// The places follow the environment they are documented to follow.
func TestPlaces(t *testing.T) {
	t.Setenv("HOME", "/home/u")
	t.Setenv("XDG_STATE_HOME", "")
	t.Setenv("TMPDIR", "")
	uid := strconv.Itoa(os.Getuid())
	for _, tc := range []struct{ got, want string }{
		{place.StateDir(), "/home/u/.local/state/paddock"},
		{place.SocketDir(), "/tmp/paddock-" + uid},
		{place.AuditFile("/s"), "/s/audit.jsonl"},
		{place.Sessions("/s"), "/s/sessions"},
	} {
		if tc.got != tc.want {
			t.Errorf("%s, want %s", tc.got, tc.want)
		}
	}
	t.Setenv("XDG_STATE_HOME", "/x/state")
	t.Setenv("TMPDIR", "/x/tmp")
	if got := place.StateDir(); got != "/x/state/paddock" {
		t.Errorf("state: %s", got)
	}
	if got := place.Sockets(); len(got) != 1 || got[0] != "/x/tmp/paddock-"+uid {
		t.Errorf("sockets: %v", got)
	}
	if got := place.Secret(); len(got) != 2 || got[0] != "/x/state/paddock/sessions" || got[1] != "/x/state/paddock/audit.jsonl" {
		t.Errorf("secret: %v", got)
	}
}
