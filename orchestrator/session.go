// Package orchestrator holds sessions: a session starts its kernel through a transport,
// admits everything the kernel sends through the frame gate, and runs an agent's shell
// scripts step by step, each step decided on the host before it runs.
package orchestrator

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/paddockhq/paddock/errdefs"
	"github.com/paddockhq/paddock/orchestrator/output"
	"github.com/paddockhq/paddock/transport"
	"github.com/paddockhq/paddock/transport/pathmap"
	"github.com/paddockhq/paddock/transport/wire"
)

// Config says how to open a session.
type Config struct {
	// ID names the session; "" makes a fresh one.
	ID string
	// Workspace is the host directory the session works in: its workspace root and the
	// working directory of its scripts. It must exist.
	Workspace string
	// Transport starts the kernel; Kernel is the host path of the kernel binary.
	Transport transport.Transport
	Kernel    string
	// Env is the sandbox's environment, NAME=value.
	Env []string
	// PathMap maps sandbox and host paths; nil is the identity (a local kernel).
	PathMap *pathmap.Map
	// Ephemeral says the sandbox is fresh and removed at the end (a new container): a path
	// under no mount belongs to it alone.
	Ephemeral bool
	// Limit bounds each step's output; the zero Limit keeps everything.
	Limit output.Limit
	// Handlers serve further host request types from programs in the sandbox. Each request
	// passes the session's gate first, judged with ExtensionEffects; a type the session
	// serves itself cannot be replaced (Open refuses it with a *HandlerError).
	Handlers map[string]Handler
	// Policy decides each step: its effects, the rules, the auto set, the approval route.
	Policy Policy
	// Gatekeeper, when set, decides each step in place of the auto set, the rules and the
	// approval route: the policy still gives the step its effects, and every verdict is
	// recorded in the audit as the policy's are. Host requests are not its to decide.
	Gatekeeper Gatekeeper
	// Budget is how long a call blocks before it settles detached and goes on as a job;
	// 0: calls block to their end.
	Budget time.Duration
	// NoOutputTimeout kills a call (a job, or a call that blocks to its end) that printed
	// nothing for this long; a question of the session waiting for an answer counts as
	// output, since the call waits with it. 0: never.
	NoOutputTimeout time.Duration
	// JobTimeout kills a call that has run this long, counted from its start (a job taken
	// up again by a new host keeps its start). 0: never.
	JobTimeout time.Duration
	// ArtifactBytes caps a call's artifact (Call.Artifact): past it the file keeps the first
	// and the last half of the cap and counts the bytes between as dropped. 0: no cap.
	ArtifactBytes int64
	// StateDir is where the session keeps its files (isolated children's clones); "": the
	// system's temporary directory.
	StateDir string
	// ChildDirs is where isolated children's clones are made; "": StateDir.
	ChildDirs string
	// MaxChildren bounds the children a session's sandbox has running at once through
	// session.spawn (not yet collected); 0: DefaultMaxChildren.
	MaxChildren int
	// MaxDepth bounds how deep a chain of sessions the sandboxes can spawn (a root session
	// is at depth 0); 0: DefaultMaxDepth.
	MaxDepth int
	// Keeper, when set, keeps the children the session's scripts start (a child's own
	// scripts' children are not kept).
	Keeper Keeper
	// Log receives diagnostics; nil discards them.
	Log *slog.Logger
	// Listen, when set, starts the kernel listening in this private host directory, with
	// Key, so that it outlives this host and a new one can Reopen the session (container
	// transports only; see transport.Spec).
	Listen string
	Key    string
	// ListenOnce, when Listen is not set and the transport can (a Reattacher), starts the
	// kernel listening in a private temporary directory for this host only: its frames go
	// over a socket rather than through the engine's relay of its standard streams, and it
	// ends with this host's connection as one on its standard streams would (no reattach).
	ListenOnce bool
	// Egress, when set, gives the sandbox a way out to the network through a proxy on the
	// host that judges each connection; nil: none (a sandbox without a network reaches
	// nothing).
	Egress *Egress
	// Replaced, when set, is called when a kernel has replaced one that ended: where the
	// session's kernel listens (Listening) may have changed.
	Replaced func()
	// Ready, for a session taken up again (Reopen, ReopenChild, ReopenRun), holds the jobs it
	// takes up until it is closed: until then no client can attach to answer what they ask
	// (a daemon closes it once it listens). nil: they go on at once.
	Ready <-chan struct{}
	// AttachGrace is how long, from Ready, a question that finds no client in its chain waits
	// for one to attach, as a restarted daemon's clients reconnect, before it is unanswered;
	// 0: DefaultAttachGrace.
	AttachGrace time.Duration

	parent *Session // set by Spawn
	name   string
	child  *child
}

