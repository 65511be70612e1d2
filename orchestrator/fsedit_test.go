package orchestrator

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// law: access_judged_as_opened
// fs.edit changes a file only as a whole: the version named, every edit applied, the mode
// kept; any refusal leaves the file as it was.
func TestFSEdit(t *testing.T) {
	t.Parallel()
	fx := newFSFixture(t)
	a := filepath.Join(fx.ws, "a.txt")
	os.WriteFile(a, []byte("one two two\n"), 0o644)
	os.Chmod(a, 0o751)
	read := func() string { b, _ := os.ReadFile(a); return string(b) }
	v := FSVersion([]byte("one two two\n"))
	for _, tc := range []struct {
		name string
		body FSEditRequest
		code string
	}{
		{"no edit", FSEditRequest{Path: "/work/a.txt"}, FSBadRequest},
		{"no match", FSEditRequest{Path: "/work/a.txt", Edits: []FSEdit{{Old: "three", New: "3"}}}, FSNoMatch},
		{"two matches", FSEditRequest{Path: "/work/a.txt", Edits: []FSEdit{{Old: "two", New: "2"}}}, FSManyMatches},
		{"the same", FSEditRequest{Path: "/work/a.txt", Edits: []FSEdit{{Old: "one", New: "one"}}}, FSNoChange},
		{"empty old", FSEditRequest{Path: "/work/a.txt", Edits: []FSEdit{{Old: "", New: "x"}}}, FSNoChange},
		{"the second fails", FSEditRequest{Path: "/work/a.txt", Edits: []FSEdit{{Old: "one", New: "1"}, {Old: "three", New: "3"}}}, FSNoMatch},
		{"another version", FSEditRequest{Path: "/work/a.txt", Version: FSVersion([]byte("old")), Edits: []FSEdit{{Old: "one", New: "1"}}}, FSChangedSince},
		{"binary", FSEditRequest{Path: "/work/bin", Edits: []FSEdit{{Old: "\xff", New: "x"}}}, FSBinary},
		{"missing", FSEditRequest{Path: "/work/missing", Edits: []FSEdit{{Old: "a", New: "b"}}}, FSNotFound},
		{"a link out", FSEditRequest{Path: "/work/escape", Edits: []FSEdit{{Old: "outside", New: "in"}}}, FSEscapes},
		{"read-only", FSEditRequest{Path: "/data/d.txt", Edits: []FSEdit{{Old: "data", New: "x"}}}, FSReadOnly},
		{"a key", FSEditRequest{Path: "/home/.ssh/id_ed25519", Edits: []FSEdit{{Old: "KEY", New: "x"}}}, FSNeedsYes},
		{"a directory", FSEditRequest{Path: "/work/sub", Edits: []FSEdit{{Old: "a", New: "b"}}}, FSIsDir},
	} {
		_, err := tree[FSEditReply](t, fx.h, TypeFSEdit, tc.body)
		var fe *FSError
		if !errors.As(err, &fe) || fe.Code() != tc.code {
			t.Errorf("%s: %v, want %s", tc.name, err, tc.code)
		}
		if got := read(); got != "one two two\n" {
			t.Fatalf("%s: the file changed: %q", tc.name, got)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(fx.out, "secret")); string(b) != "outside\n" {
		t.Fatalf("the file outside changed: %q", b)
	}
	r, err := tree[FSEditReply](t, fx.h, TypeFSEdit, FSEditRequest{Path: "/work/a.txt", Version: v,
		Edits: []FSEdit{{Old: "one", New: "1"}, {Old: "two", New: "2", ReplaceAll: true}}})
	if err != nil {
		t.Fatal(err)
	}
	if got := read(); got != "1 2 2\n" || r.Replacements != 3 || r.Version != FSVersion([]byte(got)) || r.Path != "/work/a.txt" {
		t.Fatalf("after the edit: %q, %+v", got, r)
	}
	if fi, _ := os.Stat(a); fi.Mode().Perm() != 0o751 {
		t.Fatalf("mode %v", fi.Mode())
	}
	// Through a link within the mounts, the file it leads to is edited and named.
	r, err = tree[FSEditReply](t, fx.h, TypeFSEdit, FSEditRequest{Path: "/work/link", Edits: []FSEdit{{Old: "beta", New: "BETA"}}})
	if b, _ := os.ReadFile(filepath.Join(fx.ws, "sub", "b")); err != nil || string(b) != "BETA\n" || r.Path != "/work/sub/b" {
		t.Fatalf("an edit through a link: %q %+v %v", b, r, err)
	}
	if fi, _ := os.Lstat(filepath.Join(fx.ws, "link")); fi.Mode()&os.ModeSymlink == 0 {
		t.Fatal("the link was replaced")
	}
}
