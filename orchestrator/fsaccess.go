package orchestrator

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"unicode/utf8"

	"github.com/paddockhq/paddock/policy"
	"github.com/paddockhq/paddock/transport/pathmap"
)

// The fs.read and fs.write host requests: a program in the sandbox reads or writes a file
// through the host (`paddock-kernel host fs.read '{"path":"/work/a.txt"}'`). The sandbox path
// is mapped to its real host path before anything else looks at it; the policy decides
// whether the access runs (its effects as a redirection of the path would have them: read or
// write, plus secret, outside or protected by the path's class; run unasked only within the
// auto set, so a secret never); the reply names the sandbox path of the file really read or
// written. Every refusal is an *FSError with a stable code, and its message names sandbox
// paths only.

// Host request types served by FSHandlers.
const (
	TypeFSRead  = "fs.read"
	TypeFSWrite = "fs.write"
)

// Codes of an FSError.
const (
	FSOutside    = pathmap.Outside  // the path is under no mount, relative, or "~"
	FSEscapes    = pathmap.Escapes  // a symlink leads out of every mount
	FSLoop       = pathmap.Loop     // too many symlinks
	FSInvalid    = pathmap.Invalid  // a NUL byte
	FSNotFound   = "not_found"      // read: no such file
	FSIsDir      = "is_dir"         // the path is a directory
	FSNotFile    = "not_file"       // the path is a device, socket or pipe
	FSTooLarge   = "too_large"      // read: over the size limit
	FSReadOnly   = "read_only"      // write: the mount is read-only
	FSNoParent   = "no_parent"      // write: the parent directory does not exist
	FSNotAllowed = "not_allowed"    // the guard refused the access
	FSNeedsYes   = "needs_approval" // the access needs a person's yes and none was given
	FSBadRequest = "bad_request"    // the body is wrong
	FSFailed     = "failed"         // the host could not carry it out
)

// FSError is a refused or failed file access. Its message names the sandbox path only.
type FSError struct {
	Op      string // read or write
	Sandbox string // the sandbox path asked for
	Reason  string // one of the FS* codes
	Detail  string // for the agent; never a host path
}

func (e *FSError) Error() string {
	msg := fmt.Sprintf("fs.%s %q: %s", e.Op, e.Sandbox, e.Reason)
	if e.Detail != "" {
		msg += ": " + e.Detail
	}
	return msg
}

// Code is the stable code of the refusal.
func (e *FSError) Code() string { return e.Reason }

// Is makes errors.Is(err, &FSError{Reason: r}) match any FSError with reason r.
func (e *FSError) Is(target error) bool {
	t, ok := target.(*FSError)
	return ok && t.Reason == e.Reason && t.Op == "" && t.Sandbox == ""
}

// FSOp is one file access as the guard sees it.
type FSOp struct {
	Write   bool   // a write; else a read
	Sandbox string // the sandbox path asked for
	Host    string // its real host path (symlinks resolved)
}

// FSGuard decides whether an access runs: nil runs it, an error refuses it (an *FSError's
// code reaches the agent, any other error is FSNotAllowed). The default is PolicyGuard.
type FSGuard func(ctx context.Context, op FSOp) error

// FSAsk puts an access that the auto set does not grant to a person (the session's approval
// route) and reports whether the answer was yes. Nil: nobody is asked, the access is refused.
// Its code says why a refused access did not run (denied, unanswered, gateway_refused, …).
type FSAsk func(ctx context.Context, op FSOp, effects policy.Effects) (run bool, code string)

// FSConfig configures the file-access host requests.
type FSConfig struct {
	// PathMap maps sandbox paths to host paths; nil is the identity (local).
	PathMap *pathmap.Map
	// Roots are the workspace roots, host paths.
	Roots []string
	// Env is the session's environment (HOME and the variables naming credential files).
	Env []string
	// Home is the host's home directory, where the credential stores are; "": HOME of Env.
	Home string
	// Settings are the settings files loaded, host paths: each is protected.
	Settings []string
	// Ephemeral says the sandbox is removed at its end (a fresh container).
	Ephemeral bool
	// Own are Paddock's own places, kept from the sandbox.
	Own policy.Own
	// Auto is the auto set; nil: policy.DefaultAutoSet().
	Auto *policy.AutoSet
	// Ask asks a person about an access the auto set does not grant; nil refuses it.
	Ask FSAsk
	// Guard replaces the policy's decision altogether when set.
	Guard FSGuard
	// MaxRead bounds a read's size in bytes; 0 is DefaultMaxRead.
	MaxRead int64
}

// DefaultMaxRead is the largest file fs.read returns by default.
const DefaultMaxRead = 16 << 20

