package orchestrator

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"golang.org/x/sys/unix"

	"github.com/paddockhq/paddock/policy"
)

// readAudit returns the records of an audit file, one a line.
func readAudit(t *testing.T, file string) []auditRecord {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	var out []auditRecord
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if line == "" {
			continue
		}
		var r auditRecord
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("audit line %q: %v", line, err)
		}
		out = append(out, r)
	}
	return out
}

// answerByName is an interactive client that approves a question whose command holds "yes"
// and denies any other.
func answerByName(s *Session) Client {
	return &funcClient{kind: Interactive, notify: func(e Event) {
		if e.Kind == EventQuestion {
			q := e.Question
			go s.Answer(q.ID, Answer{Approve: strings.Contains(q.Command, "yes"), Client: "by-name"})
		}
	}}
}

// law: every_verdict_recorded
// Random file accesses through a session, of every kind of verdict (run unasked, asked and
// approved, asked and denied, refused by the path map, refused by what the host found after
// a yes to run it, refused as a bad request), leave exactly one audit record each, in the
// order they were served, with the verdict each got.
func TestFileAccessVerdictsRecorded(t *testing.T) {
	home, ws := t.TempDir(), t.TempDir()
	os.MkdirAll(filepath.Join(home, ".ssh"), 0o700)
	for _, name := range []string{"id_yes", "id_no"} {
		os.WriteFile(filepath.Join(home, ".ssh", name), []byte("KEY\n"), 0o600)
	}
	os.WriteFile(filepath.Join(ws, "a.txt"), []byte("alpha\n"), 0o644)
	os.Symlink("loop", filepath.Join(ws, "loop"))
	if err := unix.Mkfifo(filepath.Join(ws, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	audit := filepath.Join(t.TempDir(), "audit.jsonl")
	s := openLocal(t, ws, Config{Env: []string{"PATH=/usr/bin:/bin", "HOME=" + home}, Policy: Policy{AuditFile: audit}})
	defer s.Attach(answerByName(s))()

	type kind struct {
		typ, path       string
		decidedBy, code string // code "": it ran
		asked           bool
	}
	kinds := []kind{
		{TypeFSRead, filepath.Join(ws, "a.txt"), "auto", "", false},
		{TypeFSWrite, filepath.Join(ws, "new.txt"), "auto", "", false},
		{TypeFSRead, filepath.Join(home, ".ssh", "id_yes"), Approved, "", true},
		{TypeFSWrite, filepath.Join(home, ".ssh", "yes_written"), Approved, "", true},
		{TypeFSRead, filepath.Join(home, ".ssh", "id_no"), Denied, FSNeedsYes, true},
		{TypeFSRead, "a.txt", "path_map", FSOutside, false},
		{TypeFSRead, filepath.Join(ws, "loop"), "path_map", FSLoop, false},
		{TypeFSWrite, filepath.Join(ws, "a\x00b"), "path_map", FSInvalid, false},
		{TypeFSRead, filepath.Join(ws, "fifo"), "host", FSNotFile, false},
		{TypeFSWrite, filepath.Join(ws, "fifo"), "host", FSNotFile, false},
		{TypeFSRead, filepath.Join(ws, "none"), "host", FSNotFound, false},
		{TypeFSRead, filepath.Join(home, ".ssh", "yes_missing"), "host", FSNotFound, true}, // a yes, then nothing there
		{TypeFSRead, "", "host", FSBadRequest, false},
	}
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 1))
	const n = 40
	var want []kind
	ctx := context.Background()
	for range n {
		k := kinds[r.IntN(len(kinds))]
		want = append(want, k)
		body, _ := json.Marshal(FSWriteRequest{Path: k.path, Content: "x"})
		if k.typ == TypeFSRead {
			body, _ = json.Marshal(FSReadRequest{Path: k.path})
		}
		_, err := s.Serve(ctx, k.typ, body)
		if (err == nil) != (k.code == "") {
			t.Fatalf("%s %q: %v, want code %q", k.typ, k.path, err, k.code)
		}
	}
	recs := readAudit(t, audit)
	if len(recs) != n {
		t.Fatalf("%d requests, %d records", n, len(recs))
	}
	for i, k := range want {
		rec := recs[i]
		outcome := "run"
		if k.code != "" {
			outcome = "refused"
		}
		if rec.Step != -1 || rec.Command != accessCommand(FSOp{Write: k.typ == TypeFSWrite, Sandbox: k.path}) ||
			rec.DecidedBy != k.decidedBy || rec.Outcome != outcome || rec.Code != k.code || rec.Session != s.ID() {
			t.Errorf("record %d of %s %q: %+v; want decided by %s, %s %s", i, k.typ, k.path, rec, k.decidedBy, outcome, k.code)
		}
		if k.asked != (rec.Question != "") || k.asked && rec.By != "by-name" {
			t.Errorf("record %d of %s %q: question %q by %q, asked: %v", i, k.typ, k.path, rec.Question, rec.By, k.asked)
		}
		if k.decidedBy != "path_map" && k.code != FSBadRequest && rec.Host == "" {
			t.Errorf("record %d of %s %q names no host path opened", i, k.typ, k.path)
		}
	}
}

