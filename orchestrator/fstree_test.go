package orchestrator

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/paddockhq/paddock/policy"
)

// tree calls a tree request of the fixture's handlers h.
func tree[R any](t *testing.T, h map[string]Handler, typ string, body any) (*R, error) {
	t.Helper()
	b, _ := json.Marshal(body)
	res, err := h[typ](context.Background(), HostRequest{ID: "1", Type: typ, Body: b})
	if err != nil {
		return nil, err
	}
	r, ok := res.(*R)
	if !ok {
		t.Fatalf("%s replied %T", typ, res)
	}
	return r, nil
}

// treeFixture is the fs fixture with a .gitignore, what it ignores, and a directory link
// that leads out of every mount.
func treeFixture(t *testing.T) *fsFixture {
	fx := newFSFixture(t)
	for p, body := range map[string]string{
		".gitignore":        "ignored/\n*.log\n",
		"ignored/x.txt":     "alpha ignored\n",
		"run.log":           "alpha log\n",
		"sub/c.txt":         "one\nalpha two\nthree\nfour\nalpha five\n",
		"sub/deep/d.txt":    "nothing\n",
		".env":              "TOKEN=alpha\n",
		"sub/.gitignore":    "deep/\n",
		"sub/kept/deep.txt": "alpha kept\n",
	} {
		full := filepath.Join(fx.ws, p)
		os.MkdirAll(filepath.Dir(full), 0o755)
		if err := os.WriteFile(full, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	os.Symlink(fx.out, filepath.Join(fx.ws, "outdir"))
	return fx
}

func TestFSList(t *testing.T) {
	t.Parallel()
	fx := treeFixture(t)
	r, err := tree[FSListReply](t, fx.h, TypeFSList, FSPathRequest{Path: "/work"})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	kinds := map[string]FSEntry{}
	for _, e := range r.Entries {
		names = append(names, filepath.Base(e.Path))
		kinds[filepath.Base(e.Path)] = e
	}
	if !slices.IsSorted(names) || !slices.Contains(names, "a.txt") || !slices.Contains(names, ".git") {
		t.Fatalf("entries %v", names)
	}
	if e := kinds["link"]; e.Kind != "symlink" || e.Target != "sub/b" || e.Path != "/work/link" {
		t.Fatalf("the link is %+v", e)
	}
	if e := kinds["sub"]; e.Kind != "dir" {
		t.Fatalf("sub is %+v", e)
	}
	if e := kinds["a.txt"]; e.Kind != "file" || e.Size != 6 || e.Mode != 0o644 || e.Modified.IsZero() {
		t.Fatalf("a.txt is %+v", e)
	}
	r, err = tree[FSListReply](t, fx.h, TypeFSList, FSPathRequest{Path: "/work", Limit: 2})
	if err != nil || len(r.Entries) != 2 || !r.Truncated {
		t.Fatalf("a limited listing: %+v, %v", r, err)
	}
	// stat, as read, goes through a link within the mounts and names where it led.
	st, err := tree[FSEntry](t, fx.h, TypeFSStat, FSPathRequest{Path: "/work/link"})
	if err != nil || st.Kind != "file" || st.Path != "/work/sub/b" {
		t.Fatalf("stat of a link: %+v, %v", st, err)
	}
}

// Every tree request refuses what fs.read refuses, with the same codes, and what it cannot
// do with its own.
func TestFSTreeRefusals(t *testing.T) {
	t.Parallel()
	fx := treeFixture(t)
	for _, tc := range []struct {
		typ  string
		body any
		code string
	}{
		{TypeFSList, FSPathRequest{Path: "/work/a.txt"}, FSNotDir},
		{TypeFSList, FSPathRequest{Path: "/work/missing"}, FSNotFound},
		{TypeFSList, FSPathRequest{Path: "/work/outdir"}, FSEscapes},
		{TypeFSList, FSPathRequest{Path: "/work/../out"}, FSOutside},
		{TypeFSList, FSPathRequest{Path: "relative"}, FSOutside},
		{TypeFSList, FSPathRequest{Path: "/work", Limit: -1}, FSBadRequest},
		{TypeFSList, FSPathRequest{Path: "/work", Limit: MaxTreeLimit + 1}, FSBadRequest},
		{TypeFSList, FSPathRequest{Path: "/home/.ssh"}, FSNeedsYes},
		{TypeFSStat, FSPathRequest{Path: "/work/missing"}, FSNotFound},
		{TypeFSStat, FSPathRequest{Path: "/work/escape"}, FSEscapes},
		{TypeFSGlob, FSGlobRequest{Path: "/work", Pattern: "[unclosed"}, FSBadRequest},
		{TypeFSGlob, FSGlobRequest{Path: "/work", Pattern: ""}, FSBadRequest},
		{TypeFSGlob, FSGlobRequest{Path: "/nowhere", Pattern: "*"}, FSOutside},
		{TypeFSGrep, FSGrepRequest{Path: "/work", Pattern: "(unclosed"}, FSBadRequest},
		{TypeFSGrep, FSGrepRequest{Path: "/work", Pattern: ""}, FSBadRequest},
		{TypeFSGrep, FSGrepRequest{Path: "/work", Pattern: "a", Mode: "lines"}, FSBadRequest},
		{TypeFSGrep, FSGrepRequest{Path: "/work", Pattern: "a", Before: -1}, FSBadRequest},
		{TypeFSGrep, FSGrepRequest{Path: "/work/.env", Pattern: "TOKEN"}, FSNeedsYes},
		{TypeFSGrep, FSGrepRequest{Path: "/work/escape", Pattern: "outside"}, FSEscapes},
	} {
		b, _ := json.Marshal(tc.body)
		_, err := fx.h[tc.typ](context.Background(), HostRequest{ID: "1", Type: tc.typ, Body: b})
		var fe *FSError
		if !errors.As(err, &fe) || fe.Code() != tc.code {
			t.Errorf("%s %s: %v, want %s", tc.typ, b, err, tc.code)
			continue
		}
		for _, host := range []string{fx.ws, fx.out, fx.home} {
			if strings.Contains(err.Error(), host) {
				t.Errorf("%s: the message %q holds a host path", tc.typ, err)
			}
		}
	}
}

// A walk follows no link, skips .git and what .gitignore files ignore (each below its own
// directory), and lists the most recently modified first.
func TestFSGlob(t *testing.T) {
	t.Parallel()
	fx := treeFixture(t)
	r, err := tree[FSGlobReply](t, fx.h, TypeFSGlob, FSGlobRequest{Path: "/work", Pattern: "**"})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range r.Matches {
		got = append(got, m.Path)
		if strings.Contains(m.Path, "outdir/") || strings.Contains(m.Path, "/.git/") || strings.Contains(m.Path, "ignored") ||
			strings.HasSuffix(m.Path, ".log") || strings.Contains(m.Path, "sub/deep/") {
			t.Errorf("the walk gave %s", m.Path)
		}
	}
	for _, want := range []string{"/work/a.txt", "/work/sub/c.txt", "/work/sub/kept/deep.txt", "/work/outdir", "/work/.env", "/work/link"} {
		if !slices.Contains(got, want) {
			t.Errorf("the walk missed %s: %v", want, got)
		}
	}
	if !slices.IsSortedFunc(r.Matches, func(x, y FSEntry) int { return y.Modified.Compare(x.Modified) }) {
		t.Error("not the newest first")
	}
	r, err = tree[FSGlobReply](t, fx.h, TypeFSGlob, FSGlobRequest{Path: "/work", Pattern: "*.txt"})
	if err != nil || len(r.Matches) != 1 || r.Matches[0].Path != "/work/a.txt" {
		t.Fatalf("*.txt: %+v, %v", r, err)
	}
	r, err = tree[FSGlobReply](t, fx.h, TypeFSGlob, FSGlobRequest{Path: "/work", Pattern: "**/*.log", NoIgnore: true})
	if err != nil || len(r.Matches) != 1 || r.Matches[0].Path != "/work/run.log" {
		t.Fatalf("with no_ignore: %+v, %v", r, err)
	}
}

// law: access_judged_as_opened
// grep reads only what the policy lets be read unasked: a secret is skipped and named, never
// asked for file by file; a file named alone is judged as the request, on the route.
func TestFSGrep(t *testing.T) {
	t.Parallel()
	fx := treeFixture(t)
	r, err := tree[FSGrepReply](t, fx.h, TypeFSGrep, FSGrepRequest{Path: "/work", Pattern: "alpha"})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, l := range r.Lines {
		got = append(got, l.Path+":"+l.Text)
	}
	want := []string{"/work/a.txt:alpha", "/work/sub/c.txt:alpha two", "/work/sub/c.txt:alpha five", "/work/sub/kept/deep.txt:alpha kept"}
	if !slices.Equal(got, want) {
		t.Fatalf("lines %q, want %q", got, want)
	}
	if !slices.Equal(r.Skipped, []string{"/work/.env"}) {
		t.Fatalf("skipped %v", r.Skipped)
	}
	if r.Binary != 1 {
		t.Fatalf("binary files %d", r.Binary)
	}
	// Context, as ripgrep's -B/-A: each line once, matches marked.
	r, err = tree[FSGrepReply](t, fx.h, TypeFSGrep, FSGrepRequest{Path: "/work/sub/c.txt", Pattern: "ALPHA", IgnoreCase: true, Before: 1, After: 1})
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, l := range r.Lines {
		mark := ":"
		if l.Context {
			mark = "-"
		}
		lines = append(lines, strings.Join([]string{itoa(l.Line), mark, l.Text}, ""))
	}
	if want := []string{"1-one", "2:alpha two", "3-three", "4-four", "5:alpha five"}; !slices.Equal(lines, want) {
		t.Fatalf("context lines %q, want %q", lines, want)
	}
	f, err := tree[FSGrepReply](t, fx.h, TypeFSGrep, FSGrepRequest{Path: "/work", Pattern: "alpha", Mode: GrepFiles, Glob: "*.txt"})
	if err != nil || !slices.Equal(f.Files, []string{"/work/a.txt", "/work/sub/c.txt", "/work/sub/kept/deep.txt"}) {
		t.Fatalf("files mode: %+v, %v", f, err)
	}
	c, err := tree[FSGrepReply](t, fx.h, TypeFSGrep, FSGrepRequest{Path: "/work", Pattern: "alpha", Mode: GrepCount, Glob: "sub/**"})
	if err != nil || len(c.Counts) != 2 || c.Counts[0] != (FSGrepCount{Path: "/work/sub/c.txt", Count: 2}) {
		t.Fatalf("count mode: %+v, %v", c, err)
	}
	l, err := tree[FSGrepReply](t, fx.h, TypeFSGrep, FSGrepRequest{Path: "/work", Pattern: "alpha", Limit: 2})
	if err != nil || len(l.Lines) != 2 || !l.Truncated {
		t.Fatalf("a limited grep: %+v, %v", l, err)
	}
	// A directory that holds a secret asks; a yes for it still reads no secret in it.
	var asked []string
	yes := FSHandlers(fx.config(nil, func(_ context.Context, op FSOp, _ policy.Effects) FSAnswer {
		asked = append(asked, op.command())
		return FSAnswer{Run: true, Outcome: "approved"}
	}))
	h, err := tree[FSGrepReply](t, yes, TypeFSGrep, FSGrepRequest{Path: "/home", Pattern: "KEY|notes"})
	if err != nil {
		t.Fatal(err)
	}
	if len(h.Lines) != 1 || h.Lines[0].Text != "notes" || !slices.Equal(h.Skipped, []string{"/home/.ssh/id_ed25519"}) {
		t.Fatalf("a walk of the home: %+v", h)
	}
	if !slices.Equal(asked, []string{"fs.grep /home"}) {
		t.Fatalf("asked %q", asked)
	}
	// A secret named alone asks; a yes reads it.
	s, err := tree[FSGrepReply](t, yes, TypeFSGrep, FSGrepRequest{Path: "/work/.env", Pattern: "TOKEN"})
	if err != nil || len(s.Lines) != 1 || s.Lines[0].Text != "TOKEN=alpha" {
		t.Fatalf("a secret read with a yes: %+v, %v", s, err)
	}
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

// Whatever a sandbox sends as a tree request, the reply is of its type or a coded refusal
// naming no host path, and nothing outside the mounts is ever in a reply.
func FuzzFSTreeRequest(f *testing.F) {
	types := []string{TypeFSStat, TypeFSList, TypeFSGlob, TypeFSGrep, TypeFSEdit}
	f.Add(uint8(1), []byte(`{"path":"/work"}`))
	f.Add(uint8(2), []byte(`{"path":"/work","pattern":"**/*"}`))
	f.Add(uint8(3), []byte(`{"path":"/work","pattern":"outside|alpha","before":3,"mode":"count"}`))
	f.Add(uint8(3), []byte(`{"path":"/work/outdir","pattern":"."}`))
	f.Add(uint8(0), []byte(`{"path":"/work/../out/secret"}`))
	f.Add(uint8(2), []byte(`{"path":"/work","pattern":"{a,b","limit":100001}`))
	f.Add(uint8(3), []byte(`not json`))
	f.Add(uint8(4), []byte(`{"path":"/work/a.txt","edits":[{"old_string":"alpha","new_string":"beta"}]}`))
	f.Add(uint8(4), []byte(`{"path":"/work/outdir/secret","edits":[{"old_string":"outside","new_string":"x"}]}`))
	fx := newFSFixture(f)
	os.Symlink(fx.out, filepath.Join(fx.ws, "outdir"))
	f.Fuzz(func(t *testing.T, i uint8, body []byte) {
		typ := types[int(i)%len(types)]
		res, err := fx.h[typ](context.Background(), HostRequest{ID: "1", Type: typ, Body: body})
		if err != nil {
			var c Coded
			if !errors.As(err, &c) || c.Code() == "" {
				t.Fatalf("an uncoded error: %v", err)
			}
			for _, host := range []string{fx.ws, fx.data, fx.out, fx.home} {
				if strings.Contains(err.Error(), host) {
					t.Fatalf("the message %q holds a host path", err)
				}
			}
			return
		}
		b, _ := json.Marshal(res)
		if strings.Contains(string(b), "outside") || strings.Contains(string(b), "KEY") {
			t.Fatalf("a reply holds what no request may read: %s", b)
		}
		if b, _ := os.ReadFile(filepath.Join(fx.out, "secret")); string(b) != "outside\n" {
			t.Fatalf("a file outside every mount changed: %q", b)
		}
	})
}

// BenchmarkFSGrep is fs.grep over the project's own tree, as the grep tool makes it.
func BenchmarkFSGrep(b *testing.B) {
	root, err := filepath.Abs("..")
	if err != nil {
		b.Fatal(err)
	}
	h := FSHandlers(FSConfig{Roots: []string{root}, Env: []string{"HOME=" + b.TempDir()}})
	body, _ := json.Marshal(FSGrepRequest{Path: root, Pattern: `func \(s \*Session\) [A-Z]`, Mode: GrepCount, Limit: MaxTreeLimit})
	for range b.N {
		if _, err := h[TypeFSGrep](context.Background(), HostRequest{ID: "1", Type: TypeFSGrep, Body: body}); err != nil {
			b.Fatal(err)
		}
	}
}