// FSHandlers returns the fs.read and fs.write handlers, to put in Config.Handlers.
func FSHandlers(c FSConfig) map[string]Handler {
	if c.MaxRead <= 0 {
		c.MaxRead = DefaultMaxRead
	}
	if c.Guard == nil {
		auto := policy.DefaultAutoSet()
		if c.Auto != nil {
			auto = *c.Auto
		}
		pctx := &policy.Context{Cwd: "/", Env: c.Env, Home: c.Home, Roots: c.Roots, Settings: c.Settings, Ephemeral: c.Ephemeral, Own: c.Own}
		if m := c.PathMap; m != nil {
			pctx.ToHost = func(p string) (string, bool) {
				h, err := m.ToHost(p)
				return h, err == nil
			}
		}
		c.Guard = PolicyGuard(pctx, auto, c.Ask)
	}
	if c.PathMap == nil {
		c.PathMap = pathmap.Identity()
	}
	return map[string]Handler{
		TypeFSRead:  c.read,
		TypeFSWrite: c.write,
	}
}

// FSReadRequest is the body of fs.read.
type FSReadRequest struct {
	Path string `json:"path"`
}

// FSWriteRequest is the body of fs.write. Encoding is "" (UTF-8 text) or "base64".
type FSWriteRequest struct {
	Path     string `json:"path"`
	Content  string `json:"content"`
	Encoding string `json:"encoding,omitempty"`
}

// FSReply is the reply to fs.read and fs.write: the sandbox path of the file really read or
// written (after symlinks), its size, and for a read its content (text, or base64 when it
// is not UTF-8).
type FSReply struct {
	Path     string `json:"path"`
	Size     int64  `json:"size"`
	Content  string `json:"content,omitempty"`
	Encoding string `json:"encoding,omitempty"`
}

// resolve maps a sandbox path to its real host path, refusing what the map refuses.
func (c *FSConfig) resolve(op, sandbox string) (string, error) {
	if sandbox == "" {
		return "", &FSError{Op: op, Reason: FSBadRequest, Detail: "no path named"}
	}
	host, err := c.PathMap.ToHost(sandbox)
	if err != nil {
		var r *pathmap.Refusal
		if errors.As(err, &r) {
			return "", &FSError{Op: op, Sandbox: sandbox, Reason: r.Code, Detail: r.Error()}
		}
		return "", &FSError{Op: op, Sandbox: sandbox, Reason: FSFailed, Detail: bareErr(err)}
	}
	return host, nil
}

// reply returns the reply's sandbox path of a real host path: where the file really is, as
// the sandbox sees it; the asked path when the map cannot say (a host path seen twice).
func (c *FSConfig) replyPath(host, asked string) string {
	if sb, err := c.PathMap.ToSandbox(host); err == nil {
		return sb
	}
	return asked
}

func (c *FSConfig) guard(ctx context.Context, op FSOp) error {
	err := c.Guard(ctx, op)
	if err == nil {
		return nil
	}
	name := "read"
	if op.Write {
		name = "write"
	}
	var fe *FSError
	if errors.As(err, &fe) {
		fe.Op, fe.Sandbox = name, op.Sandbox
		return fe
	}
	return &FSError{Op: name, Sandbox: op.Sandbox, Reason: FSNotAllowed, Detail: err.Error()}
}

func (c *FSConfig) read(ctx context.Context, req HostRequest) (any, error) {
	var body FSReadRequest
	if err := req.Decode(&body); err != nil {
		return nil, err
	}
	host, err := c.resolve("read", body.Path)
	if err != nil {
		return nil, err
	}
	if err := c.guard(ctx, FSOp{Sandbox: body.Path, Host: host}); err != nil {
		return nil, err
	}
	refuse := func(reason, detail string) error {
		return &FSError{Op: "read", Sandbox: body.Path, Reason: reason, Detail: detail}
	}
	f, err := os.Open(host)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, refuse(FSNotFound, "no such file")
	case err != nil:
		return nil, refuse(FSFailed, bareErr(err))
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, refuse(FSFailed, bareErr(err))
	}
	switch {
	case fi.IsDir():
		return nil, refuse(FSIsDir, "a directory")
	case !fi.Mode().IsRegular():
		return nil, refuse(FSNotFile, "not a regular file")
	case fi.Size() > c.MaxRead:
		return nil, refuse(FSTooLarge, fmt.Sprintf("%d bytes, over the limit of %d", fi.Size(), c.MaxRead))
	}
	b, err := io.ReadAll(io.LimitReader(f, c.MaxRead+1))
	if err != nil {
		return nil, refuse(FSFailed, bareErr(err))
	}
	if int64(len(b)) > c.MaxRead {
		return nil, refuse(FSTooLarge, fmt.Sprintf("over the limit of %d bytes", c.MaxRead))
	}
	r := &FSReply{Path: c.replyPath(host, body.Path), Size: int64(len(b))}
	if utf8.Valid(b) {
		r.Content = string(b)
	} else {
		r.Content, r.Encoding = base64.StdEncoding.EncodeToString(b), "base64"
	}
	return r, nil
}

