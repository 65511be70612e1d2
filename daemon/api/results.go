package api

import "time"

// The records the daemon answers with, as the engine makes them (orchestrator.Result and
// its parts, workspace.Report, workspace.CloneReport): the API owns them, field for field
// and in the same JSON, so that the Go client reads them without linking the engine. The
// engine's types give these forms (their API methods); TestAPIFormsMatch holds the two to
// the same JSON.

// Result is what a call of the bash tool did.
type Result struct {
	Grammar string       `json:"grammar"` // steps or exec
	Steps   []StepResult `json:"steps"`   // every step that ran, in order
	End     End          `json:"end"`
	// Saved, for a job whose output went to a file (its artifact), says what the file holds
	// of it.
	Saved *ArtifactReport `json:"saved,omitempty"`
}

// StepResult is one step that ran.
type StepResult struct {
	Index   int      `json:"index"`
	Command string   `json:"command"`
	Effects []string `json:"effects,omitempty"` // the effects' names, sorted
	Status  int      `json:"status"`
	Signal  string   `json:"signal,omitempty"`
	Stdout  Snapshot `json:"stdout"`
	Stderr  Snapshot `json:"stderr"`
	Running bool     `json:"running,omitempty"` // a detached result's step still running
}

// End is how a script ended.
type End struct {
	Kind    string   `json:"kind"`   // finished, exited, refused, detached, killed, failed
	Status  int      `json:"status"` // the script's exit status
	Step    int      `json:"step"`   // refused: the refused step's index
	Command string   `json:"command,omitempty"`
	Code    string   `json:"code,omitempty"` // refused: denied, unanswered, gateway_refused, …
	Job     string   `json:"job,omitempty"`  // detached: the job going on
	Message string   `json:"message,omitempty"`
	Effects []string `json:"effects,omitempty"`
}

// Snapshot is a step's output as kept: the window of it, its counts, and the truncation
// notice.
type Snapshot struct {
	Text         string `json:"text"`
	TotalBytes   int64  `json:"total_bytes"`
	TotalLines   int64  `json:"total_lines"`
	DroppedBytes int64  `json:"dropped_bytes"`
	DroppedLines int64  `json:"dropped_lines"`
	Notice       string `json:"notice,omitempty"`
}

// ArtifactReport says what a job's artifact holds of its output.
type ArtifactReport struct {
	Written int64  `json:"written"`
	Kept    int64  `json:"kept"`
	Dropped int64  `json:"dropped"`
	Head    int64  `json:"head,omitempty"`
	Tail    int64  `json:"tail,omitempty"`
	Cap     int64  `json:"cap,omitempty"`
	Error   string `json:"error,omitempty"`
}

// Question is a step (or a file access) that asks.
type Question struct {
	ID       string   `json:"id"`
	Session  string   `json:"session"`
	Subagent string   `json:"subagent,omitempty"`
	Step     int      `json:"step"`
	Command  string   `json:"command"`
	Effects  []string `json:"effects"`
	// Connect, for a connection that asks (effect net), is its target, host:port.
	Connect string `json:"connect,omitempty"`
}

// Settlement says how a question was settled: approved, denied, cancelled, left.
type Settlement struct {
	ID      string `json:"id"`
	Outcome string `json:"outcome"`
	By      string `json:"by,omitempty"`
}

// SpawnedChild is a child a session started with a script; Done: its script has ended.
type SpawnedChild struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	Done bool   `json:"done"`
}

// Report is a hand-back: what of a child's (or a box's) workspace came into its parent.
type Report struct {
	Parent    string           `json:"parent"`
	Dir       string           `json:"dir"`
	Taken     []Change         `json:"taken"`
	Merged    []Change         `json:"merged,omitempty"` // files both changed, their lines merged cleanly
	Conflicts []ConflictedPath `json:"conflicts"`
	Counts    Counts           `json:"counts"`
}

// Change is one path where the parent now holds the child's version.
type Change struct {
	Path   string `json:"path"`
	Change string `json:"change"` // added, modified, removed
	Kind   string `json:"kind"`   // file, symlink, dir, absent
}

// ConflictedPath is one path where the parent kept its own entry.
type ConflictedPath struct {
	Path   string `json:"path"`
	Reason string `json:"reason"`
	Parent string `json:"parent"`
	Child  string `json:"child"`
	// Saved is where the child's version is, relative to the hand-back's directory
	// (conflicts/PATH); empty when the child removed the path.
	Saved string `json:"saved,omitempty"`
	// Marked is where git's merge with conflict markers is, for a text file whose lines
	// did not merge cleanly (conflicts/PATH.merge).
	Marked string `json:"marked,omitempty"`
}

// Counts count a hand-back's paths.
type Counts struct {
	Listed    int `json:"listed"`
	Changed   int `json:"changed"`
	Taken     int `json:"taken"`
	Merged    int `json:"merged,omitempty"`
	Conflicts int `json:"conflicts"`
	Ignored   int `json:"ignored"`
}

// CloneReport is an isolated workspace's making.
type CloneReport struct {
	Parent   string        `json:"parent"`
	Dir      string        `json:"dir"`
	Files    int           `json:"files"`
	Symlinks int           `json:"symlinks"`
	Dirs     int           `json:"dirs"`
	Bytes    int64         `json:"bytes"`
	Cloned   int           `json:"cloned"`
	Copied   int           `json:"copied"`
	CopiedB  int64         `json:"copied_bytes"`
	Elapsed  time.Duration `json:"elapsed_ns"`
	Warnings []string      `json:"warnings,omitempty"`
	Snapshot bool          `json:"snapshot,omitempty"` // base and copy are btrfs snapshots
}

// FSReadRequest is the body of a file read.
type FSReadRequest struct {
	Path string `json:"path"`
}

// FSWriteRequest is the body of a file write. Encoding is "" (UTF-8 text) or "base64".
type FSWriteRequest struct {
	Path     string `json:"path"`
	Content  string `json:"content"`
	Encoding string `json:"encoding,omitempty"`
}

// FSReply answers a file read or write: the sandbox path of the file really read or written
// (after symlinks), its size, and for a read its content (text, or base64 when it is not
// UTF-8).
type FSReply struct {
	Path     string `json:"path"`
	Size     int64  `json:"size"`
	Content  string `json:"content,omitempty"`
	Encoding string `json:"encoding,omitempty"`
}

// Collected is a child started with a script, collected: its result and its hand-back once
// its script has ended (Done), else only its name.
type Collected struct {
	Child    string  `json:"child"`
	Name     string  `json:"name"`
	Done     bool    `json:"done"`
	Result   *Result `json:"result,omitempty"`
	Handback *Report `json:"handback,omitempty"`
	Error    string  `json:"error,omitempty"`
}
