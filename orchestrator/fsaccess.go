package orchestrator

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"strings"
	"unicode/utf8"

	"golang.org/x/sys/unix"

	"github.com/paddockhq/paddock/errdefs"
	"github.com/paddockhq/paddock/policy"
	"github.com/paddockhq/paddock/transport/pathmap"
)

// The fs.read and fs.write host requests: a program in the sandbox reads or writes a file
// through the host (`paddock-kernel host fs.read '{"path":"/work/a.txt"}'`).
//
// Check and use are one operation. The sandbox path is mapped to the real host path it leads
// to (pathmap.Locate: symlinks in the mounts are followed there, as the host's kernel would,
// and a path that leads out of every mount is refused); that resolution is only where to
// look. The file is then opened beneath its mount's real directory following no link at all
// (beneath.go): a symlink found on the way now is an entry swapped since the resolution, and
// the access is tried anew, then refused as changed. The access is judged on the path it was
// opened at, which is where the file opened was at that instant, and on the file opened
// (fstat: a regular file, nothing that could block or is not data). A read reads the
// descriptor opened; a write writes a new file beside the target, beneath the same directory
// descriptor, and renames it over the target, which replaces the entry itself and never
// writes through it.
//
// Why follow a mount's symlinks at all, rather than refuse every path with one: a workspace
// holds links of its own (docs/README -> ../README, links between mounts), and reading
// through them is what a program expects. Following them is safe once the following only
// chooses the path and the open that is judged follows none.
//
// The policy decides whether an access runs (its effects: read or write, plus secret,
// outside or protected by the class of the path opened; run unasked only within the auto
// set, so a secret never); the reply names the sandbox path of the file really read or
// written. Every refusal is an *FSError with a stable code, and its message names sandbox
// paths only. Every request, whatever became of it, is one FSRecord (Config.Record).

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
	FSChanged    = "changed"        // an entry of the path was swapped for a symlink meanwhile
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

// Class is the error's class: a path not there, a request that cannot be carried out as
// written (a bad body, an edit that does not fit the file), a file changed since it was
// read, the host's own failure, else the policy's refusal.
func (e *FSError) Class() errdefs.Class {
	switch e.Reason {
	case FSNotFound:
		return errdefs.NotFound
	case FSBadRequest, FSNoMatch, FSManyMatches, FSNoChange, FSBinary:
		return errdefs.InvalidArgument
	case FSChangedSince:
		return errdefs.Conflict
	case FSFailed:
		return errdefs.Internal
	}
	return errdefs.PermissionDenied
}

// Is makes errors.Is(err, &FSError{Reason: r}) match any FSError with reason r.
func (e *FSError) Is(target error) bool {
	t, ok := target.(*FSError)
	return ok && t.Reason == e.Reason && t.Op == "" && t.Sandbox == ""
}

// FSOp is one file access as the guard sees it.
type FSOp struct {
	Write bool // a write; else a read
	// Request names a read that is not fs.read: fs.stat, fs.list, fs.glob, fs.grep; "":
	// fs.read or fs.write.
	Request string
	Sandbox string // the sandbox path asked for
	// Host is the host path the file was opened at (beneath its mount, no symlink
	// followed): for a write, its directory was opened and Host names the entry in it.
	Host string
}

// FSGuard decides whether an access runs: nil runs it, an error refuses it (an *FSError's
// code reaches the agent, any other error is FSNotAllowed). The default is the policy
// (PolicyGuard). It is called with the file already opened, never before.
type FSGuard func(ctx context.Context, op FSOp) error

// FSAnswer is how a person's answer to an access came back on the approval route.
type FSAnswer struct {
	Run      bool
	Code     string // when not run: denied, unanswered, gateway_refused, cancelled
	Question string // the question's id
	Outcome  string // approved, denied, gateway, unanswered, cancelled: who decided, for the audit
	At, By   string // the session and the client that answered
}

// FSAsk puts an access that the auto set does not grant to a person (the session's approval
// route). Nil: nobody is asked, the access is refused as unanswered.
type FSAsk func(ctx context.Context, op FSOp, effects policy.Effects) FSAnswer

