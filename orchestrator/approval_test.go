package orchestrator

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/paddockhq/paddock/images"
	"github.com/paddockhq/paddock/policy"
)

// behaviour is what the clients of one session do with a question.
type behaviour int

const (
	nobody        behaviour = iota // no client attached
	approves                       // an interactive client that answers yes
	denies                         // an interactive client that answers no
	leaves                         // an interactive client that leaves without answering
	gatewayAlone                   // a gateway client only
	leavesBeside                   // an interactive client that leaves, beside a gateway
	answersBeside                  // an interactive client that answers yes, beside a gateway
	behaviours
)

func (b behaviour) String() string {
	return [...]string{"nobody", "approves", "denies", "leaves", "gateway", "leaves-beside-gateway", "approves-beside-gateway"}[b]
}

// testClient plays one client.
type testClient struct {
	kind   ClientKind
	s      *Session
	answer *bool // nil: never answers
	leave  bool
	detach func()

	mu        sync.Mutex
	questions []Question // guarded by mu
	settled   []string   // guarded by mu
}

func (c *testClient) Kind() ClientKind { return c.kind }

func (c *testClient) Notify(e Event) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch e.Kind {
	case EventQuestion:
		c.questions = append(c.questions, *e.Question)
		switch {
		case c.answer != nil:
			go c.s.Answer(e.Question.ID, Answer{Approve: *c.answer, Client: "test"})
		case c.leave:
			go c.detach()
		}
	case EventSettled:
		c.settled = append(c.settled, e.Settled.ID)
	}
}

func (c *testClient) asked() []Question {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]Question(nil), c.questions...)
}

// attach attaches the clients of a behaviour; it returns them and their detach.
func attach(s *Session, b behaviour) ([]*testClient, func()) {
	yes, no := true, false
	var cs []*testClient
	add := func(c *testClient) {
		c.s = s
		c.detach = s.Attach(c)
		cs = append(cs, c)
	}
	switch b {
	case approves:
		add(&testClient{kind: Interactive, answer: &yes})
	case denies:
		add(&testClient{kind: Interactive, answer: &no})
	case leaves:
		add(&testClient{kind: Interactive, leave: true})
	case gatewayAlone:
		add(&testClient{kind: Gateway})
	case leavesBeside:
		add(&testClient{kind: Gateway})
		add(&testClient{kind: Interactive, leave: true})
	case answersBeside:
		add(&testClient{kind: Gateway})
		add(&testClient{kind: Interactive, answer: &yes})
	}
	return cs, func() {
		for _, c := range cs {
			c.detach()
		}
	}
}

// modelRoute is the route as the issue states it, written apart from the code: up the
// chain from the asking session, the first session whose client answers decides; a
// gateway-only session (or one whose interactive clients all left beside a gateway)
// answers by the gateway rule; a session whose clients all left passes it on; with no
// session answering, it is unanswered. It returns the outcome and the sessions whose
// interactive clients were shown the question.
func modelRoute(chain []behaviour, guarded bool) (run bool, code string, shown []int) {
	for i, b := range chain {
		switch b {
		case approves, answersBeside:
			return true, "", append(shown, i)
		case denies:
			return false, "denied", append(shown, i)
		case leaves:
			shown = append(shown, i)
		case leavesBeside, gatewayAlone:
			if b == leavesBeside {
				shown = append(shown, i)
			}
			if guarded {
				return false, "gateway_refused", shown
			}
			return true, "", shown
		}
	}
	return false, "unanswered", shown
}

