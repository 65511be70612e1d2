package workspace

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/paddockhq/paddock/errdefs"
)

// A workspace refusal reaches a front end with its class and code, wrapped or not.
func TestErrorClasses(t *testing.T) {
	parent := t.TempDir()
	os.WriteFile(filepath.Join(parent, "a"), []byte("a"), 0o644)
	used := t.TempDir()
	os.WriteFile(filepath.Join(used, "x"), nil, 0o644)
	_, exists := Clone(context.Background(), parent, used, Options{})
	_, inside := Clone(context.Background(), parent, parent, Options{})
	_, none := Handback(context.Background(), t.TempDir())
	for _, tc := range []struct {
		err   error
		class errdefs.Class
		code  string
	}{
		{exists, errdefs.Conflict, CodeExists},
		{fmt.Errorf("child: %w", exists), errdefs.Conflict, CodeExists},
		{inside, errdefs.InvalidArgument, CodeInside},
		{none, errdefs.NotFound, CodeNoManifest},
		{&Error{Reason: CodeTooManyFiles}, errdefs.Refused, CodeTooManyFiles},
		{&Error{Reason: CodeRelinks}, errdefs.Conflict, CodeRelinks},
		{&Error{Reason: "unheard-of"}, errdefs.Internal, "unheard-of"},
	} {
		if c, code := errdefs.Of(tc.err); c != tc.class || code != tc.code {
			t.Errorf("%v: class %v, code %q; want %v, %q", tc.err, c, code, tc.class, tc.code)
		}
	}
}