// FSRecord is what became of one file access, for the audit: every request makes exactly
// one, whether it ran or was refused, and by whom.
type FSRecord struct {
	Op      FSOp           // Host is "" when nothing was opened (refused before)
	Effects policy.Effects // as the policy judged them; none when not judged by it
	// DecidedBy says whose verdict the record is: auto (the auto set), approved, denied,
	// gateway, unanswered, cancelled (the approval route), guard (Config.Guard), path_map
	// (the path map: outside, escapes, loop, invalid, read_only) or host (the request, or
	// what the host found at the path: not_found, not_file, changed, failed…, even after a
	// yes).
	DecidedBy string
	Question  string // the question's id, when one was asked
	At, By    string // the session and the client that answered it
	Outcome   string // run or refused
	Code      string // the refusal's code, as the agent got it
}

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
	// HostEnv is the host's own environment: its locations are guarded whatever Env says
	// (see policy.Context.HostEnv).
	HostEnv [][]string
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
	// Record receives one record per request, as it ends; nil keeps none.
	Record func(FSRecord)

	pctx *policy.Context // the policy's facts, when Guard is nil
	auto policy.AutoSet
}

// DefaultMaxRead is the largest file fs.read returns by default.
const DefaultMaxRead = 16 << 20

// FSHandlers returns the fs.read and fs.write handlers, to put in Config.Handlers.
func FSHandlers(c FSConfig) map[string]Handler {
	if c.MaxRead <= 0 {
		c.MaxRead = DefaultMaxRead
	}
	if c.Guard == nil {
		c.auto = policy.DefaultAutoSet()
		if c.Auto != nil {
			c.auto = *c.Auto
		}
		c.pctx = &policy.Context{Cwd: "/", Env: c.Env, HostEnv: c.HostEnv, Home: c.Home, Roots: c.Roots, Settings: c.Settings, Ephemeral: c.Ephemeral, Own: c.Own}
		if m := c.PathMap; m != nil {
			// The sandbox's PATH entries are protected where they are on the host.
			c.pctx.ToHost = func(p string) (string, bool) {
				h, err := m.ToHost(p)
				return h, err == nil
			}
		}
	}
	if c.PathMap == nil {
		c.PathMap = pathmap.Identity()
	}
	return map[string]Handler{
		TypeFSRead:  c.read,
		TypeFSWrite: c.write,
		TypeFSStat:  c.stat,
		TypeFSList:  c.list,
		TypeFSGlob:  c.glob,
		TypeFSGrep:  c.grep,
		TypeFSEdit:  c.edit,
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

// access is one request on its way to its record.
type access struct {
	op        FSOp
	effects   policy.Effects
	decidedBy string
	answer    FSAnswer
	ran       bool // the verdict was to run it
}

func (a *access) name() string {
	switch {
	case a.op.Request != "":
		return strings.TrimPrefix(a.op.Request, "fs.")
	case a.op.Write:
		return "write"
	}
	return "read"
}

// command is how an access reads in a question, a refusal and a record: fs.read <path>.
func (op FSOp) command() string {
	switch {
	case op.Request != "":
		return op.Request + " " + op.Sandbox
	case op.Write:
		return "fs.write " + op.Sandbox
	}
	return "fs.read " + op.Sandbox
}

func (a *access) refuse(reason, detail string) *FSError {
	return &FSError{Op: a.name(), Sandbox: a.op.Sandbox, Reason: reason, Detail: detail}
}

// record ends an access with its one record.
func (c *FSConfig) record(a *access, err error) {
	if c.Record == nil {
		return
	}
	r := FSRecord{Op: a.op, Effects: a.effects, DecidedBy: a.decidedBy, Question: a.answer.Question,
		At: a.answer.At, By: a.answer.By, Outcome: "run"}
	if err != nil {
		r.Outcome, r.Code = "refused", FSFailed
		var cd Coded
		if errors.As(err, &cd) {
			r.Code = cd.Code()
		}
		if a.ran || r.DecidedBy == "" {
			r.DecidedBy = "host"
		}
	}
	c.Record(r)
}

// tries is how many times an access is located and opened anew when an entry of its path
// turns out swapped for a symlink since it was resolved, before it is refused as changed.
const tries = 4

// spot is a file access's place on the host, opened: the directory holding the file,
// beneath its mount's real directory, and the file's name in it.
type spot struct {
	loc  pathmap.Location
	host string // the path opened at, loc.Host()
	dir  int    // the directory holding the file (O_PATH); -1 when it is missing
	name string // the file's name in dir; "" for the mount's directory itself
}

func (p *spot) close() {
	if p.dir >= 0 {
		unix.Close(p.dir)
		p.dir = -1
	}
}

// locate maps the access's sandbox path to its location and opens the directory that
// holds it, beneath the mount's real directory, following no link (errLinked: an entry was
// swapped for one since the path was resolved).
func (c *FSConfig) locate(a *access) (*spot, error) {
	if a.op.Sandbox == "" {
		return nil, a.refuse(FSBadRequest, "no path named")
	}
	loc, err := c.PathMap.Locate(a.op.Sandbox)
	if err != nil {
		var r *pathmap.Refusal
		if errors.As(err, &r) {
			a.decidedBy = "path_map"
			return nil, a.refuse(r.Code, r.Error())
		}
		return nil, a.refuse(FSFailed, bareErr(err))
	}
	p := &spot{loc: loc, host: loc.Host(), dir: -1}
	if loc.Rel == "." {
		return p, nil // the mount's directory itself
	}
	parent, name := path.Split(loc.Rel)
	p.name = name
	root, err := openRoot(loc.Root)
	if missing(err) {
		return p, nil
	}
	if err != nil {
		return nil, err
	}
	defer unix.Close(root)
	dir, err := openDir(root, path.Clean("./"+parent))
	switch {
	case missing(err):
		return p, nil
	case err != nil:
		return nil, err
	}
	p.dir = dir
	return p, nil
}

// missing reports an open that failed for a component that does not exist or is no
// directory.
func missing(err error) bool { return errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) }

// open locates an access and probes its file (openRead or lstat), again when an entry turns
// out swapped for a symlink; it fills a.op.Host with the path opened at.
func (c *FSConfig) open(a *access, probe func(*spot) error) (*spot, error) {
	for try := 1; ; try++ {
		p, err := c.locate(a)
		if err == nil {
			err = probe(p)
			if err != nil && !isFound(err) {
				p.close()
			}
		}
		switch {
		case errors.Is(err, errLinked) && try < tries:
			continue
		case errors.Is(err, errLinked):
			return nil, a.refuse(FSChanged, "an entry of the path was replaced by a symlink while it was opened")
		case err != nil && !isFound(err):
			var fe *FSError
			if errors.As(err, &fe) {
				return nil, fe
			}
			return nil, a.refuse(FSFailed, bareErr(err))
		}
		a.op.Host = p.host
		return p, err
	}
}

// found is what an access found at its place that refuses it, once it is judged (so that
// a path's kind and existence are told only to an access that may be run).
type found struct {
	code, detail string
}

func (f *found) Error() string { return f.code + ": " + f.detail }

func isFound(err error) bool {
	var f *found
	return errors.As(err, &f)
}

// kindOf is what a stat says an entry is, as the refusal it earns (nil for a regular file;
// errLinked for a symlink).
func kindOf(st *unix.Stat_t) error {
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFREG:
		return nil
	case unix.S_IFDIR:
		return &found{FSIsDir, "a directory"}
	case unix.S_IFLNK:
		return errLinked
	}
	return &found{FSNotFile, "not a regular file"}
}