// law: every_verdict_recorded
// Every kind of verdict on a step is one audit record, with who gave it: the auto set, an
// allow or deny rule, a client's yes or no, the gateway rule either way, nobody to answer, a
// question cancelled, and a gatekeeper the session was given either way.
func TestEveryStepVerdictRecorded(t *testing.T) {
	readOnly := mustAuto(t, "read")
	yes, no := true, false
	for _, tc := range []struct {
		name      string
		cfg       Config
		client    func(s *Session, cancel context.CancelFunc) Client
		script    string
		decidedBy string
		outcome   string
		code      string
	}{
		{name: "auto", script: "true", decidedBy: "auto", outcome: "run"},
		{name: "allow rule", cfg: Config{Policy: Policy{Auto: readOnly, Rules: []policy.ShellRule{{Action: policy.AllowRule, Prefix: []string{"touch"}}}}},
			script: "touch x", decidedBy: "rule", outcome: "run"},
		{name: "deny rule", cfg: Config{Policy: Policy{Rules: []policy.ShellRule{{Action: policy.DenyRule, Prefix: []string{"touch"}}}}},
			script: "touch x", decidedBy: "rule", outcome: "denied", code: "denied"},
		{name: "approved", cfg: Config{Policy: Policy{Auto: readOnly}}, script: "touch x", decidedBy: Approved, outcome: Approved,
			client: func(s *Session, _ context.CancelFunc) Client {
				return &testClient{kind: Interactive, s: s, answer: &yes}
			}},
		{name: "denied", cfg: Config{Policy: Policy{Auto: readOnly}}, script: "touch x", decidedBy: Denied, outcome: Denied, code: "denied",
			client: func(s *Session, _ context.CancelFunc) Client {
				return &testClient{kind: Interactive, s: s, answer: &no}
			}},
		{name: "gateway runs", cfg: Config{Policy: Policy{Auto: readOnly}}, script: "touch x", decidedBy: "gateway", outcome: "gateway",
			client: func(*Session, context.CancelFunc) Client { return &testClient{kind: Gateway} }},
		{name: "gateway refuses", cfg: Config{Policy: Policy{Auto: readOnly}}, script: "touch .paddock/x", decidedBy: "gateway", outcome: "gateway", code: "gateway_refused",
			client: func(*Session, context.CancelFunc) Client { return &testClient{kind: Gateway} }},
		{name: "unanswered", cfg: Config{Policy: Policy{Auto: readOnly}}, script: "touch x", decidedBy: "unanswered", outcome: "unanswered", code: "unanswered"},
		{name: "cancelled", cfg: Config{Policy: Policy{Auto: readOnly}}, script: "touch x", decidedBy: Cancelled, outcome: Cancelled, code: "cancelled",
			client: func(s *Session, cancel context.CancelFunc) Client {
				return &funcClient{kind: Interactive, notify: func(e Event) {
					if e.Kind == EventQuestion {
						cancel()
					}
				}}
			}},
		{name: "gatekeeper runs", cfg: Config{Gatekeeper: gateFunc(func(context.Context, Step) Verdict { return Verdict{Run: true} })},
			script: "true", decidedBy: "gatekeeper", outcome: "run"},
		{name: "gatekeeper refuses", cfg: Config{Gatekeeper: gateFunc(func(context.Context, Step) Verdict { return Verdict{Code: "no_way"} })},
			script: "true", decidedBy: "gatekeeper", outcome: "refused", code: "no_way"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			audit := filepath.Join(t.TempDir(), "audit.jsonl")
			tc.cfg.Policy.AuditFile = audit
			s := openLocal(t, t.TempDir(), tc.cfg)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if tc.client != nil {
				defer s.Attach(tc.client(s, cancel))()
			}
			if _, err := s.Bash(ctx, tc.script); err != nil && ctx.Err() == nil {
				t.Fatal(err)
			}
			recs := readAudit(t, audit)
			if len(recs) != 1 {
				t.Fatalf("%d records: %+v", len(recs), recs)
			}
			r := recs[0]
			if r.DecidedBy != tc.decidedBy || r.Outcome != tc.outcome || r.Code != tc.code || r.Command != tc.script || r.Step != 0 {
				t.Errorf("record %+v; want decided by %s, outcome %s, code %q", r, tc.decidedBy, tc.outcome, tc.code)
			}
		})
	}
}

