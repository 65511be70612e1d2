package wrapped

import (
	"context"
	"errors"
	"testing"

	"github.com/paddockhq/paddock/transport"
	"github.com/paddockhq/paddock/transport/pathmap"
)

// Nothing starts without a wrapper or a kernel path, or with a working directory outside
// every mount; the refusal of the latter is typed.
func TestStartRefusals(t *testing.T) {
	pm, err := pathmap.New(pathmap.Mount{Sandbox: "/work", Host: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := (&Transport{}).Start(ctx, transport.Spec{Kernel: "/k", Cwd: "/work"}); err == nil {
		t.Error("started with no wrapper")
	}
	if _, err := (&Transport{ArgvPrefix: []string{"env"}}).Start(ctx, transport.Spec{Cwd: "/work"}); err == nil {
		t.Error("started with no kernel path")
	}
	for _, cwd := range []string{"/", "/workshop", "", "work"} {
		_, err := (&Transport{ArgvPrefix: []string{"env"}}).Start(ctx, transport.Spec{Kernel: "/k", Cwd: cwd, PathMap: pm})
		var oe *OutsideError
		if !errors.As(err, &oe) || oe.Code() != "outside" {
			t.Errorf("cwd %q: %v, want an outside refusal", cwd, err)
		}
	}
	if _, err := (&Transport{ArgvPrefix: []string{"/paddock/no/such/wrapper"}}).Start(ctx, transport.Spec{Kernel: "/k", Cwd: "/work", PathMap: pm}); err == nil {
		t.Error("a wrapper that does not exist started")
	}
}