func (c *FSConfig) read(ctx context.Context, req HostRequest) (_ any, err error) {
	a := &access{}
	defer func() { c.record(a, err) }()
	var body FSReadRequest
	if err := req.Decode(&body); err != nil {
		return nil, err
	}
	a.op.Sandbox = body.Path
	var f *os.File
	var size int64
	p, err := c.open(a, func(p *spot) error {
		var err error
		f, size, err = openRead(p)
		return err
	})
	if p == nil {
		return nil, err
	}
	defer p.close()
	if f != nil {
		defer f.Close()
	}
	if err := c.judge(ctx, a); err != nil {
		return nil, err
	}
	var fd *found
	if errors.As(err, &fd) {
		return nil, a.refuse(fd.code, fd.detail)
	}
	if size > c.MaxRead {
		return nil, a.refuse(FSTooLarge, fmt.Sprintf("%d bytes, over the limit of %d", size, c.MaxRead))
	}
	b, err := io.ReadAll(io.LimitReader(f, c.MaxRead+1))
	if err != nil {
		return nil, a.refuse(FSFailed, bareErr(err))
	}
	if int64(len(b)) > c.MaxRead {
		return nil, a.refuse(FSTooLarge, fmt.Sprintf("over the limit of %d bytes", c.MaxRead))
	}
	r := &FSReply{Path: c.replyPath(p.host, body.Path), Size: int64(len(b))}
	if utf8.Valid(b) {
		r.Content = string(b)
	} else {
		r.Content, r.Encoding = base64.StdEncoding.EncodeToString(b), "base64"
	}
	return r, nil
}