func (c *FSConfig) write(ctx context.Context, req HostRequest) (any, error) {
	var body FSWriteRequest
	if err := req.Decode(&body); err != nil {
		return nil, err
	}
	refuse := func(reason, detail string) error {
		return &FSError{Op: "write", Sandbox: body.Path, Reason: reason, Detail: detail}
	}
	var data []byte
	switch body.Encoding {
	case "", "utf-8":
		data = []byte(body.Content)
	case "base64":
		b, err := base64.StdEncoding.DecodeString(body.Content)
		if err != nil {
			return nil, refuse(FSBadRequest, "the content is not base64")
		}
		data = b
	default:
		return nil, refuse(FSBadRequest, fmt.Sprintf("unknown encoding %q (utf-8 or base64)", body.Encoding))
	}
	host, err := c.resolve("write", body.Path)
	if err != nil {
		return nil, err
	}
	if m, ok := c.PathMap.Mount(body.Path); ok && m.ReadOnly {
		return nil, refuse(FSReadOnly, "the mount is read-only")
	}
	if err := c.guard(ctx, FSOp{Write: true, Sandbox: body.Path, Host: host}); err != nil {
		return nil, err
	}
	switch fi, err := os.Stat(filepath.Dir(host)); {
	case errors.Is(err, fs.ErrNotExist), err == nil && !fi.IsDir():
		return nil, refuse(FSNoParent, "the parent directory does not exist")
	case err != nil:
		return nil, refuse(FSFailed, bareErr(err))
	}
	mode := fs.FileMode(0o644)
	if fi, err := os.Lstat(host); err == nil {
		switch {
		case fi.IsDir():
			return nil, refuse(FSIsDir, "a directory")
		case !fi.Mode().IsRegular():
			return nil, refuse(FSNotFile, "not a regular file")
		}
		mode = fi.Mode().Perm()
	}
	// O_NOFOLLOW: host is real, so a symlink there now was put there since it was resolved.
	f, err := os.OpenFile(host, os.O_WRONLY|os.O_CREATE|os.O_TRUNC|syscall.O_NOFOLLOW, mode)
	if err != nil {
		return nil, refuse(FSFailed, bareErr(err))
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return nil, refuse(FSFailed, bareErr(err))
	}
	if err := f.Close(); err != nil {
		return nil, refuse(FSFailed, bareErr(err))
	}
	return &FSReply{Path: c.replyPath(host, body.Path), Size: int64(len(data))}, nil
}

// bareErr is an error's text without a host path in it.
func bareErr(err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	var le *os.LinkError
	if errors.As(err, &le) {
		return le.Err.Error()
	}
	return "the host could not carry it out"
}

// PolicyGuard decides accesses by the policy: an access has the effects a redirection of its
// sandbox path would have (FSEffects); it runs unasked only when the auto set holds every
// one, else it runs only on ask's yes. A secret is never in an auto set, so a secret is never
// read or written unasked.
func PolicyGuard(pctx *policy.Context, auto policy.AutoSet, ask FSAsk) FSGuard {
	return func(ctx context.Context, op FSOp) error {
		e := FSEffects(pctx, op)
		if auto.Decide(e) == policy.Run {
			return nil
		}
		run, code := false, "unanswered"
		if ask != nil {
			run, code = ask(ctx, op, e)
		}
		if run {
			return nil
		}
		what := "fs.read " + op.Sandbox
		if op.Write {
			what = "fs.write " + op.Sandbox
		}
		return &FSError{Reason: FSNeedsYes, Detail: RefusalText("file access", what, code, "") + fmt.Sprintf(" (its effects: %s)", e)}
	}
}

// FSEffects are the effects of one file access: those of reading (<) or writing (>) its
// sandbox path, judged on the real host path: read or write, secret for a path that is or
// holds a secret, and for a write outside or protected by the path's class.
func FSEffects(pctx *policy.Context, op FSOp) policy.Effects {
	r := policy.Redirect{FD: 0, Op: "<", Path: op.Sandbox}
	if op.Write {
		r = policy.Redirect{FD: 1, Op: ">", Path: op.Sandbox}
	}
	return policy.RedirectEffects(pctx, "/", r)
}