// law: child_answered_by_root, nearest_answer_wins, unanswered_only_when_quiet, quiet_is_unanswered,
// law: gateway_never_waits, gateway_refuses_protected, gateway_refuses_secret, gateway_runs_the_rest,
// law: left_to_the_gateway, gateway_rules_a_subagent, never_auto_asks_the_client, held_needs_a_yes
func TestRouteOnRealSessions(t *testing.T) {
	home := t.TempDir()
	os.MkdirAll(filepath.Join(home, ".ssh"), 0o700)
	os.WriteFile(filepath.Join(home, ".ssh", "id_ed25519"), []byte("KEY\n"), 0o600)
	ws := t.TempDir()
	os.MkdirAll(filepath.Join(ws, ".git"), 0o755)
	os.WriteFile(filepath.Join(ws, "prog"), []byte("#!/bin/sh\necho ran\n"), 0o755)
	auto, err := policy.ParseAutoSet([]string{"read"})
	if err != nil {
		t.Fatal(err)
	}
	env := []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + home}
	root := openLocal(t, ws, Config{Env: env, Policy: Policy{Auto: &auto}})
	ctx := context.Background()
	child, err := root.Spawn(ctx, ChildConfig{Name: "child"})
	if err != nil {
		t.Fatal(err)
	}
	defer child.Close()
	grandchild, err := child.Spawn(ctx, ChildConfig{Name: "grandchild"})
	if err != nil {
		t.Fatal(err)
	}
	defer grandchild.Close()
	sessions := []*Session{grandchild, child, root}

	steps := []struct {
		name, script string
		guarded      bool // protected or secret
	}{
		{"write", "echo x > out.txt", false},
		{"program", "./prog", false},
		{"protected write", "echo x > .git/config", true},
		{"secret read", "cat " + filepath.Join(home, ".ssh", "id_ed25519"), true},
	}
	for depth := 1; depth <= 3; depth++ {
		chain := sessions[3-depth:] // the asking session first, then up to the root
		combos := 1
		for range chain {
			combos *= int(behaviours)
		}
		for n := 0; n < combos; n++ {
			bs := make([]behaviour, len(chain))
			for i, x := 0, n; i < len(chain); i, x = i+1, x/int(behaviours) {
				bs[i] = behaviour(x % int(behaviours))
			}
			for _, st := range steps {
				name := fmt.Sprintf("depth %d %v %s", depth, bs, st.name)
				clients := make([][]*testClient, len(chain))
				var detaches []func()
				for i, s := range chain {
					cs, d := attach(s, bs[i])
					clients[i], detaches = cs, append(detaches, d)
				}
				res, err := chain[0].Bash(ctx, st.script)
				for _, d := range detaches {
					d()
				}
				if err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				run, code, shown := modelRoute(bs, st.guarded)
				ran := res.End.Kind != Refused
				if ran != run || (!run && res.End.Code != code) {
					t.Fatalf("%s: ran %v (%s), want ran %v (%s)\n%s", name, ran, res.End.Code, run, code, res)
				}
				for i := range chain {
					saw := 0
					for _, c := range clients[i] {
						for _, q := range c.asked() {
							saw++
							if wantName := chain[0].name; q.Subagent != wantName {
								t.Fatalf("%s: question names subagent %q, want %q", name, q.Subagent, wantName)
							}
						}
						if c.kind == Gateway && len(c.asked()) > 0 {
							t.Fatalf("%s: a gateway was shown a question", name)
						}
					}
					want := 0
					for _, j := range shown {
						if j == i {
							want = 1
						}
					}
					if saw != want {
						t.Fatalf("%s: session %d shown %d questions, want %d", name, i, saw, want)
					}
				}
			}
		}
	}
}

// A step within the auto set runs and asks no one, whoever is attached.
// law: auto_runs_within
func TestAutoRunsWithin(t *testing.T) {
	s := openLocal(t, t.TempDir(), Config{})
	c := &testClient{kind: Interactive}
	c.s = s
	defer s.Attach(c)()
	res, err := s.Bash(context.Background(), "echo x > f; cat f")
	if err != nil || res.End.Kind != Finished || len(c.asked()) != 0 {
		t.Fatalf("%v %s, asked %v", err, res, c.asked())
	}
}