// A step's text comes from the agent or the sandbox, up to a frame's size, and JSON writes a
// control byte as six: the audit record keeps the command cut, with its length and digest,
// so that a record costs the host's disk a bounded amount whatever the step.
func TestAuditRecordBounded(t *testing.T) {
	for _, body := range []string{strings.Repeat("\x01", 1<<20), strings.Repeat("é", 1<<19), strings.Repeat("a", auditTextMax-20)} {
		audit := filepath.Join(t.TempDir(), "audit.jsonl")
		s := openLocal(t, t.TempDir(), Config{Policy: Policy{AuditFile: audit}})
		script := "true '" + body + "'"
		if _, err := s.Bash(context.Background(), script); err != nil {
			t.Fatal(err)
		}
		fi, err := os.Stat(audit)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Size() > 6*auditTextMax+4096 {
			t.Errorf("a step of %d bytes left an audit record of %d bytes", len(script), fi.Size())
		}
		recs := readAudit(t, audit)
		if len(recs) != 1 {
			t.Fatalf("%d records", len(recs))
		}
		// The record's command is the step as it runs, printed: compare its length.
		r := recs[0]
		if long := len(body) > auditTextMax; long != (r.CommandBytes > auditTextMax) || long != (len(r.CommandSHA256) == 64) || !utf8.ValidString(r.Command) {
			t.Errorf("a step of %d bytes: record of %d bytes, length %d, digest %q", len(script), len(r.Command), r.CommandBytes, r.CommandSHA256)
		}
	}
}

// A command over auditTextMax is kept as its head, cut on a character boundary, with its
// length and its digest; one within it is kept whole.
func TestAuditClip(t *testing.T) {
	for _, cmd := range []string{"", "true", strings.Repeat("a", auditTextMax), strings.Repeat("a", auditTextMax+1),
		strings.Repeat("é", auditTextMax), "a" + strings.Repeat("日本", auditTextMax), strings.Repeat("\x01", 3*auditTextMax)} {
		file := filepath.Join(t.TempDir(), "audit.jsonl")
		a, err := openAudit(file, slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatal(err)
		}
		a.record(auditRecord{Command: cmd, Question: cmd})
		a.close()
		r := readAudit(t, file)[0]
		if len(cmd) <= auditTextMax {
			if r.Command != cmd || r.Question != cmd || r.CommandBytes != 0 || r.CommandSHA256 != "" {
				t.Errorf("a command of %d bytes was changed: %d bytes, %d, %q", len(cmd), len(r.Command), r.CommandBytes, r.CommandSHA256)
			}
			continue
		}
		sum := sha256.Sum256([]byte(cmd))
		head, _, _ := strings.Cut(r.Command, "…")
		qhead, _, _ := strings.Cut(r.Question, "…")
		if r.CommandBytes != len(cmd) || r.CommandSHA256 != hex.EncodeToString(sum[:]) || !strings.HasPrefix(cmd, head) ||
			len(head) > auditTextMax || len(head) < auditTextMax-3 || !utf8.ValidString(r.Command) || qhead != head {
			t.Errorf("a command of %d bytes: head %d bytes, length %d, digest %s", len(cmd), len(head), r.CommandBytes, r.CommandSHA256)
		}
	}
}