// openRead opens an access's file for reading: never through a link (O_NOFOLLOW beneath the
// directory opened), never blocking (O_NONBLOCK: a FIFO without a writer opens at once), never
// as a controlling terminal; then what was opened must be a regular file (fstat). A *found
// error says what refuses the read.
func openRead(p *spot) (*os.File, int64, error) {
	switch {
	case p.name == "":
		return nil, 0, &found{FSIsDir, "a directory"}
	case p.dir < 0:
		return nil, 0, &found{FSNotFound, "no such file"}
	}
	fd, err := unix.Openat(p.dir, p.name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		switch st, serr := lstatAt(p.dir, p.name); {
		case errors.Is(err, unix.ELOOP):
			return nil, 0, errLinked
		case errors.Is(err, unix.ENOENT):
			return nil, 0, &found{FSNotFound, "no such file"}
		case serr == nil && kindOf(&st) != nil:
			// A socket (ENXIO), a device where devices are not opened (EACCES)…
			return nil, 0, kindOf(&st)
		}
		return nil, 0, err
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return nil, 0, err
	}
	if err := kindOf(&st); err != nil {
		unix.Close(fd)
		return nil, 0, err
	}
	return os.NewFile(uintptr(fd), p.name), st.Size, nil
}

func (c *FSConfig) write(ctx context.Context, req HostRequest) (_ any, err error) {
	a := &access{op: FSOp{Write: true}}
	defer func() { c.record(a, err) }()
	var body FSWriteRequest
	if err := req.Decode(&body); err != nil {
		return nil, err
	}
	a.op.Sandbox = body.Path
	var data []byte
	switch body.Encoding {
	case "", "utf-8":
		data = []byte(body.Content)
	case "base64":
		b, err := base64.StdEncoding.DecodeString(body.Content)
		if err != nil {
			return nil, a.refuse(FSBadRequest, "the content is not base64")
		}
		data = b
	default:
		return nil, a.refuse(FSBadRequest, fmt.Sprintf("unknown encoding %q (utf-8 or base64)", body.Encoding))
	}
	var old *unix.Stat_t
	p, err := c.open(a, func(p *spot) error {
		var err error
		old, err = probeWrite(p)
		return err
	})
	if p == nil {
		return nil, err
	}
	defer p.close()
	if p.loc.ReadOnly {
		a.decidedBy = "path_map"
		return nil, a.refuse(FSReadOnly, "the mount is read-only")
	}
	if err := c.judge(ctx, a); err != nil {
		return nil, err
	}
	var fd *found
	if errors.As(err, &fd) {
		return nil, a.refuse(fd.code, fd.detail)
	}
	var swapped *found
	switch err := replace(p.dir, p.name, data, old); {
	case errors.Is(err, errLinked):
		return nil, a.refuse(FSChanged, "the file was replaced by a symlink while it was written")
	case errors.As(err, &swapped):
		return nil, a.refuse(swapped.code, swapped.detail+" (put in place while it was written)")
	case err != nil:
		return nil, a.refuse(FSFailed, bareErr(err))
	}
	return &FSReply{Path: c.replyPath(p.host, body.Path), Size: int64(len(data))}, nil
}

// probeWrite looks at the entry a write would replace, not following it: nil when there is
// none, its stat when it is a regular file; a *found error refuses the write.
func probeWrite(p *spot) (*unix.Stat_t, error) {
	switch {
	case p.name == "":
		return nil, &found{FSIsDir, "a directory"}
	case p.dir < 0:
		return nil, &found{FSNoParent, "the parent directory does not exist"}
	}
	st, err := lstatAt(p.dir, p.name)
	switch {
	case errors.Is(err, unix.ENOENT):
		return nil, nil
	case err != nil:
		return nil, err
	}
	if err := kindOf(&st); err != nil {
		return nil, err
	}
	return &st, nil
}

