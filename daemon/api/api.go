// Package api holds the types of the daemon's HTTP/JSON API, shared by the server (package
// daemon) and the Go client (package client), and the table of its routes.
package api

import "time"

// Version is the API's version, the first segment of every session path.
const Version = "v1"

// Route is one route of the API: the method and the path pattern (net/http's ServeMux
// syntax, {name} for a segment).
type Route struct {
	Method  string
	Pattern string
	Summary string
}

// Routes are every route the daemon serves. The OpenAPI document names exactly these.
var Routes = []Route{
	{"GET", "/v1/health", "The daemon's version and uptime"},
	{"GET", "/v1/sessions", "List sessions, open and ended"},
	{"POST", "/v1/sessions", "Open a session"},
	{"GET", "/v1/sessions/{id}", "Inspect a session"},
	{"DELETE", "/v1/sessions/{id}", "Close a session (a child: hand its workspace back)"},
	{"POST", "/v1/sessions/{id}/bash", "Run a script with the bash tool"},
	{"POST", "/v1/sessions/{id}/fs/read", "Read a file through the session's path map and guard"},
	{"POST", "/v1/sessions/{id}/fs/write", "Write a file through the session's path map and guard"},
	{"POST", "/v1/sessions/{id}/fs/edit", "Edit a file by exact-string replacements, all or none, through the session's path map and guard"},
	{"POST", "/v1/sessions/{id}/fs/stat", "Describe a file, directory or link through the session's path map and guard"},
	{"POST", "/v1/sessions/{id}/fs/list", "List a directory through the session's path map and guard"},
	{"POST", "/v1/sessions/{id}/fs/glob", "Find files by a glob pattern through the session's path map and guard"},
	{"POST", "/v1/sessions/{id}/fs/grep", "Search files for a regular expression through the session's path map and guard"},
	{"GET", "/v1/sessions/{id}/children", "List a session's children"},
	{"POST", "/v1/sessions/{id}/children", "Spawn a child session"},
	{"POST", "/v1/sessions/{id}/children/{child}/collect", "Collect a child started with a script: wait for its end, close it, hand back"},
	{"POST", "/v1/sessions/{id}/questions/{question}/answer", "Answer a question"},
	{"GET", "/v1/sessions/{id}/jobs", "List a session's jobs"},
	{"GET", "/v1/sessions/{id}/jobs/{job}", "Inspect a job: its result so far"},
	{"POST", "/v1/sessions/{id}/jobs/{job}/wait", "Wait for a job's end"},
	{"POST", "/v1/sessions/{id}/jobs/{job}/kill", "Kill a job"},
	{"GET", "/v1/sessions/{id}/events", "The session's event stream (server-sent events)"},
	{"POST", "/v1/settings", "The settings a session opened with this request would have, each with its source"},
	{"GET", "/metrics", "Metrics in the Prometheus text format"},
	{"GET", "/openapi.json", "This API's OpenAPI document"},
}

// Error is every error the API answers, with a stable code.
type Error struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

func (e *Error) Error() string { return e.Message }

// Health is the daemon's answer to /v1/health.
type Health struct {
	Version string  `json:"version"`
	PID     int     `json:"pid"`
	Uptime  float64 `json:"uptime_seconds"`
}

// Setting is one effective setting and where its value came from: a flag (a request's
// field), a PADDOCK_* variable of the daemon, its global settings file, the project's file,
// or the default.
type Setting struct {
	Key    string `json:"key"`
	Value  any    `json:"value"`
	Source string `json:"source"`
}

// Settings is the answer to /v1/settings: every setting, by key, and what was ignored.
type Settings struct {
	Settings []Setting `json:"settings"`
	Warnings []string  `json:"warnings,omitempty"`
}

