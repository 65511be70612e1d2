package session

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
)

// Where a sandbox reaches the network decides its egress: a sandbox with no network of its
// own gets the judging proxy unless egress is off; a kernel on the host's loopback, or on a
// box with its own network, gets the proxy only when asked (proxy, --egress-via-host), with
// a notice that it is advisory; lists that cannot apply are said to, never silently dropped.
func TestEgressFor(t *testing.T) {
	t.Parallel()
	listen := func(context.Context) (net.Listener, error) { return nil, errors.New("not called") }
	for _, tc := range []struct {
		name, mode, path string
		allow            []string
		want             string // sandbox, loopback, listen, none
		notice           string // a word the notice holds; "": no notice
	}{
		{"container", "", EgressSandbox, nil, "sandbox", ""},
		{"container auto, listed", EgressAuto, EgressSandbox, []string{"github.com"}, "sandbox", ""},
		{"container proxy", EgressProxy, EgressSandbox, nil, "sandbox", ""},
		{"container off", EgressOff, EgressSandbox, nil, "none", ""},
		{"container off, listed", EgressOff, EgressSandbox, []string{"github.com"}, "none", "off"},
		{"local", "", EgressLoopback, nil, "none", ""},
		{"local, listed", "", EgressLoopback, []string{"github.com"}, "none", "--egress proxy"},
		{"local proxy", EgressProxy, EgressLoopback, nil, "loopback", "ignore"},
		{"ssh", "", EgressConnection, nil, "none", ""},
		{"ssh, listed", "", EgressConnection, []string{"github.com"}, "none", "--egress-via-host"},
		{"ssh via host", EgressProxy, EgressConnection, nil, "listen", "ignore"},
		{"container with a network", "", "", nil, "none", ""},
		{"container with a network, listed", EgressProxy, "", []string{"github.com"}, "none", "its own"},
	} {
		e, notice, err := egressFor("k", tc.mode, tc.path, listen, tc.allow, nil)
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		got := "none"
		switch {
		case e == nil:
		case e.Listen != nil:
			got = "listen"
		case e.Loopback:
			got = "loopback"
		case e.Sandboxed():
			got = "sandbox"
		}
		if got != tc.want {
			t.Errorf("%s: egress %s, want %s", tc.name, got, tc.want)
		}
		if (notice == "") != (tc.notice == "") || !strings.Contains(notice, tc.notice) {
			t.Errorf("%s: notice %q, want one with %q", tc.name, notice, tc.notice)
		}
	}
	for _, bad := range [][]string{{"mode"}, {"", "*.*"}, {"", "host:0"}} {
		allow := bad[1:]
		if _, _, err := egressFor("k", bad[0], EgressSandbox, nil, allow, nil); err == nil {
			t.Errorf("mode %q, allow %q: no error", bad[0], allow)
		}
	}
}