// Session is one open session and its kernel.
type Session struct {
	cfg Config
	id  string
	log *slog.Logger
	cwd string // the sandbox path of the workspace
	// onceDir is the private directory the kernel listens in for this host only
	// (Config.ListenOnce); "" when it does not.
	onceDir string

	parent  *Session    // nil for a root session
	name    string      // a child's name, shown with its questions
	child   *child      // what a child keeps of its spawn
	clients clients     // attached clients and the questions shown to them
	gate    Gatekeeper  // decides each step
	pgate   *policyGate // the policy's gate: gate, or around the Gatekeeper the session was given
	audit   *auditLog   // every verdict: the steps' and the file accesses'

	jobs  jobs
	kids  children        // children started with scripts
	merge sync.Mutex      // one hand-back into this session's workspace at a time
	life  context.Context // ends when the session closes: the lifetime of its jobs
	end   context.CancelFunc
	wg    sync.WaitGroup // the jobs' goroutines

	questions atomic.Int32 // questions of the session (and gatekeepers' decisions) under way
	attachBy  atomic.Int64 // Unix nanoseconds: until then a question with no client waits for one

	mu    sync.Mutex
	c     *conn        // guarded by mu; replaced after a protocol fault
	state sessionState // guarded by mu (sessionLife)

	listening atomic.Pointer[transport.Spec] // where c's kernel listens (Listening)
	egress    *egressState                   // nil without Config.Egress
	running   sync.Map                       // *runner -> its script: the calls running now
}

// ErrClosed is the error of a request to a closed session.
var ErrClosed error = errdefs.New(errdefs.Conflict, "session_closed", "session closed")

// WorkdirError is a session's working directory that cannot be used.
type WorkdirError struct {
	Reason string // none, gone, not_dir
	Path   string
}

func (e *WorkdirError) Error() string {
	switch e.Reason {
	case "none":
		return "session: no working directory named"
	case "gone":
		return fmt.Sprintf("session: working directory %s does not exist", e.Path)
	default:
		return fmt.Sprintf("session: working directory %s is not a directory", e.Path)
	}
}

// Code is the stable code of the error.
func (e *WorkdirError) Code() string { return "cwd_" + e.Reason }

// Class is the error's class.
func (e *WorkdirError) Class() errdefs.Class { return errdefs.InvalidArgument }

// Open starts a session's kernel and waits until it answers.
func Open(ctx context.Context, cfg Config) (*Session, error) {
	s, err := newSession(ctx, cfg)
	if err != nil {
		return nil, err
	}
	c, err := s.start(ctx)
	if err != nil {
		s.move(sessionFailed)
		s.end()
		s.closeEgress()
		s.audit.close()
		s.removeOnce()
		return nil, err
	}
	s.setConn(c)
	s.move(sessionStarted)
	return s, nil
}

// setConn makes c the session's kernel. Called with mu held, or before the session is
// shared.
func (s *Session) setConn(c *conn) {
	s.c = c
	var at transport.Spec
	if r, ok := c.k.(transport.Relocated); ok {
		at = r.ListenSpec()
	}
	if r, ok := c.k.(transport.Resuming); ok && at.Listen == "" && s.cfg.Listen != "" && s.onceDir == "" {
		if _, ok := r.Resume(); ok {
			at = transport.Spec{Session: s.id, Listen: s.cfg.Listen, Key: s.cfg.Key}
		}
	}
	s.listening.Store(&at)
}

// Listening is where the session's kernel listens, for a new host to reattach to it
// (transport.Reattacher): its sandbox's session label, its directory and its key (a pool's
// warm kernel listens where it was started, not in Config.Listen). Zero when the kernel
// serves its standard streams and ends with this host.
func (s *Session) Listening() transport.Spec {
	if at := s.listening.Load(); at != nil {
		return *at
	}
	return transport.Spec{}
}

