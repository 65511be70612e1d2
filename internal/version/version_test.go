package version

import (
	"runtime/debug"
	"strings"
	"testing"
)

// A build says its module version, its commit cut to 12 digits (+dirty when the tree had
// changes) and its Go version; what it cannot say reads unknown or (devel).
func TestDescribe(t *testing.T) {
	t.Parallel()
	rev := []debug.BuildSetting{{Key: "vcs.revision", Value: "0123456789abcdef0123"}}
	for _, c := range []struct {
		bi   *debug.BuildInfo
		want string
	}{
		{nil, "(devel) (commit unknown, )"},
		{&debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v1.2.3"}, Settings: rev}, "v1.2.3 (commit 0123456789ab, go1.26.8)"},
		{&debug.BuildInfo{GoVersion: "go1.26.8", Settings: append(rev, debug.BuildSetting{Key: "vcs.modified", Value: "true"})},
			"(devel) (commit 0123456789ab+dirty, go1.26.8)"},
		{&debug.BuildInfo{GoVersion: "go1.26.8", Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "abc"}, {Key: "vcs.modified", Value: "false"}}},
			"(devel) (commit abc, go1.26.8)"},
	} {
		if got := describe(c.bi); got != c.want {
			t.Errorf("describe(%+v) = %q, want %q", c.bi, got, c.want)
		}
	}
}

// The running binary's version leads its description.
func TestString(t *testing.T) {
	t.Parallel()
	if m := Module(); m == "" || !strings.HasPrefix(String(), m+" (commit ") {
		t.Errorf("Module %q, String %q", m, String())
	}
}
