package orchestrator

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/paddockhq/paddock/images"
	"github.com/paddockhq/paddock/policy"
	"github.com/paddockhq/paddock/transport/local"
	"github.com/paddockhq/paddock/transport/pathmap"
)

// fsFixture is a workspace mounted at /work, a data directory mounted read-only at /data
// (not a workspace root), and a directory no mount holds.
type fsFixture struct {
	ws, data, out, home string
	pm                  *pathmap.Map
	h                   map[string]Handler
}

func newFSFixture(t testing.TB) *fsFixture {
	t.Helper()
	base, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	f := &fsFixture{ws: filepath.Join(base, "ws"), data: filepath.Join(base, "data"), out: filepath.Join(base, "out"), home: filepath.Join(base, "home")}
	for _, d := range []string{f.ws, f.data, f.out, filepath.Join(f.ws, "sub"), filepath.Join(f.ws, ".git"), filepath.Join(f.home, ".ssh")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	files := map[string]string{
		filepath.Join(f.ws, "a.txt"):                "alpha\n",
		filepath.Join(f.ws, "sub", "b"):             "beta\n",
		filepath.Join(f.data, "d.txt"):              "data\n",
		filepath.Join(f.out, "secret"):              "outside\n",
		filepath.Join(f.ws, ".git", "HEAD"):         "ref: refs/heads/main\n",
		filepath.Join(f.home, ".ssh", "id_ed25519"): "KEY\n",
		filepath.Join(f.home, "notes.txt"):          "notes\n",
	}
	for p, body := range files {
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	os.WriteFile(filepath.Join(f.ws, "bin"), []byte{0xff, 0x00, 0xfe}, 0o600)
	os.Symlink("sub/b", filepath.Join(f.ws, "link"))
	os.Symlink(filepath.Join(f.out, "secret"), filepath.Join(f.ws, "escape"))
	os.Symlink("loop", filepath.Join(f.ws, "loop"))
	pm, err := pathmap.New(pathmap.Mount{Sandbox: "/work", Host: f.ws}, pathmap.Mount{Sandbox: "/data", Host: f.data, ReadOnly: true},
		pathmap.Mount{Sandbox: "/home", Host: f.home})
	if err != nil {
		t.Fatal(err)
	}
	f.pm = pm
	f.h = FSHandlers(f.config(nil, nil))
	return f
}

// config is the fixture's configuration with an auto set (nil: the default) and an asker.
func (f *fsFixture) config(auto *policy.AutoSet, ask FSAsk) FSConfig {
	return FSConfig{PathMap: f.pm, Roots: []string{f.ws}, Env: []string{"HOME=" + f.home}, Auto: auto, Ask: ask, MaxRead: 64}
}

func (f *fsFixture) call(typ string, body any) (*FSReply, error) {
	b, _ := json.Marshal(body)
	res, err := f.h[typ](context.Background(), HostRequest{ID: "1", Type: typ, Body: b})
	if err != nil {
		return nil, err
	}
	return res.(*FSReply), nil
}

func TestFSRead(t *testing.T) {
	f := newFSFixture(t)
	for _, tc := range []struct {
		path, want, wantPath string
	}{
		{"/work/a.txt", "alpha\n", "/work/a.txt"},
		{"/work/sub/../a.txt", "alpha\n", "/work/a.txt"},
		{"/work/link", "beta\n", "/work/sub/b"},  // the reply names where the file really is
		{"/data/d.txt", "data\n", "/data/d.txt"}, // outside the workspace: a read, in the auto set
		{"/home/notes.txt", "notes\n", "/home/notes.txt"},
	} {
		r, err := f.call(TypeFSRead, FSReadRequest{Path: tc.path})
		if err != nil {
			t.Errorf("read %s: %v", tc.path, err)
			continue
		}
		if r.Content != tc.want || r.Path != tc.wantPath || r.Size != int64(len(tc.want)) || r.Encoding != "" {
			t.Errorf("read %s = %+v, want %q at %s", tc.path, r, tc.want, tc.wantPath)
		}
	}
	r, err := f.call(TypeFSRead, FSReadRequest{Path: "/work/bin"})
	if err != nil || r.Encoding != "base64" || r.Content != base64.StdEncoding.EncodeToString([]byte{0xff, 0x00, 0xfe}) {
		t.Errorf("binary read = %+v, %v", r, err)
	}
}

// Every refusal is typed, and its message never holds a host path.
func TestFSRefusals(t *testing.T) {
	f := newFSFixture(t)
	os.WriteFile(filepath.Join(f.ws, "big"), make([]byte, 65), 0o644)
	for _, tc := range []struct {
		typ  string
		body any
		code string
	}{
		{TypeFSRead, FSReadRequest{Path: "/etc/passwd"}, FSOutside},
		{TypeFSRead, FSReadRequest{Path: "a.txt"}, FSOutside},
		{TypeFSRead, FSReadRequest{Path: "~/a.txt"}, FSOutside},
		{TypeFSRead, FSReadRequest{Path: "/work/../../etc/passwd"}, FSOutside},
		{TypeFSRead, FSReadRequest{Path: "/work/escape"}, FSEscapes},
		{TypeFSRead, FSReadRequest{Path: "/work/loop"}, FSLoop},
		{TypeFSRead, FSReadRequest{Path: "/work/a\x00b"}, FSInvalid},
		{TypeFSRead, FSReadRequest{Path: ""}, FSBadRequest},
		{TypeFSRead, FSReadRequest{Path: "/work/none"}, FSNotFound},
		{TypeFSRead, FSReadRequest{Path: "/work/sub"}, FSIsDir},
		{TypeFSRead, FSReadRequest{Path: "/work/big"}, FSTooLarge},
		{TypeFSRead, FSReadRequest{Path: "/home/.ssh/id_ed25519"}, FSNeedsYes},
		{TypeFSRead, FSReadRequest{Path: "/home/.ssh"}, FSNeedsYes},
		{TypeFSWrite, FSWriteRequest{Path: "/home/.ssh/config", Content: "x"}, FSNeedsYes},
		{TypeFSRead, json.RawMessage(`{"path": 3}`), FSBadRequest},
		{TypeFSWrite, FSWriteRequest{Path: "/data/new", Content: "x"}, FSReadOnly},
		{TypeFSWrite, FSWriteRequest{Path: "/work/escape", Content: "x"}, FSEscapes},
		{TypeFSWrite, FSWriteRequest{Path: "/tmp/x", Content: "x"}, FSOutside},
		{TypeFSWrite, FSWriteRequest{Path: "/work/no/dir/x", Content: "x"}, FSNoParent},
		{TypeFSWrite, FSWriteRequest{Path: "/work/sub", Content: "x"}, FSIsDir},
		{TypeFSWrite, FSWriteRequest{Path: "/work/x", Content: "!", Encoding: "base64"}, FSBadRequest},
		{TypeFSWrite, FSWriteRequest{Path: "/work/x", Content: "x", Encoding: "utf-16"}, FSBadRequest},
	} {
		_, err := f.call(tc.typ, tc.body)
		var c Coded
		if !errors.As(err, &c) || c.Code() != tc.code {
			t.Errorf("%s %v: %v, want code %s", tc.typ, tc.body, err, tc.code)
			continue
		}
		for _, host := range []string{f.ws, f.data, f.out} {
			if strings.Contains(err.Error(), host) {
				t.Errorf("%s %v: the message %q holds a host path", tc.typ, tc.body, err)
			}
		}
	}
	if b, _ := os.ReadFile(filepath.Join(f.out, "secret")); string(b) != "outside\n" {
		t.Errorf("a refused write changed a file outside: %q", b)
	}
	if _, err := os.Stat(filepath.Join(f.home, ".ssh", "config")); err == nil {
		t.Errorf("a refused write made .ssh/config")
	}
}

func TestFSWrite(t *testing.T) {
	f := newFSFixture(t)
	r, err := f.call(TypeFSWrite, FSWriteRequest{Path: "/work/sub/new.txt", Content: "new\n"})
	if err != nil || r.Path != "/work/sub/new.txt" || r.Size != 4 {
		t.Fatalf("write = %+v, %v", r, err)
	}
	if b, _ := os.ReadFile(filepath.Join(f.ws, "sub", "new.txt")); string(b) != "new\n" {
		t.Errorf("the host file holds %q", b)
	}
	// Through a link inside the workspace: the link's target changes, the reply says which.
	r, err = f.call(TypeFSWrite, FSWriteRequest{Path: "/work/link", Content: "BETA"})
	if err != nil || r.Path != "/work/sub/b" {
		t.Fatalf("write through a link = %+v, %v", r, err)
	}
	if b, _ := os.ReadFile(filepath.Join(f.ws, "sub", "b")); string(b) != "BETA" {
		t.Errorf("the link's target holds %q", b)
	}
	if fi, _ := os.Lstat(filepath.Join(f.ws, "link")); fi.Mode()&os.ModeSymlink == 0 {
		t.Errorf("the link was replaced by a file")
	}
	// Binary content, and the file's mode kept.
	r, err = f.call(TypeFSWrite, FSWriteRequest{Path: "/work/bin", Content: base64.StdEncoding.EncodeToString([]byte{0xff, 2, 0}), Encoding: "base64"})
	if err != nil || r.Size != 3 {
		t.Fatalf("binary write = %+v, %v", r, err)
	}
	if fi, _ := os.Stat(filepath.Join(f.ws, "bin")); fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, want 0600 kept", fi.Mode().Perm())
	}
	back, err := f.call(TypeFSRead, FSReadRequest{Path: "/work/bin"})
	if err != nil || back.Encoding != "base64" || back.Content != base64.StdEncoding.EncodeToString([]byte{0xff, 2, 0}) {
		t.Errorf("read back %+v, %v", back, err)
	}
}

// A guard decides; its refusal reaches the agent with its code, and nothing is touched.
func TestFSGuard(t *testing.T) {
	f := newFSFixture(t)
	pm, _ := pathmap.New(pathmap.Mount{Sandbox: "/work", Host: f.ws})
	var seen []FSOp
	h := FSHandlers(FSConfig{PathMap: pm, Guard: func(_ context.Context, op FSOp) error {
		seen = append(seen, op)
		if op.Write {
			return &FSError{Reason: FSNeedsYes, Detail: "a write asks"}
		}
		return nil
	}})
	f.h = h
	if _, err := f.call(TypeFSRead, FSReadRequest{Path: "/work/link"}); err != nil {
		t.Fatal(err)
	}
	_, err := f.call(TypeFSWrite, FSWriteRequest{Path: "/work/a.txt", Content: "changed"})
	if !errors.Is(err, &FSError{Reason: FSNeedsYes}) {
		t.Fatalf("a guarded write: %v", err)
	}
	if b, _ := os.ReadFile(filepath.Join(f.ws, "a.txt")); string(b) != "alpha\n" {
		t.Errorf("a refused write changed the file: %q", b)
	}
	want := []FSOp{{Sandbox: "/work/link", Host: filepath.Join(f.ws, "sub", "b")}, {Write: true, Sandbox: "/work/a.txt", Host: filepath.Join(f.ws, "a.txt")}}
	if len(seen) != 2 || seen[0] != want[0] || seen[1] != want[1] {
		t.Errorf("the guard saw %+v, want %+v (real host paths)", seen, want)
	}
}

func mustAuto(t *testing.T, names ...string) *policy.AutoSet {
	t.Helper()
	a, err := policy.ParseAutoSet(names)
	if err != nil {
		t.Fatal(err)
	}
	return &a
}

// law: gate_secret_read_needs_yes
// law: gate_yes_runs
// A secret is read only on a yes; a yes runs the access; a no refuses it.
func TestFSSecretReadNeedsYes(t *testing.T) {
	f := newFSFixture(t)
	for _, yes := range []bool{false, true} {
		var asked []policy.Effects
		f.h = FSHandlers(f.config(mustAuto(t, "read", "write", "exec", "net", "outside", "protected"), func(_ context.Context, op FSOp, e policy.Effects) FSAnswer {
			asked = append(asked, e)
			return FSAnswer{Run: yes, Code: "denied"}
		}))
		r, err := f.call(TypeFSRead, FSReadRequest{Path: "/home/.ssh/id_ed25519"})
		if len(asked) != 1 || !asked[0].Has(policy.Secret|policy.Read) {
			t.Fatalf("yes=%v: asked %v, want one question with read,secret", yes, asked)
		}
		if yes && (err != nil || r.Content != "KEY\n") {
			t.Errorf("a yes did not run the read: %+v, %v", r, err)
		}
		if !yes && !errors.Is(err, &FSError{Reason: FSNeedsYes}) {
			t.Errorf("a no: %v, want needs_approval", err)
		}
	}
}

// law: gate_write_auto_never_secret
// law: gate_inside_write_runs
// Under any auto set a secret write asks (and nobody answering refuses it); an inside write
// runs unasked exactly when write is in the auto set.
func TestFSWriteDecidedByAutoSet(t *testing.T) {
	names := []string{"read", "write", "exec", "net", "outside", "protected"}
	for mask := 0; mask < 1<<len(names); mask++ {
		var set []string
		for i, n := range names {
			if mask&(1<<i) != 0 {
				set = append(set, n)
			}
		}
		f := newFSFixture(t)
		asked := 0
		f.h = FSHandlers(f.config(mustAuto(t, set...), func(context.Context, FSOp, policy.Effects) FSAnswer { asked++; return FSAnswer{Code: "denied"} }))
		if _, err := f.call(TypeFSWrite, FSWriteRequest{Path: "/home/.ssh/authorized_keys", Content: "x"}); !errors.Is(err, &FSError{Reason: FSNeedsYes}) {
			t.Errorf("auto %v: a secret write: %v", set, err)
		}
		if _, err := os.Stat(filepath.Join(f.home, ".ssh", "authorized_keys")); err == nil {
			t.Errorf("auto %v: a secret was written unasked", set)
		}
		_, err := f.call(TypeFSWrite, FSWriteRequest{Path: "/work/inside.txt", Content: "x"})
		hasWrite := mask&2 != 0
		if hasWrite && err != nil {
			t.Errorf("auto %v: an inside write did not run: %v", set, err)
		}
		if !hasWrite && !errors.Is(err, &FSError{Reason: FSNeedsYes}) {
			t.Errorf("auto %v: an inside write ran unasked (%v)", set, err)
		}
		wantAsked := 1
		if !hasWrite {
			wantAsked = 2
		}
		if asked != wantAsked {
			t.Errorf("auto %v: asked %d times, want %d", set, asked, wantAsked)
		}
	}
}

// fsClient is an interactive client that answers every question the same way.
type fsClient struct {
	s      *Session
	answer bool

	mu        sync.Mutex
	questions []Question // guarded by mu
}

func (c *fsClient) Kind() ClientKind { return Interactive }

func (c *fsClient) Notify(e Event) {
	if e.Kind != EventQuestion {
		return
	}
	c.mu.Lock()
	c.questions = append(c.questions, *e.Question)
	c.mu.Unlock()
	go c.s.Answer(e.Question.ID, Answer{Approve: c.answer, Client: "fs-test"})
}

// law: gate_secret_read_needs_yes
// law: gate_yes_runs
// A program in a real session reads a secret through the host only when the session's
// client says yes; with no client the read is unanswered, refused; an inside read asks
// nobody.
func TestFSThroughSessionApprovals(t *testing.T) {
	ctx := context.Background()
	kernel, err := images.Default.Find(ctx, runtime.GOARCH)
	if err != nil {
		t.Fatal(err)
	}
	base, _ := filepath.EvalSymlinks(t.TempDir())
	ws, home := filepath.Join(base, "ws"), filepath.Join(base, "home")
	os.MkdirAll(filepath.Join(home, ".ssh"), 0o700)
	os.MkdirAll(ws, 0o755)
	os.WriteFile(filepath.Join(home, ".ssh", "id_ed25519"), []byte("KEY-BYTES\n"), 0o600)
	os.WriteFile(filepath.Join(ws, "a.txt"), []byte("inside\n"), 0o644)
	os.WriteFile(filepath.Join(ws, "secret.json"), []byte(`{"path":"`+filepath.Join(home, ".ssh", "id_ed25519")+`"}`), 0o644)
	os.WriteFile(filepath.Join(ws, "inside.json"), []byte(`{"path":"`+filepath.Join(ws, "a.txt")+`"}`), 0o644)

	for _, who := range []string{"approves", "denies", "nobody"} {
		t.Run(who, func(t *testing.T) {
			// The session serves fs.read and fs.write itself, its approval route answering.
			s, err := Open(ctx, Config{
				Workspace: ws,
				Transport: &local.Transport{Stderr: os.Stderr},
				Kernel:    kernel,
				Env:       []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + home},
			})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			c := &fsClient{s: s, answer: who == "approves"}
			if who != "nobody" {
				defer s.Attach(c)()
			}
			res, err := s.Bash(ctx, kernel+" host fs.read - < inside.json")
			if err != nil || !strings.Contains(res.Steps[0].Stdout.Text, "inside") {
				t.Fatalf("an inside read: %v %v", res, err)
			}
			c.mu.Lock()
			if len(c.questions) != 0 {
				t.Errorf("an inside read asked %v", c.questions)
			}
			c.mu.Unlock()
			res, err = s.Bash(ctx, kernel+" host fs.read - < secret.json")
			if err != nil {
				t.Fatal(err)
			}
			got := res.Steps[len(res.Steps)-1]
			if who == "approves" {
				if got.Status != 0 || !strings.Contains(got.Stdout.Text, "KEY-BYTES") {
					t.Errorf("approved secret read: %s", res)
				}
			} else if got.Status == 0 || strings.Contains(got.Stdout.Text, "KEY-BYTES") || !strings.Contains(got.Stderr.Text, FSNeedsYes) {
				t.Errorf("a secret read without a yes: %s", res)
			}
			c.mu.Lock()
			defer c.mu.Unlock()
			want := 1
			if who == "nobody" {
				want = 0
			}
			if len(c.questions) != want {
				t.Fatalf("questions %v, want %d", c.questions, want)
			}
			if want == 1 && (!strings.Contains(c.questions[0].Command, "fs.read") || !c.questions[0].Effects.Has(policy.Secret)) {
				t.Errorf("the question: %+v", c.questions[0])
			}
		})
	}
}

