package images

import (
	"slices"
	"testing"
)

func TestSystemMounts(t *testing.T) {
	host := map[string]Entry{
		"/usr":              {Exists: true},
		"/bin":              {Exists: true, Link: "/usr/bin"},
		"/lib64":            {Exists: true, Link: "/usr/lib64"},
		"/etc/passwd":       {Exists: true},
		"/etc/alternatives": {Exists: true},
		"/etc/shadow":       {Exists: true},
		"/etc/ssh":          {Exists: true},
		"/etc/sneaky":       {Exists: true, Link: "/etc/shadow"},
	}
	look := func(p string) Entry { return host[p] }
	got := SystemMounts([]string{"/usr", "/bin", "/sbin", "/lib64", "/usr/", "/etc/passwd", "/etc/shadow", "/etc/ssh", "/etc/ssh/sshd_config", "/etc/sneaky", "/etc/alternatives"}, look)
	want := []SystemMount{
		{Host: "/usr", Sandbox: "/usr"},
		{Host: "/usr/bin", Sandbox: "/bin"},
		{Host: "/usr/lib64", Sandbox: "/lib64"},
		{Host: "/etc/passwd", Sandbox: "/etc/passwd"},
		{Host: "/etc/alternatives", Sandbox: "/etc/alternatives"},
	}
	if !slices.Equal(got, want) {
		t.Fatalf("SystemMounts = %v, want %v", got, want)
	}
}

// The default lists never name a secret of /etc.
func TestSystemEtcHoldsNoSecret(t *testing.T) {
	for _, p := range append(append([]string{}, SystemDirs...), SystemEtc...) {
		if secretEtc(p) {
			t.Errorf("%s is a secret", p)
		}
		for _, s := range []string{"/etc/hosts", "/etc/hostname", "/etc/resolv.conf"} {
			if p == s {
				t.Errorf("%s is the engine's to write", p)
			}
		}
	}
}
