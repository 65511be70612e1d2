package client

import (
	"errors"
	"maps"
	"slices"
	"testing"

	"github.com/paddockhq/paddock/daemon/api"
	"github.com/paddockhq/paddock/errdefs"
)

// Options fill the request's fields (transport, wrap, mount) or set the settings key their
// name binds, a list joined by commas; an option no request carries is the caller's to fix.
func TestOpenRequest(t *testing.T) {
	t.Parallel()
	req, err := OpenRequest("/w",
		Option{Name: "transport", Values: []string{"docker"}},
		Option{Name: "wrap", Values: []string{"docker exec -i box"}},
		Option{Name: "mount", Values: []string{"/a:/a", "/b:/c:ro"}},
		Option{Name: "env", Values: []string{"A", "B"}},
		Option{Name: "max-bytes", Values: []string{"10"}},
		Option{Name: "host", Values: []string{"box"}},
	)
	if err != nil {
		t.Fatal(err)
	}
	want := api.OpenRequest{Workspace: "/w", Transport: "docker", Wrap: "docker exec -i box", Mounts: []string{"/a:/a", "/b:/c:ro"},
		Settings: map[string]string{"kernelTransport.env": "A,B", "output.bytes": "10", "kernelTransport.ssh.host": "box"}}
	if req.Workspace != want.Workspace || req.Transport != want.Transport || req.Wrap != want.Wrap ||
		!slices.Equal(req.Mounts, want.Mounts) || !maps.Equal(req.Settings, want.Settings) {
		t.Errorf("request %+v, want %+v", req, want)
	}
	// --allow-net fills the request's list (repeated and comma lists alike, read by the
	// daemon); --egress-via-host is egress proxy.
	req, err = OpenRequest("/w", Option{Name: "allow-net", Values: []string{"a.example:443,b.example"}},
		Option{Name: "allow-net", Values: []string{"10.0.0.5:5432"}}, Option{Name: "egress-via-host", Values: []string{"true"}})
	if err != nil || !slices.Equal(req.AllowNet, []string{"a.example:443,b.example", "10.0.0.5:5432"}) || req.Settings["network.egress"] != "proxy" {
		t.Errorf("allow-net and egress-via-host: %+v %v", req, err)
	}
	for _, name := range []string{"cap-add", "new-privileges", "no-tmpfs", "shell.rules", ""} {
		_, err := OpenRequest("/w", Option{Name: name, Values: []string{"x"}})
		var c errdefs.Classed
		if !errors.As(err, &c) || c.Class() != errdefs.InvalidArgument {
			t.Errorf("option %q: %v, want an invalid argument", name, err)
		}
	}
}

// Every option a request may set reaches its settings key, and nothing else.
func TestOpenRequestEveryKey(t *testing.T) {
	t.Parallel()
	for name, key := range api.OptionKeys() {
		req, err := OpenRequest("/w", Option{Name: name, Values: []string{"v"}})
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if name == "transport" {
			if req.Transport != "v" || len(req.Settings) != 0 {
				t.Errorf("transport: %+v", req)
			}
			continue
		}
		if len(req.Settings) != 1 || req.Settings[key] != "v" {
			t.Errorf("%s: settings %v, want %s=v", name, req.Settings, key)
		}
	}
}