// The first answer decides; every client is told the question is settled; a later answer
// is refused as gone.
func TestFirstAnswerWins(t *testing.T) {
	auto, _ := policy.ParseAutoSet([]string{"read"})
	s := openLocal(t, t.TempDir(), Config{Policy: Policy{Auto: &auto}})
	yes, no := true, false
	a := &testClient{kind: Interactive, answer: &yes}
	b := &testClient{kind: Interactive}
	a.s, b.s = s, s
	defer s.Attach(a)()
	defer s.Attach(b)()
	res, err := s.Bash(context.Background(), "echo x > f")
	if err != nil || res.End.Kind != Finished {
		t.Fatalf("%v %s", err, res)
	}
	qs := b.asked()
	if len(qs) != 1 {
		t.Fatalf("b was shown %d questions", len(qs))
	}
	b.mu.Lock()
	settled := strings.Join(b.settled, ",")
	b.mu.Unlock()
	if settled != qs[0].ID {
		t.Fatalf("b was told %q settled, want %q", settled, qs[0].ID)
	}
	err = s.Answer(qs[0].ID, Answer{Approve: no})
	var gone *GoneError
	if !errors.As(err, &gone) || gone.Code() != "shell_approval_gone" {
		t.Fatalf("a late answer: %v", err)
	}
}

// "Allow for the rest of the session" adds a session rule: the same command then runs
// unasked; every verdict is an audit record in a 0600 file.
func TestSessionRuleAndAudit(t *testing.T) {
	auto, _ := policy.ParseAutoSet([]string{"read"})
	audit := filepath.Join(t.TempDir(), "audit.jsonl")
	s := openLocal(t, t.TempDir(), Config{Policy: Policy{Auto: &auto, AuditFile: audit}})
	c := &testClient{kind: Interactive} // sees the questions, answers none
	c.s = s
	detach := s.Attach(c)
	// Another client answers "yes, for the rest of the session".
	var once sync.Once
	s.Attach(&funcClient{kind: Interactive, notify: func(e Event) {
		if e.Kind == EventQuestion {
			once.Do(func() { go s.Answer(e.Question.ID, Answer{Approve: true, ForSession: true, Client: "always"}) })
		}
	}})
	ctx := context.Background()
	if res, err := s.Bash(ctx, "touch one"); err != nil || res.End.Kind != Finished {
		t.Fatalf("%v %s", err, res)
	}
	detach()
	n := len(c.asked())
	// Were it asked, nobody would answer: the call would end refused when tctx does.
	tctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if res, err := s.Bash(tctx, "touch two three"); err != nil || res.End.Kind != Finished {
		t.Fatalf("%v %s", err, res)
	}
	if len(c.asked()) != n {
		t.Fatal("the session rule did not let the same command run unasked")
	}
	b, err := os.ReadFile(audit)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], `"by":"always"`) || !strings.Contains(lines[1], `"decided_by":"rule"`) {
		t.Fatalf("audit:\n%s", b)
	}
	if fi, _ := os.Stat(audit); fi.Mode().Perm() != 0o600 {
		t.Fatalf("audit file mode %v", fi.Mode())
	}
}

// funcClient is a client whose Notify is a function.
type funcClient struct {
	kind   ClientKind
	notify func(Event)
}

func (c *funcClient) Kind() ClientKind { return c.kind }
func (c *funcClient) Notify(e Event)   { c.notify(e) }

// A file access from the sandbox outside the auto set takes the approval route like a step:
// refused with nobody attached, run on a yes.
// law: gate_secret_read_needs_yes, gate_yes_runs
func TestFileAccessAsks(t *testing.T) {
	home := t.TempDir()
	os.MkdirAll(filepath.Join(home, ".aws"), 0o700)
	os.WriteFile(filepath.Join(home, ".aws", "credentials"), []byte("SECRET\n"), 0o600)
	kernel, err := images.Default.Find(context.Background(), runtime.GOARCH)
	if err != nil {
		t.Fatal(err)
	}
	ws := t.TempDir()
	s := openLocal(t, ws, Config{Env: []string{"PATH=/usr/bin:/bin", "HOME=" + home}})
	// The request's body comes from a file: a step naming the secret would be asked itself.
	os.WriteFile(filepath.Join(ws, "req.json"), []byte(`{"path":"`+filepath.Join(home, ".aws", "credentials")+`"}`), 0o644)
	read := kernel + ` host fs.read - < req.json`
	ctx := context.Background()
	res, err := s.Bash(ctx, read)
	if err != nil {
		t.Fatal(err)
	}
	if res.Steps[0].Status == 0 || strings.Contains(res.Steps[0].Stdout.Text, "SECRET") {
		t.Fatalf("a secret was read with nobody to say yes: %s", res)
	}
	yes := true
	c := &testClient{kind: Interactive, answer: &yes}
	c.s = s
	defer s.Attach(c)()
	res, err = s.Bash(ctx, read)
	if err != nil || res.Steps[0].Status != 0 || !strings.Contains(res.Steps[0].Stdout.Text, "SECRET") {
		t.Fatalf("after a yes: %v %s", err, res)
	}
	if qs := c.asked(); len(qs) != 1 || !qs[0].Effects.Has(policy.Secret) || !strings.Contains(qs[0].Command, "fs.read") {
		t.Fatalf("questions %+v", qs)
	}
}

