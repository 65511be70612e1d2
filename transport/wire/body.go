package wire

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
)

// The bodies of the host's requests and of the kernel's replies.

// Exec runs one pipeline: its commands joined by OS pipes, all in one new process group.
// The first command reads standard input from /dev/null unless a redirection says else; the
// last one's standard output and every command's standard error stream back as Stream
// frames (Step is the command's index) unless redirected.
type Exec struct {
	Cwd      string    `json:"cwd"`             // sandbox path the commands start in
	Env      []string  `json:"env"`             // the whole environment, NAME=value
	Commands []Command `json:"commands"`        // at least one
	Shell    bool      `json:"shell,omitempty"` // Commands[0].Argv[0] is a script for bash -c (sh -c without bash)
	// Script, when set, is a shell script the kernel interprets itself (Commands is then
	// empty): every simple command it would run, and every file it would open for a
	// redirection or a source, is judged by the host first (Judge), and runs only on a
	// verdict to run. Its output streams as step 0's.
	Script string `json:"script,omitempty"`
	// Params are a Script's positional parameters ($1…); Params[0] is $0.
	Params []string `json:"params,omitempty"`
	// Judged: a command that is a shell reading a script (sh -c SCRIPT, bash FILE, a shell
	// reading standard input) is not run as a program: the kernel interprets its script as
	// it does Script, judging each command.
	Judged bool `json:"judged,omitempty"`
	// Prefix begins the messages the kernel itself writes on a command's standard error (a
	// redirection that fails); "": "paddock-kernel: ".
	Prefix string `json:"prefix,omitempty"`
}

// Command is one simple command of a pipeline.
type Command struct {
	Argv      []string   `json:"argv"`
	Env       []string   `json:"env,omitempty"` // NAME=value added for this command alone
	Redirects []Redirect `json:"redirects,omitempty"`
}

// Redirect operators.
const (
	RedirIn     = "<"  // open Path for reading as FD
	RedirOut    = ">"  // create or truncate Path as FD
	RedirAppend = ">>" // create or append Path as FD
	RedirDup    = ">&" // FD becomes a copy of DupFD
)

// Redirect is one redirection of a command, applied in order.
type Redirect struct {
	FD    int    `json:"fd"`
	Op    string `json:"op"`
	Path  string `json:"path,omitempty"`
	DupFD int    `json:"dup_fd,omitempty"`
}

// ExecResult is the reply to Exec: one status per command, in order.
type ExecResult struct {
	Statuses []ExitStatus `json:"statuses"`
}

// ExitStatus is how one process ended: its exit code, or the signal that ended it (Code is
// then 128 plus the signal's number, as a shell reports it). Error says why a command did
// not start (code 127 for not found, 126 for not executable).
type ExitStatus struct {
	Code   int    `json:"code"`
	Signal string `json:"signal,omitempty"`
	Error  string `json:"error,omitempty"`
}

// Signal sends a signal to the process group of exec request Target. TERM is followed by
// KILL after GraceMillis when the group is still alive (0: the kernel's default grace).
type Signal struct {
	Target      string `json:"target"`
	Signal      string `json:"signal"` // TERM, KILL, INT, HUP, QUIT
	GraceMillis int    `json:"grace_ms,omitempty"`
}

// Path names one sandbox path: the body of readdir, stat and realpath.
type Path struct {
	Path     string `json:"path"`
	NoFollow bool   `json:"nofollow,omitempty"` // stat: do not follow a final symlink
}

// Entry types.
const (
	TypeFile    = "file"
	TypeDir     = "dir"
	TypeSymlink = "symlink"
	TypeOther   = "other"
)

// Entry is one directory entry, or the result of stat.
type Entry struct {
	Name    string `json:"name"`
	Type    string `json:"type"`
	Mode    uint32 `json:"mode"` // permission bits
	Size    int64  `json:"size"`
	ModTime int64  `json:"mtime"`            // Unix nanoseconds
	Target  string `json:"target,omitempty"` // symlink: what it points to
}

// Dir is the reply to readdir, entries sorted by name.
type Dir struct {
	Entries []Entry `json:"entries"`
}

// Hello is the reply to ping.
type Hello struct {
	Version    string `json:"version"`
	OS         string `json:"os"`
	Arch       string `json:"arch"`
	PID        int    `json:"pid"`
	HostSocket string `json:"host_socket"` // where sandbox programs reach the host
}

// Attach is the body of the first line a host writes on a connection to a listening kernel:
// a nonce of its own. The key the kernel was started with never crosses a connection, whose
// other end may be anything in the sandbox (a socket swapped for a program's own): the
// kernel proves it holds the key (Challenge), then the host does (Prove), each over both
// nonces; a connection that fails either is closed, and only then is the resume frame sent.
type Attach struct {
	Nonce string `json:"nonce"`
}

// Challenge is the kernel's answer to an attach: a nonce of its own and its proof of the key
// over both (Proof with ProofKernel).
type Challenge struct {
	Nonce string `json:"nonce"`
	Proof string `json:"proof"`
}

// Prove is the host's answer to a challenge: its proof of the key over both nonces (Proof
// with ProofHost).
type Prove struct {
	Proof string `json:"proof"`
}

// Who proves the key: each side's proof is its own, so neither can be replayed as the other's.
const (
	ProofKernel = "paddock kernel"
	ProofHost   = "paddock host"
)