// The bodies of fs.read and fs.write come from programs in the sandbox: whatever they hold,
// the handlers answer with a reply or a coded error whose message names no host path, and
// nothing outside the workspace changes.
func FuzzFSRequest(f *testing.F) {
	f.Add(true, []byte(`{"path":"/work/a.txt"}`))
	f.Add(false, []byte(`{"path":"/work/new","content":"x"}`))
	f.Add(false, []byte(`{"path":"/work/escape","content":"x"}`))
	f.Add(false, []byte(`{"path":"/data/d.txt","content":"eA==","encoding":"base64"}`))
	f.Add(true, []byte(`{"path":"/work/../../etc/passwd"}`))
	f.Add(true, []byte(`{"path":"/home/.ssh/id_ed25519"}`))
	f.Add(true, []byte(`not json`))
	fx := newFSFixture(f)
	f.Fuzz(func(t *testing.T, read bool, body []byte) {
		typ := TypeFSWrite
		if read {
			typ = TypeFSRead
		}
		res, err := fx.h[typ](context.Background(), HostRequest{ID: "1", Type: typ, Body: body})
		if err == nil {
			if _, ok := res.(*FSReply); !ok {
				t.Fatalf("reply %T", res)
			}
			return
		}
		var c Coded
		if !errors.As(err, &c) || c.Code() == "" {
			t.Fatalf("an uncoded error: %v", err)
		}
		for _, host := range []string{fx.ws, fx.data, fx.out, fx.home} {
			if strings.Contains(err.Error(), host) {
				t.Fatalf("the message %q holds a host path", err)
			}
		}
		if b, _ := os.ReadFile(filepath.Join(fx.out, "secret")); string(b) != "outside\n" {
			t.Fatalf("a file outside every mount changed: %q", b)
		}
	})
}