// An "always" covers the same command with no effect beyond those the person saw: after an
// always for touch one (write), touch two runs unasked, but touch .git/hooks/x (protected)
// and rm -rf .git are asked — refused, nobody being attached any more.
// law: gate_needs_yes
func TestAlwaysCoversWhatWasSeen(t *testing.T) {
	auto, _ := policy.ParseAutoSet([]string{"read"})
	ws := t.TempDir()
	os.MkdirAll(filepath.Join(ws, ".git", "hooks"), 0o755)
	s := openLocal(t, ws, Config{Policy: Policy{Auto: &auto}})
	var once sync.Once
	detach := s.Attach(&funcClient{kind: Interactive, notify: func(e Event) {
		if e.Kind == EventQuestion {
			once.Do(func() { go s.Answer(e.Question.ID, Answer{Approve: true, ForSession: true, Client: "always"}) })
		}
	}})
	ctx := context.Background()
	if res, err := s.Bash(ctx, "touch one"); err != nil || res.End.Kind != Finished {
		t.Fatalf("%v %s", err, res)
	}
	detach()
	if res, err := s.Bash(ctx, "touch two"); err != nil || res.End.Kind != Finished {
		t.Fatalf("the same command and effects: %v %s", err, res)
	}
	for _, script := range []string{"touch .git/hooks/pre-commit", "touch /tmp/outside-" + filepath.Base(ws), "rm -rf .git"} {
		res, err := s.Bash(ctx, script)
		if err != nil || res.End.Kind != Refused || res.End.Code != "unanswered" {
			t.Errorf("%s: %v %s", script, err, res)
		}
	}
	if _, err := os.Stat(filepath.Join(ws, ".git", "hooks", "pre-commit")); err == nil {
		t.Error("a hook was written under an always given for touch one")
	}
	if _, err := os.Stat(filepath.Join(ws, ".git")); err != nil {
		t.Error(".git was removed under an always given for touch one")
	}
}

// A trusted allow rule never takes the gateway rule's place: in a session whose only client
// is a gateway, touch of a hook is refused by the gateway rule though a rule allows touch;
// an ordinary touch runs.
// law: gateway_refuses_protected
func TestAllowRuleYieldsToGateway(t *testing.T) {
	auto, _ := policy.ParseAutoSet([]string{"read"})
	ws := t.TempDir()
	os.MkdirAll(filepath.Join(ws, ".git", "hooks"), 0o755)
	rules := []policy.ShellRule{{Action: policy.AllowRule, Prefix: []string{"touch"}, Source: "settings"}}
	s := openLocal(t, ws, Config{Policy: Policy{Auto: &auto, Rules: rules}})
	s.Attach(&funcClient{kind: Gateway, notify: func(Event) {}})
	ctx := context.Background()
	res, err := s.Bash(ctx, "touch .git/hooks/pre-commit")
	if err != nil || res.End.Kind != Refused || res.End.Code != "gateway_refused" {
		t.Fatalf("%v %s", err, res)
	}
	if res, err := s.Bash(ctx, "touch a"); err != nil || res.End.Kind != Finished {
		t.Fatalf("%v %s", err, res)
	}
}