// OpenRequest opens a session.
type OpenRequest struct {
	// Workspace is the session's workspace and working directory, a host path; it must exist.
	Workspace string `json:"workspace"`
	// Transport chooses where the kernel runs: docker, wrapped, local, ssh; "": the settings'.
	Transport string `json:"transport,omitempty"`
	// Image, Network: docker settings; "": the settings'.
	Image   string `json:"image,omitempty"`
	Network string `json:"network,omitempty"`
	// Env names host variables passed into a non-local sandbox.
	Env []string `json:"env,omitempty"`
	// Mounts are HOST:SANDBOX[:ro] directories both sides see.
	Mounts []string `json:"mounts,omitempty"`
	// Wrap is the wrapper command of a wrapped transport.
	Wrap string `json:"wrap,omitempty"`
	// AllowNet are targets the sandbox connects to unasked, besides the settings'
	// network.allow: HOST[:PORT], *.DOMAIN[:PORT], ADDRESS[:PORT] or a range.
	AllowNet []string `json:"allow_net,omitempty"`
	// BlockingBudget overrides shell.blockingBudget, e.g. "30s"; "0": calls block to their end.
	BlockingBudget string `json:"blockingBudget,omitempty"`
	// NoOutputTimeout kills a job that printed nothing for this long, e.g. "10m"; "": never.
	NoOutputTimeout string `json:"noOutputTimeout,omitempty"`
	// Settings overrides other settings keys (dotted, e.g. "output.bytes"), as flags would.
	Settings map[string]string `json:"settings,omitempty"`
}

// Session states.
const (
	Open   = "open"
	Ended  = "ended"  // its sandbox ended under it (e.g. while the daemon was down)
	Closed = "closed" // closed through the API
)

// Session describes a session.
type Session struct {
	ID              string    `json:"id"`
	State           string    `json:"state"`
	Reason          string    `json:"reason,omitempty"` // ended: why
	Workspace       string    `json:"workspace"`
	Transport       string    `json:"transport"`
	Parent          string    `json:"parent,omitempty"`
	Name            string    `json:"name,omitempty"`
	Mode            string    `json:"mode,omitempty"` // a child: shared or isolated
	Created         time.Time `json:"created"`
	BlockingBudget  string    `json:"blockingBudget"`
	NoOutputTimeout string    `json:"noOutputTimeout,omitempty"`
	// Cwd is the sandbox directory the session's calls start in.
	Cwd      string   `json:"cwd,omitempty"`
	Children []string `json:"children,omitempty"`
	// Spawned are the children started with a script (a spawn request with a script, or
	// session.spawn from the sandbox), collected with .../children/{child}/collect.
	Spawned  []SpawnedChild `json:"spawned,omitempty"`
	Jobs     []Job          `json:"jobs,omitempty"`
	Clone    *CloneReport   `json:"clone,omitempty"`
	Handback *Report        `json:"handback,omitempty"`
	// HandbackError says why a workspace synced to a box could not be handed back (the box's
	// version is kept in the local copy it names); the session closed all the same.
	HandbackError string   `json:"handbackError,omitempty"`
	Warnings      []string `json:"warnings,omitempty"`
}

// BashRequest runs a script.
type BashRequest struct {
	Script string `json:"script"`
	// Budget overrides the session's blocking budget for this call, e.g. "5s"; "-1": none.
	Budget string `json:"budget,omitempty"`
	// Shell, when set, names a shell of the session the call continues: it starts in the
	// directory, with the variables and exports, the last call of the same name left (a
	// script outside the step grammar, or a call that detached, leaves them as they were).
	// "": the call starts where the session does, and cd and export last for the call.
	// A name is at most 128 bytes; a session keeps the 64 shells used most recently, in the
	// daemon's memory only.
	Shell string `json:"shell,omitempty"`
}

// Job describes a job.
type Job struct {
	ID       string  `json:"id"`
	Script   string  `json:"script"`
	Done     bool    `json:"done"`
	Artifact string  `json:"artifact,omitempty"` // the file holding all its output
	Result   *Result `json:"result,omitempty"`
	// Lost: the job's kernel ended with a daemon that was killed; its artifact holds the
	// output it had produced by then.
	Lost bool `json:"lost,omitempty"`
	// Saved says what the artifact holds of the job's output (as the result's saved does;
	// for a lost job, which has no result, only here): past output.artifactBytes its first and
	// last bytes, and how many between them it dropped.
	Saved *ArtifactReport `json:"saved,omitempty"`
}

