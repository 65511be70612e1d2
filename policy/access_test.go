package policy

import "testing"

// law: access_judged_as_opened
// A file access is judged on the path given, as the file opened there: a symlink now at one
// of its components does not move the judgment to where the link leads (the secret stays
// secret though a link now leads into the workspace; a workspace file stays inside though a
// link now leads to a secret).
func TestAccessEffects(t *testing.T) {
	t.Parallel()
	ctx := testContext()
	ctx.FS = NewMapFS(
		"/ws/src/main.go",
		"/ws/keys/id -> /home/u/.ssh/id_ed25519", // keys/ was a directory when opened
		"/home/u/.ssh/id_ed25519",
		"/home/u/.ssh/sub -> /ws/src", // sub was a directory in the store when opened
		"/ws/.git/config",
		"/etc/passwd",
	)
	for _, tc := range []struct {
		path  string
		write bool
		want  Effects
	}{
		{"/ws/src/main.go", false, Read},
		{"/ws/src/main.go", true, Write},
		{"/ws/keys/id", false, Read},
		{"/ws/keys/id", true, Write},
		{"/home/u/.ssh/id_ed25519", false, Read | Secret},
		{"/home/u/.ssh/id_ed25519", true, Write | Secret},
		{"/home/u/.ssh/sub/main.go", false, Read | Secret},
		{"/home/u/.ssh/sub/main.go", true, Write | Secret},
		{"/home/u", false, Read | Secret}, // holds a secret
		{"/ws/.git/config", true, Write | Protected},
		{"/etc/passwd", true, Write | Outside},
		{"/etc/passwd", false, Read},
	} {
		if got := AccessEffects(ctx, tc.path, tc.write); got != tc.want {
			t.Errorf("AccessEffects(%s, write %v) = %v, want %v", tc.path, tc.write, got, tc.want)
		}
	}
}
