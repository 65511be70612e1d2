package orchestrator

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/paddockhq/paddock/egress"
	"github.com/paddockhq/paddock/policy"
)

// auditRecord is one verdict, as logged and kept in the audit file: a step's, or a file
// access's (Step -1, Command "fs.read <path>" or "fs.write <path>"). Every verdict is one
// record: run or refused, by whoever gave it.
type auditRecord struct {
	Time     time.Time `json:"time"`
	Session  string    `json:"session"`
	Subagent string    `json:"subagent,omitempty"`
	Step     int       `json:"step"`
	Command  string    `json:"command"`
	// CommandBytes and CommandSHA256 are set when Command was longer than auditTextMax
	// and is kept cut: its whole length and its digest.
	CommandBytes  int            `json:"command_bytes,omitempty"`
	CommandSHA256 string         `json:"command_sha256,omitempty"`
	Host          string         `json:"host,omitempty"` // a file access: the host path opened
	Effects       policy.Effects `json:"effects"`
	Question      string         `json:"question,omitempty"`
	// DecidedBy: auto, rule, approved/denied (a client), gateway, unanswered, cancelled,
	// gatekeeper (Config.Gatekeeper); for a file access also guard, path_map and host.
	DecidedBy string `json:"decided_by"`
	At        string `json:"at,omitempty"`
	By        string `json:"by,omitempty"`
	// Outcome: a step's run, denied, or its question's outcome; a file access's run or
	// refused.
	Outcome string `json:"outcome"`
	Code    string `json:"code,omitempty"` // a refusal's code, as the agent got it
	Rule    string `json:"rule,omitempty"`
	// Net is a connection's record (Command "connect host:port"): the address dialled, the
	// bytes each way, how long it lasted.
	Net *egress.Record `json:"net,omitempty"`
}

// auditLog keeps a session's verdicts: each one a log line, and a JSON line in the audit
// file when there is one.
type auditLog struct {
	log *slog.Logger

	mu   sync.Mutex
	file *os.File // guarded by mu
}

// openAudit opens the audit file (created 0600, appended to); "" keeps the log only.
func openAudit(file string, log *slog.Logger) (*auditLog, error) {
	a := &auditLog{log: log}
	if file != "" {
		f, err := os.OpenFile(file, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
		if err != nil {
			return nil, fmt.Errorf("audit file: %w", err)
		}
		a.file = f
	}
	return a, nil
}

// auditTextMax bounds the command and the question a record keeps: a step or a program's
// argv comes from the sandbox, up to a frame's 32 MiB, and JSON writes a control byte as
// six, so the record (and its log line) could otherwise cost the host's disk many times
// the frame. A longer command is kept cut, with its length and digest.
const auditTextMax = 16 << 10

// clipText is s cut to at most max bytes on a character boundary, with a mark saying how
// many bytes were cut.
func clipText(s string, max int) string {
	if len(s) <= max {
		return s
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + fmt.Sprintf("… (%d bytes more)", len(s)-cut)
}

func (a *auditLog) record(rec auditRecord) {
	rec.Time = time.Now().UTC()
	if len(rec.Command) > auditTextMax {
		sum := sha256.Sum256([]byte(rec.Command))
		rec.CommandBytes, rec.CommandSHA256 = len(rec.Command), hex.EncodeToString(sum[:])
		rec.Command = clipText(rec.Command, auditTextMax)
	}
	rec.Question = clipText(rec.Question, auditTextMax)
	a.log.Info("verdict", slog.String("subagent", rec.Subagent), slog.Int("step", rec.Step),
		slog.String("command", rec.Command), slog.Any("effects", rec.Effects), slog.String("decided_by", rec.DecidedBy),
		slog.String("at", rec.At), slog.String("by", rec.By), slog.String("outcome", rec.Outcome),
		slog.String("code", rec.Code), slog.String("rule", rec.Rule))
	b, _ := json.Marshal(rec)
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.file != nil {
		a.file.Write(append(b, '\n'))
	}
}

func (a *auditLog) close() {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.file != nil {
		a.file.Close()
		a.file = nil
	}
}