// State is the job's state in one word: running, lost, or how it ended (its end's kind;
// ended when no result was recorded).
func (j Job) State() string {
	switch {
	case !j.Done:
		return "running"
	case j.Lost:
		return "lost"
	case j.Result == nil:
		return "ended"
	}
	return j.Result.End.Kind
}

// SpawnRequest spawns a child.
type SpawnRequest struct {
	Name      string   `json:"name"`
	Workspace string   `json:"workspace,omitempty"` // shared (default) or isolated
	Env       []string `json:"env,omitempty"`
	// Script, when set, starts the child running it as a job; the answer names the child
	// (its id only), which is collected rather than closed.
	Script string `json:"script,omitempty"`
}

// AnswerRequest answers a question.
type AnswerRequest struct {
	Approve    bool   `json:"approve"`
	ForSession bool   `json:"forSession,omitempty"`
	Client     string `json:"client,omitempty"`
}

// Event kinds of the stream.
const (
	EventQuestion = "question" // a step asks; answer it with .../answers/{question}
	EventSettled  = "settled"  // a question is settled; answers to it are refused now
	EventOutput   = "output"   // a step's output as it is produced
	EventJobEnd   = "job_end"  // a job ended
	EventClosed   = "closed"   // the session closed; the stream ends
	// EventConnection: a connection through the session's proxy was refused, or ended.
	EventConnection = "connection"
)

// Event is one event of a session's stream (the data of one server-sent event, whose event
// name is Kind).
type Event struct {
	Seq      int64       `json:"seq"`
	Kind     string      `json:"kind"`
	Session  string      `json:"session"`
	Question *Question   `json:"question,omitempty"`
	Settled  *Settlement `json:"settled,omitempty"`
	Output   *Output     `json:"output,omitempty"`
	Job      *Job        `json:"job,omitempty"`
	// Connection is the record of a connection (EventConnection).
	Connection *Connection `json:"connection,omitempty"`
}

// Connection is what became of one connection a sandbox made through its session's proxy:
// a CONNECT tunnel or a plain-HTTP request, allowed or refused.
type Connection struct {
	Time   time.Time `json:"time"`
	Method string    `json:"method"` // CONNECT, or a plain-HTTP request's method
	Target string    `json:"target"` // host:port as asked
	Host   string    `json:"host"`
	Port   uint16    `json:"port"`
	Addr   string    `json:"addr,omitempty"` // the address dialled, after resolution
	// Verdict: allowed or refused.
	Verdict string `json:"verdict"`
	// DecidedBy: allow_rule, deny_rule, session, approved, denied, unanswered, gateway,
	// cancelled, address, proxy or host.
	DecidedBy string `json:"decided_by"`
	Rule      string `json:"rule,omitempty"`
	Code      string `json:"code,omitempty"`
	Question  string `json:"question,omitempty"`
	At        string `json:"at,omitempty"`
	By        string `json:"by,omitempty"`
	Sent      int64  `json:"sent"`     // bytes from the sandbox to the target
	Received  int64  `json:"received"` // bytes from the target to the sandbox
	// Duration is how long the connection lasted, in nanoseconds.
	Duration int64 `json:"duration_ns"`
}

// Output is a chunk of a step's output.
type Output struct {
	Step int    `json:"step"`
	FD   int    `json:"fd"`
	Data string `json:"data"`
}

// Client kinds of an event stream: interactive and gateway streams attach to the session
// as its clients (questions route to them); a watch stream only watches.
const (
	StreamInteractive = "interactive"
	StreamGateway     = "gateway"
	StreamWatch       = "watch"
)

// BashResponse answers a bash call: the result, and the file that holds the call's whole
// output when it was kept (the call detached, or its output was cut).
type BashResponse struct {
	*Result
	Artifact string `json:"artifact,omitempty"`
	// Cwd is the sandbox directory the call's shell (BashRequest.Shell) is in now.
	Cwd string `json:"cwd,omitempty"`
}