// replace writes data over the entry name in dir, atomically: a new file beside it, beneath
// the same directory descriptor (O_EXCL: never one that was there), written and synced, then
// renamed over name. A new file's mode is 0644 less the umask: a write makes no program. A
// replaced file keeps its owner (where the host may give it) and its permission bits, never
// setuid, setgid or sticky. Before the rename the name must still be a regular file or
// absent: the entry judged, not a directory, a FIFO or a symlink swapped in meanwhile. A
// swap after that check is harmless: renameat replaces the entry itself, a symlink as a
// symlink, and never writes through it.
func replace(dir int, name string, data []byte, old *unix.Stat_t) (err error) {
	var rnd [8]byte
	_, _ = rand.Read(rnd[:])
	tmp := ".paddock-" + hex.EncodeToString(rnd[:]) + ".tmp"
	fd, err := unix.Openat(dir, tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o644)
	if err != nil {
		return err
	}
	f := os.NewFile(uintptr(fd), tmp)
	renamed := false
	defer func() {
		f.Close()
		if !renamed {
			unix.Unlinkat(dir, tmp, 0)
		}
	}()
	if old != nil {
		if int(old.Uid) != os.Geteuid() || int(old.Gid) != os.Getegid() {
			// Only root may give a file away; elsewhere the file becomes the host user's.
			_ = unix.Fchown(fd, int(old.Uid), int(old.Gid))
		}
		if err := unix.Fchmod(fd, old.Mode&0o777); err != nil {
			return err
		}
	}
	if _, err := f.Write(data); err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return err
	}
	switch st, err := lstatAt(dir, name); {
	case errors.Is(err, unix.ENOENT):
	case err != nil:
		return err
	default:
		if err := kindOf(&st); err != nil {
			return err
		}
	}
	// The temporary name must still hold the file written: the sandbox renames in this
	// directory too.
	var mine unix.Stat_t
	if err := unix.Fstat(fd, &mine); err != nil {
		return err
	}
	if st, err := lstatAt(dir, tmp); err != nil || st.Dev != mine.Dev || st.Ino != mine.Ino {
		return errLinked
	}
	if err := unix.Renameat(dir, tmp, dir, name); err != nil {
		return err
	}
	// The directory is not synced: the rename is atomic either way, so after a crash the
	// name holds the old content or the new, each whole, and a sync of the directory would
	// double the cost of every write.
	renamed = true
	return nil
}

// replyPath returns the reply's sandbox path of a real host path: where the file really is,
// as the sandbox sees it; the asked path when the map cannot say (a host path seen twice).
func (c *FSConfig) replyPath(host, asked string) string {
	if sb, err := c.PathMap.ToSandbox(host); err == nil {
		return sb
	}
	return asked
}

// judge decides an access on the path it was opened at: by the guard when one is set, else
// by the policy. It fills in the access's verdict for its record.
func (c *FSConfig) judge(ctx context.Context, a *access) error {
	var err error
	if c.Guard != nil {
		a.decidedBy = "guard"
		err = c.Guard(ctx, a.op)
	} else {
		err = judgePolicy(ctx, c.pctx, c.auto, c.Ask, a)
	}
	if err == nil {
		a.ran = true
		return nil
	}
	var fe *FSError
	if errors.As(err, &fe) {
		fe.Op, fe.Sandbox = a.name(), a.op.Sandbox
		return fe
	}
	return a.refuse(FSNotAllowed, err.Error())
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
	var errno unix.Errno
	if errors.As(err, &errno) {
		return errno.Error()
	}
	return "the host could not carry it out"
}

// PolicyGuard decides accesses by the policy: an access has the effects of reading or
// writing the path it was opened at (FSEffects); it runs unasked only when the auto set holds
// every one, else it runs only on ask's yes. A secret is never in an auto set, so a secret is
// never read or written unasked.
func PolicyGuard(pctx *policy.Context, auto policy.AutoSet, ask FSAsk) FSGuard {
	return func(ctx context.Context, op FSOp) error {
		return judgePolicy(ctx, pctx, auto, ask, &access{op: op})
	}
}

// judgePolicy is PolicyGuard's decision, told into a.
func judgePolicy(ctx context.Context, pctx *policy.Context, auto policy.AutoSet, ask FSAsk, a *access) error {
	e := FSEffects(pctx, a.op)
	a.effects = e
	if auto.Decide(e) == policy.Run {
		a.decidedBy = "auto"
		return nil
	}
	ans := FSAnswer{Code: "unanswered", Outcome: "unanswered"}
	if ask != nil {
		ans = ask(ctx, a.op, e)
	}
	a.decidedBy, a.answer = ans.Outcome, ans
	if ans.Run {
		return nil
	}
	return &FSError{Reason: FSNeedsYes, Detail: RefusalText("file access", a.op.command(), ans.Code, "") + fmt.Sprintf(" (its effects: %s)", e)}
}

// FSEffects are the effects of one file access, judged on the host path it was opened at
// (policy.AccessEffects, which takes that path as real and does not resolve it again): read
// or write, secret for a path that is or holds a secret, and for a write outside or
// protected by the path's class.
func FSEffects(pctx *policy.Context, op FSOp) policy.Effects {
	return policy.AccessEffects(pctx, op.Host, op.Write)
}
