package session

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/paddockhq/paddock/client"
	"github.com/paddockhq/paddock/daemon/api"
)

// A request's fields and settings set the keys their options bind, above every other
// source, and name the options given; a key no option binds, a bad mount or wrapper is the
// client's to fix.
func TestFromRequest(t *testing.T) {
	req := api.OpenRequest{Workspace: "/w", Transport: "docker", Image: "img", Env: []string{"A", "B"},
		Mounts: []string{"/h:/s:ro"}, Wrap: "docker exec -i 'my box'",
		Settings: map[string]string{"OUTPUT.BYTES": "10", "kernelTransport.docker.pool": "2"}}
	o, tr, err := FromRequest(req)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"kernelTransport.kind": "docker", "kernelTransport.docker.image": "img",
		"kernelTransport.env": []string{"A", "B"}, "output.bytes": "10", "kernelTransport.docker.pool": "2"}
	for k, v := range want {
		got, ok := o.Set[k]
		if !ok || !equal(got, v) {
			t.Errorf("Set[%s] = %v, want %v", k, got, v)
		}
	}
	if len(o.Set) != len(want) || o.SetBy != "request" || o.Workspace != "/w" {
		t.Errorf("options %+v", o)
	}
	slices.Sort(tr.Given)
	if g := strings.Join(tr.Given, " "); g != "env image max-bytes mount pool transport wrap" {
		t.Errorf("given %q", g)
	}
	if len(tr.Mounts) != 1 || !tr.Mounts[0].ReadOnly || !slices.Equal(tr.Wrap, []string{"docker", "exec", "-i", "my box"}) {
		t.Errorf("transport %+v", tr)
	}
	for _, bad := range []api.OpenRequest{
		{Settings: map[string]string{"shell.rules": "[]"}},
		{Settings: map[string]string{"ssh.hosts": "x"}},
		{Mounts: []string{"/only"}},
		{Mounts: []string{"/a:/b:rx"}},
		{Wrap: "docker 'exec"},
	} {
		_, _, err := FromRequest(bad)
		var oe *OptionError
		if !errors.As(err, &oe) {
			t.Errorf("%+v: %v, want an OptionError", bad, err)
		}
	}
}

func equal(a, b any) bool {
	as, ok1 := a.([]string)
	bs, ok2 := b.([]string)
	if ok1 || ok2 {
		return ok1 && ok2 && slices.Equal(as, bs)
	}
	return a == b
}

// A request the Go client makes from options is read by the daemon as the same options on a
// command line: each sets the key it binds, and is named as given.
func TestFromClientRequest(t *testing.T) {
	t.Parallel()
	for name, key := range api.OptionKeys() {
		req, err := client.OpenRequest("/w", client.Option{Name: name, Values: []string{"v"}})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		o, tr, err := FromRequest(req)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if len(o.Set) != 1 || o.Set[key] != "v" || !slices.Equal(tr.Given, []string{name}) {
			t.Errorf("%s: set %v, given %v; want %s=v", name, o.Set, tr.Given, key)
		}
	}
	req, err := client.OpenRequest("/w", client.Option{Name: "mount", Values: []string{"/h:/s:ro", "/a:/b"}},
		client.Option{Name: "wrap", Values: []string{"docker exec -i 'my box'"}})
	if err != nil {
		t.Fatal(err)
	}
	_, tr, err := FromRequest(req)
	if err != nil || len(tr.Mounts) != 2 || !tr.Mounts[0].ReadOnly || !slices.Equal(tr.Wrap, []string{"docker", "exec", "-i", "my box"}) {
		t.Errorf("%v: transport %+v", err, tr)
	}
}