// nonceBytes is a nonce's size before its hex encoding.
const nonceBytes = 32

// NewNonce is a fresh random nonce, hex.
func NewNonce() string {
	b := make([]byte, nonceBytes)
	rand.Read(b) // never fails (crypto/rand)
	return hex.EncodeToString(b)
}

// ValidNonce reports whether n has a nonce's form: as long as NewNonce makes them, hex.
func ValidNonce(n string) bool {
	if len(n) != 2*nonceBytes {
		return false
	}
	_, err := hex.DecodeString(n)
	return err == nil
}

// Proof is who's proof that it holds key, over the host's nonce and the kernel's: HMAC-SHA256,
// hex. Compare proofs with hmac.Equal.
func Proof(key, who, hostNonce, kernelNonce string) string {
	m := hmac.New(sha256.New, []byte(key))
	for _, part := range []string{who, hostNonce, kernelNonce} {
		m.Write([]byte(part))
		m.Write([]byte{0})
	}
	return hex.EncodeToString(m.Sum(nil))
}

// Resume is the body of the first frame a listening kernel writes on each connection. The
// Replay frames that follow it were written before the connection (their numbers are at
// most Last); every later frame is numbered on from Last+1. Execs are the execs the host
// has not released, with whether each still runs and how many bytes of its output were
// dropped from the front of what is replayed (a bound on what the kernel keeps).
type Resume struct {
	Last   uint64     `json:"last"`
	Replay int        `json:"replay"`
	Execs  []HeldExec `json:"execs,omitempty"`
}

// HeldExec is one exec a listening kernel keeps the frames of.
type HeldExec struct {
	ID      string `json:"id"`
	Running bool   `json:"running"`
	Skipped int64  `json:"skipped,omitempty"`
}

// Ack is the body of a host's ack: every frame numbered up to Seq was handled, and the
// frames of the execs in Done are no longer needed.
type Ack struct {
	Seq  uint64   `json:"seq"`
	Done []string `json:"done,omitempty"`
}

// Kinds of a Judge.
const (
	JudgeProgram  = "program"  // a program the shell runs
	JudgeBuiltin  = "builtin"  // a builtin of the shell (echo, cd, read, export…), run by the kernel
	JudgeFunction = "function" // a function the script defined
	JudgeShell    = "shell"    // a shell reading a script, which the kernel interprets instead
	JudgeOpen     = "open"     // a file the shell opens: a redirection, or a file it sources
)

// Judge is a kernel's question to its host before a script it interprets does something
// (event judge: its id is the exec's, Step numbers the judges of the exec from 1). The host
// answers each with one Verdict (event verdict, the same id and Step).
type Judge struct {
	Kind string   `json:"kind"`
	Argv []string `json:"argv,omitempty"` // the command's words, expanded
	// Env is the exported variables the command runs with that are not the exec's own
	// (added or changed since it started), NAME=value, sorted.
	Env []string `json:"env,omitempty"`
	Cwd string   `json:"cwd"`
	// An open: the file (absolute) and how: < reads, > truncates or creates, >> appends.
	Path string `json:"path,omitempty"`
	Op   string `json:"op,omitempty"`
	FD   int    `json:"fd,omitempty"`
	// Beside are the words of the shell's other commands at work as this one is judged
	// (judged and not yet ended: a background job's, a pipeline's other members), at most
	// MaxBeside; an empty entry stands for a command whose words are over MaxBesideWords or
	// MaxBesideBytes, or for the commands past MaxBeside.
	Beside [][]string `json:"beside,omitempty"`
}

// Bounds of a judge's Beside.
const (
	MaxBeside      = 32
	MaxBesideWords = 64
	MaxBesideBytes = 4096
)

// BoundBeside is beside within the bounds of a judge's Beside: an entry over them is empty,
// and past MaxBeside entries one empty entry stands for the rest.
func BoundBeside(beside [][]string) [][]string {
	var out [][]string
	for i, argv := range beside {
		if i == MaxBeside-1 && len(beside) > MaxBeside {
			return append(out, nil)
		}
		n := 0
		for _, w := range argv {
			n += len(w)
		}
		if len(argv) > MaxBesideWords || n > MaxBesideBytes {
			argv = nil
		}
		out = append(out, argv)
	}
	return out
}

// Verdict is the host's answer to a Judge.
type Verdict struct {
	Run bool `json:"run"`
	// A program that runs: the words and the environment entries (NAME=value, added to its
	// own) to run it with; the words are the judged ones when Argv is empty.
	Argv []string `json:"argv,omitempty"`
	Env  []string `json:"env,omitempty"`
	// Hold: the shell waits for the program before it ends, though it runs in the
	// background: it changes names, and a step judged while it runs must see it beside.
	Hold bool `json:"hold,omitempty"`
	// Refused: why, for the agent. The script ends at once.
	Code    string `json:"code,omitempty"`
	Message string `json:"message,omitempty"`
}

// Egress asks the kernel to listen at Listen, a TCP address on the sandbox's loopback, and
// carry each connection made there to Socket, the unix socket of the host's proxy bound into
// the sandbox. The reply is EgressReply.
type Egress struct {
	Socket string `json:"socket"`
	Listen string `json:"listen"`
}

// EgressReply is the address the kernel listens at.
type EgressReply struct {
	Addr string `json:"addr"`
}