// newSession checks a session's configuration and makes it, without its kernel.
func newSession(ctx context.Context, cfg Config) (*Session, error) {
	if cfg.Workspace == "" {
		return nil, &WorkdirError{Reason: "none"}
	}
	if err := checkHandlers(cfg.Handlers); err != nil {
		return nil, err
	}
	ws, err := filepath.Abs(cfg.Workspace)
	if err != nil {
		return nil, err
	}
	switch fi, err := os.Stat(ws); {
	case errors.Is(err, os.ErrNotExist):
		return nil, &WorkdirError{Reason: "gone", Path: ws}
	case err != nil:
		return nil, err
	case !fi.IsDir():
		return nil, &WorkdirError{Reason: "not_dir", Path: ws}
	}
	cfg.Workspace = ws
	if cfg.ID == "" {
		var b [8]byte
		_, _ = rand.Read(b[:])
		cfg.ID = hex.EncodeToString(b[:])
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	cwd := ws
	if cfg.PathMap != nil {
		if cwd, err = cfg.PathMap.ToSandbox(ws); err != nil {
			return nil, fmt.Errorf("session: the workspace %s is under no mount of the sandbox: %w", ws, err)
		}
	}
	onceDir, err := listenOnce(&cfg)
	if err != nil {
		return nil, err
	}
	s := &Session{cfg: cfg, id: cfg.ID, log: cfg.Log.With("session", cfg.ID), cwd: cwd,
		parent: cfg.parent, name: cfg.name, child: cfg.child, state: sessionLife.Start, onceDir: onceDir}
	if s.audit, err = openAudit(auditFile(cfg), s.log); err != nil {
		s.removeOnce()
		return nil, err
	}
	if err := s.openEgress(ctx); err != nil {
		s.audit.close()
		s.removeOnce()
		return nil, err
	}
	s.life, s.end = context.WithCancel(context.Background())
	s.pgate = newPolicyGate(s, cfg.Policy)
	s.pgate.keeper = cfg.Gatekeeper
	s.gate = s.pgate
	return s, nil
}

// listenOnce gives cfg a private directory for its kernel to listen in for this host only
// (Config.ListenOnce), and returns it; "" when the kernel does not listen so.
func listenOnce(cfg *Config) (string, error) {
	if !cfg.ListenOnce || cfg.Listen != "" {
		return "", nil
	}
	if _, ok := cfg.Transport.(transport.Reattacher); !ok {
		return "", nil
	}
	sweepOnce()
	dir, err := os.MkdirTemp("", fmt.Sprintf("%s%d-", oncePrefix, os.Getpid())) // 0700
	if err != nil {
		return "", fmt.Errorf("session: %w", err)
	}
	var key [16]byte
	_, _ = rand.Read(key[:])
	cfg.Listen, cfg.Key = filepath.Join(dir, "kernel"), hex.EncodeToString(key[:])
	return dir, nil
}

// oncePrefix begins the name of a directory a kernel listens in for one host, followed by
// the host's pid and a dash. It is not the prefix of any other directory Paddock makes in a
// temporary directory (a kernel's own, paddock-kernel-NNN, is a live kernel's).
const oncePrefix = "paddock-once-"

// sweepOnce removes what hosts that died (killed before their close) left of the
// directories their kernels listened in for them: those of this user whose pid no longer
// runs. A pid reused since only keeps a directory longer.
func sweepOnce() {
	tmp := os.TempDir()
	dirs, _ := os.ReadDir(tmp)
	for _, d := range dirs {
		rest, ok := strings.CutPrefix(d.Name(), oncePrefix)
		if !ok || !d.IsDir() {
			continue
		}
		pidText, _, dash := strings.Cut(rest, "-")
		pid, err := strconv.Atoi(pidText)
		if !dash || err != nil || pid <= 0 {
			continue
		}
		fi, err := d.Info()
		if err != nil {
			continue
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); !ok || int(st.Uid) != os.Getuid() {
			continue
		}
		if syscall.Kill(pid, 0) == syscall.ESRCH {
			os.RemoveAll(filepath.Join(tmp, d.Name()))
		}
	}
}

// removeOnce removes the directory the kernel listened in for this host only.
func (s *Session) removeOnce() {
	if s.onceDir != "" {
		os.RemoveAll(s.onceDir)
	}
}

// ID returns the session's id.
func (s *Session) ID() string { return s.id }

// Workspace returns the host path of the session's workspace.
func (s *Session) Workspace() string { return s.cfg.Workspace }

// start starts a kernel and waits for its answer to ping.
func (s *Session) start(ctx context.Context) (*conn, error) {
	spec := transport.Spec{
		Session: s.id,
		Kernel:  s.cfg.Kernel,
		Env:     s.cfg.Env,
		Cwd:     s.cwd,
		PathMap: s.cfg.PathMap,
		Labels:  map[string]string{"paddock.session": s.id},
		Listen:  s.cfg.Listen,
		Key:     s.cfg.Key,
		Once:    s.onceDir != "",
	}
	if err := s.egressSpec(&spec); err != nil {
		return nil, fmt.Errorf("session %s: %w", s.id, err)
	}
	k, err := s.cfg.Transport.Start(ctx, spec)
	if err != nil && spec.Once && ctx.Err() == nil {
		// Listening is for speed only: an engine that cannot bind the directory (one that
		// does not see this host's temporary directory) or a kernel that cannot use it
		// gets a kernel on its standard streams.
		s.log.Warn("the kernel could not listen for this host: it serves its standard streams", "err", err)
		spec.Listen, spec.Key, spec.Once = "", "", false
		k, err = s.cfg.Transport.Start(ctx, spec)
	}
	if err != nil {
		return nil, fmt.Errorf("session %s: start kernel: %w", s.id, err)
	}
	c := startConn(ctx, k, s.handlers(), s.log, nil)
	if _, err := c.request(ctx, wire.TypePing, struct{}{}, nil); err != nil {
		c.close()
		return nil, fmt.Errorf("session %s: kernel did not answer: %w", s.id, err)
	}
	if err := s.startEgress(ctx, c, spec); err != nil {
		c.close()
		return nil, fmt.Errorf("session %s: %w", s.id, err)
	}
	return c, nil
}

// conn returns the live kernel, replacing one that ended in a protocol fault.
func (s *Session) conn(ctx context.Context) (*conn, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.state != sessionLive {
		return nil, ErrClosed
	}
	if s.c.alive() {
		return s.c, nil
	}
	if f := s.c.fault(); f != nil {
		s.log.Error("kernel replaced after a fault", "fault", f)
	} else {
		s.log.Error("kernel replaced after it ended")
	}
	s.c.close()
	c, err := s.start(ctx)
	if err != nil {
		return nil, err
	}
	s.setConn(c)
	if f := s.cfg.Replaced; f != nil {
		go f() // not under mu: it may ask the session where it listens now
	}
	return c, nil
}

// request sends one request to the kernel and decodes its reply into out.
func (s *Session) request(ctx context.Context, typ string, body, out any) error {
	c, err := s.conn(ctx)
	if err != nil {
		return err
	}
	raw, err := c.request(ctx, typ, body, nil)
	if err != nil {
		if pf := c.fault(); pf != nil {
			return fmt.Errorf("%s: %w", typ, pf)
		}
		return err
	}
	if out == nil {
		return nil
	}
	return json.Unmarshal(raw, out)
}

// Ping asks the kernel who it is.
func (s *Session) Ping(ctx context.Context) (wire.Hello, error) {
	var h wire.Hello
	err := s.request(ctx, wire.TypePing, struct{}{}, &h)
	return h, err
}

// Close ends the session's kernel and everything it started; then an isolated child's
// workspace is handed back to its parent (Handback has the report).
func (s *Session) Close() error {
	s.mu.Lock()
	if !s.move(sessionClose) { // closing or closed already
		s.mu.Unlock()
		return nil
	}
	c := s.c
	s.mu.Unlock()
	for _, j := range s.Jobs() {
		j.Kill()
	}
	s.kids.mu.Lock()
	kids := s.kids.all
	s.kids.mu.Unlock()
	for id, k := range kids {
		k.job.Kill()
		k.s.Close()
		if kp := s.cfg.Keeper; kp != nil {
			kp.Ended(Collected{Child: id, Name: k.s.name, Done: true, Result: k.job.Result(), Handback: k.s.Handback()})
		}
	}
	s.end()
	s.wg.Wait()
	err := c.close()
	s.closeEgress()
	s.audit.close()
	s.removeOnce()
	herr := s.handBack(context.Background())
	s.mu.Lock()
	s.move(sessionWoundDown)
	s.mu.Unlock()
	if herr != nil {
		return herr
	}
	return err
}

// Cwd returns the sandbox path of the session's workspace, where its steps start.
func (s *Session) Cwd() string { return s.cwd }
