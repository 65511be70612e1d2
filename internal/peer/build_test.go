package peer

import (
	"slices"
	"testing"

	"github.com/paddockhq/paddock/images"
)

// The tests' static programs are built as the kernel is, so that they share its compiled
// standard library.
func TestStaticFlags(t *testing.T) {
	if !slices.Equal(staticFlags, images.StaticBuildFlags) {
		t.Fatalf("BuildStatic's flags %q, the kernel's %q", staticFlags, images.StaticBuildFlags)
	}
}
