// Package daemon is Paddock's daemon: it serves sessions over HTTP/JSON on a unix socket in
// a private directory, to peers of its own uid only, with an event stream per session,
// metrics and an OpenAPI document of its routes (package api).
package daemon

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/paddockhq/paddock/config"
	"github.com/paddockhq/paddock/daemon/api"
	"github.com/paddockhq/paddock/errdefs"
	"github.com/paddockhq/paddock/internal/version"
	"github.com/paddockhq/paddock/orchestrator"
	"github.com/paddockhq/paddock/session"
	"github.com/paddockhq/paddock/transport"
	"github.com/paddockhq/paddock/workspace"
)

// Opened is what a session's opener returns: the orchestrator's configuration (transport,
// kernel, environment, path map, handlers, policy, budget) and what to tell the client.
type Opened struct {
	Config          orchestrator.Config
	Transport       string        // the transport's kind
	NoOutputTimeout time.Duration // 0: none
	Warnings        []string
	// Finish, when set, is run once the session and its children have closed: it hands a
	// workspace copied to a box back (its report is the session's hand-back) and frees what
	// the transport holds (an engine client).
	Finish func(context.Context) (*workspace.Report, error)
	// Resume is what a daemon that takes the session up after this one died opens it with
	// (Where.Resume); "" when nothing is needed.
	Resume string
}

// Where is what of the daemon's state a session's opener may use.
type Where struct {
	// ListenIn is a private directory (0700) of the daemon's where a pooled session's warm
	// kernels listen, so that the session outlives the daemon (session.Options.ListenIn).
	// The daemon removes what no session it took up again listens in.
	ListenIn string
	// Resume, for a session taken up again after the daemon that opened it died, is its
	// first opening's Opened.Resume: the opener takes the session up where it worked.
	Resume string
}

// Config configures a Server.
type Config struct {
	// Open turns a request into a session's configuration (the settings, the transport).
	Open func(ctx context.Context, req api.OpenRequest, at Where) (Opened, error)
	// StateDir holds every session's files (0700 directories, 0600 files).
	StateDir string
	// Recover is asked about each session a previous daemon left open: it cleans up what
	// the session's sandbox left (its containers) and says why the session ended. nil: the
	// sessions are listed as ended with a general reason.
	Recover func(ctx context.Context, s api.Session, left session.Left) (reason string)
	// Settings says what settings a session opened with a request would have; nil: the
	// daemon cannot say (/v1/settings answers 501).
	Settings func(ctx context.Context, req api.OpenRequest) (api.Settings, error)
	// Version is reported by /v1/health; "": the binary's module version.
	Version string
	// Socket is the unix socket the daemon serves (Run). Like its state directory, it is
	// kept from every session: a step that reaches either asks.
	Socket string
	// Drain closes every session when Run stops; false leaves them for the next daemon on
	// the state directory (Leave).
	Drain bool
	// Log receives diagnostics; nil discards them.
	Log *slog.Logger
}

// Server serves the API.
type Server struct {
	cfg     Config
	log     *slog.Logger
	metrics *metrics
	start   time.Time
	mux     *http.ServeMux

	life context.Context // ends at Close: the lifetime of the server's goroutines
	stop context.CancelFunc
	wg   sync.WaitGroup

	lock *os.File // the state directory's lock, held until Close or Leave

	// ready is closed once clients can attach (Serve, Handler): the jobs of the sessions
	// taken up at the start wait for it, so that what they ask again finds its clients.
	ready     chan struct{}
	readyOnce sync.Once

	mu       sync.Mutex
	sessions map[string]*entry // guarded by mu
	closing  bool              // guarded by mu
}

// entry is one session the daemon holds.
type entry struct {
	s    *orchestrator.Session // nil when ended
	cfg  orchestrator.Config
	hub  *hub
	dir  string // the session's state directory
	noOT time.Duration
	// finish hands back a copied workspace and frees the transport's resources after Close
	// (root sessions only: children share their root's transport).
	finish func(context.Context) (*workspace.Report, error)

	calls atomic.Int64

	isScripted bool // a scripted child's record

	// req, resume and kernel, for a session whose kernel listens (a container's), let a new
	// daemon reopen it after this one died.
	req    *api.OpenRequest
	resume string
	spawn  *api.SpawnRequest // a child's
	// kernel is where the session's kernel listens (Session, Listen, Key: what Reattach
	// takes); its Key is "" when it does not listen. Refreshed from the session at save.
	kernel transport.Spec // guarded by mu
	// scripted are the children the session's scripts started, kept for a new daemon (see
	// keeper): each an entry used only for its state file.
	scripted map[string]*entry // guarded by mu

	mu        sync.Mutex
	info      api.Session            // guarded by mu
	states    map[string]storedJob   // guarded by mu: where each detached job is
	past      map[string]api.Job     // guarded by mu: jobs that ended before this daemon took the session up
	gone      bool                   // guarded by mu: its state directory is removed (see life.go)
	children  []string               // guarded by mu
	artifacts map[string]string      // guarded by mu: job id -> artifact file
	shells    map[string]*namedShell // guarded by mu: the named shells calls continue (BashRequest.Shell)
}

// New makes a server and lists again the sessions its state directory records: the ones
// it cannot take up again are listed as ended, with the reason.
func New(cfg Config) (*Server, error) {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.StateDir == "" {
		return nil, errors.New("daemon: no state directory")
	}
	if cfg.Version == "" {
		cfg.Version = version.Module()
	}
	// The state directory is held to the socket directory's rule: made 0700, and used only
	// when it is the daemon's own with no group or other write.
	if err := PrepareDir(cfg.StateDir); err != nil {
		return nil, fmt.Errorf("daemon: state directory: %w", err)
	}
	// Nothing in the directory is touched before its lock is held.
	lock, err := lockState(cfg.StateDir)
	if err != nil {
		return nil, err
	}
	for _, d := range []string{"sessions", listenIn} {
		if err := os.MkdirAll(filepath.Join(cfg.StateDir, d), 0o700); err != nil {
			lock.Close()
			return nil, fmt.Errorf("daemon: state directory: %w", err)
		}
	}
	s := &Server{cfg: cfg, log: cfg.Log, metrics: newMetrics(), start: time.Now(), sessions: map[string]*entry{}, lock: lock,
		ready: make(chan struct{})}
	s.life, s.stop = context.WithCancel(context.Background())
	s.recover()
	s.routes()
	return s, nil
}

// Handler returns the API's handler. Whoever takes it serves it: from then clients can attach.
func (s *Server) Handler() http.Handler {
	s.markReady()
	return s.mux
}

// markReady lets the jobs taken up at the start go on: clients can attach now.
func (s *Server) markReady() { s.readyOnce.Do(func() { close(s.ready) }) }

// Serve serves the API on l until Close. l already listens: a client that connects now is
// served as soon as Serve accepts, so the jobs taken up at the start go on from here.
func (s *Server) Serve(l net.Listener) error {
	s.markReady()
	hs := &http.Server{Handler: s.mux, BaseContext: func(net.Listener) context.Context { return s.life },
		ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-s.life.Done()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		hs.Shutdown(ctx)
	}()
	err := hs.Serve(l)
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// Leave stops serving and leaves every session as a killed daemon would: kernels that
// listen (a container's) go on running with their jobs, every state file stays, and the
// next daemon on the state directory takes them up. It is how a daemon stops when it is
// told to (SIGTERM, Ctrl-C); Close is how a person ends the sessions on purpose.
func (s *Server) Leave() {
	s.mu.Lock()
	s.closing = true
	s.mu.Unlock()
	s.stop()
	s.wg.Wait()
	s.lock.Close()
}

// Close closes every session (their state files go with them) and stops serving.
func (s *Server) Close() error {
	s.mu.Lock()
	s.closing = true
	var roots []string
	for id, e := range s.sessions {
		if e.info.Parent == "" {
			roots = append(roots, id)
		}
	}
	s.mu.Unlock()
	var errs []error
	for _, id := range roots {
		if _, err := s.closeSession(id); err != nil {
			errs = append(errs, err)
		}
	}
	s.stop()
	s.wg.Wait()
	s.lock.Close()
	return errors.Join(errs...)
}

func newID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func (s *Server) sessionDir(id string) string {
	return filepath.Join(s.cfg.StateDir, "sessions", id)
}

// live publishes a session's output as it comes.
func (e *entry) live(step, fd int, data []byte) {
	e.hub.publish(api.Event{Kind: api.EventOutput, Output: &api.Output{Step: step, FD: fd, Data: string(data)}})
}

// keeper keeps a root session's scripted children in state files of their own (the
// directory a child's kernel listens in is beside its file), so that a new daemon takes
// them up under the reopened session, to be collected as before.
type keeper struct {
	s      *Server
	e      atomic.Pointer[entry] // the session, once made
	listen bool                  // the session's kernel listens; else only Collected acts
}

// replaced saves the session's state once a new kernel replaced one that ended: it may
// listen elsewhere (a pool's warm kernel).
func (k *keeper) replaced() {
	if e := k.e.Load(); e != nil {
		if err := e.save(); err != nil {
			k.s.log.Warn("session state file", "session", e.info.ID, "error", err)
		}
	}
}

func (k *keeper) Prepare(cc *orchestrator.ChildConfig) error {
	if !k.listen {
		return nil
	}
	cc.ID = newID()
	dir := k.s.sessionDir(cc.ID)
	if err := os.Mkdir(dir, 0o700); err != nil {
		return err
	}
	cc.Listen, cc.Key = filepath.Join(dir, listenDir), newID()+newID()
	return nil
}

func (k *keeper) Started(c *orchestrator.Session, cc orchestrator.ChildConfig, script string, j *orchestrator.Job) {
	parent := k.e.Load()
	if parent == nil || !k.listen {
		return
	}
	mode := cc.Workspace
	if mode == "" {
		mode = orchestrator.Shared
	}
	parent.mu.Lock()
	info := parent.info
	parent.mu.Unlock()
	rec := &entry{dir: k.s.sessionDir(c.ID()), kernel: c.Listening(), isScripted: true,
		spawn: &api.SpawnRequest{Name: cc.Name, Workspace: cc.Workspace, Env: cc.Env, Script: script}}
	rec.info = api.Session{ID: c.ID(), State: api.Open, Workspace: c.Workspace(), Cwd: c.Cwd(), Transport: info.Transport,
		Parent: info.ID, Name: cc.Name, Mode: mode, Created: time.Now().UTC(), Clone: c.CloneReport().API(),
		Jobs: []api.Job{{ID: j.ID(), Script: script}}}
	parent.mu.Lock()
	if parent.scripted == nil {
		parent.scripted = map[string]*entry{}
	}
	parent.scripted[c.ID()] = rec
	parent.mu.Unlock()
	if err := rec.save(); err != nil {
		k.s.log.Warn("scripted child's state file", "child", c.ID(), "error", err)
	}
	k.s.persist(rec, j)
}

func (k *keeper) Ended(rep orchestrator.Collected) {
	k.s.dropClean(rep.Handback.API())
	parent := k.e.Load()
	if parent == nil {
		return
	}
	parent.mu.Lock()
	rec := parent.scripted[rep.Child]
	delete(parent.scripted, rep.Child)
	parent.mu.Unlock()
	if rec != nil {
		k.s.forget(rec)
	}
}

// open opens a root session, or (parent set) spawns a child.
func (s *Server) open(ctx context.Context, req api.OpenRequest) (*entry, error) {
	if req.Workspace == "" {
		return nil, &orchestrator.WorkdirError{Reason: "none"}
	}
	if !filepath.IsAbs(req.Workspace) {
		// The daemon's own directory is not the client's: never resolve against it.
		return nil, &badRequest{msg: fmt.Sprintf("workspace %q: an absolute path is needed", req.Workspace)}
	}
	o, err := s.opened(ctx, req, s.where())
	if err != nil {
		return nil, err
	}
	id := newID()
	dir := s.sessionDir(id)
	if err := os.Mkdir(dir, 0o700); err != nil {
		if o.Finish != nil {
			o.Finish(ctx)
		}
		return nil, err
	}
	cfg := o.Config
	cfg.ID = id
	cfg.StateDir = dir
	cfg.NoOutputTimeout = o.NoOutputTimeout
	cfg.ChildDirs = filepath.Join(s.cfg.StateDir, handbacks)
	cfg.Log = s.log
	cfg.Egress = s.egress(cfg.Egress)
	var stored *api.OpenRequest
	kp := &keeper{s: s}
	cfg.Keeper = kp
	cfg.Replaced = kp.replaced
	if _, ok := cfg.Transport.(transport.Reattacher); ok {
		// The kernel listens, and outlives this daemon: a new one reopens the session.
		cfg.Listen, cfg.Key = filepath.Join(dir, listenDir), newID()+newID()
		kp.listen = true
		stored = &req
	}
	sess, err := orchestrator.Open(ctx, cfg)
	if err != nil {
		os.RemoveAll(dir)
		if o.Finish != nil {
			o.Finish(ctx)
		}
		return nil, err
	}
	e := &entry{s: sess, cfg: cfg, hub: newHub(id), dir: dir, noOT: o.NoOutputTimeout, finish: o.Finish,
		req: stored, resume: o.Resume, kernel: sess.Listening(), artifacts: map[string]string{}}
	if e.kernel.Key == "" {
		e.req = nil // its kernel does not listen after all (a container user that cannot): it ends with this daemon
	}
	kp.e.Store(e)
	e.info = api.Session{ID: id, State: api.Open, Workspace: sess.Workspace(), Cwd: sess.Cwd(), Transport: o.Transport,
		Created: time.Now().UTC(), BlockingBudget: cfg.Budget.String(), Warnings: o.Warnings}
	if o.NoOutputTimeout > 0 {
		e.info.NoOutputTimeout = o.NoOutputTimeout.String()
	}
	return e, s.register(e)
}

// register adds an opened session; it is closed again when the server is closing.
func (s *Server) register(e *entry) error {
	s.hubMetrics(e.hub)
	if err := e.save(); err != nil {
		e.close()
		os.RemoveAll(e.dir)
		return err
	}
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		e.close()
		os.RemoveAll(e.dir)
		return errors.New("daemon: shutting down")
	}
	s.sessions[e.info.ID] = e
	s.mu.Unlock()
	s.metrics.add(func(m *metrics) { m.open++; m.opened++ })
	return nil
}

func (s *Server) hubMetrics(h *hub) {
	h.onQuestion = func() { s.metrics.add(func(m *metrics) { m.questions++ }) }
	h.onSettled = func(o string) { s.metrics.add(func(m *metrics) { m.answers[o]++ }) }
}

// spawn spawns a child of a session.
func (s *Server) spawn(ctx context.Context, parent *entry, req api.SpawnRequest) (*entry, error) {
	if parent.s == nil {
		return nil, &stateError{ID: parent.info.ID}
	}
	t0 := time.Now()
	id := newID()
	dir := s.sessionDir(id)
	if err := os.Mkdir(dir, 0o700); err != nil {
		return nil, err
	}
	cc := orchestrator.ChildConfig{Name: req.Name, Workspace: req.Workspace, Env: req.Env, ID: id}
	var spawn *api.SpawnRequest
	parent.mu.Lock()
	listens := parent.kernel.Key != ""
	parent.mu.Unlock()
	if listens {
		// The parent's kernel listens; so does the child's, and a new daemon takes it up.
		cc.Listen, cc.Key = filepath.Join(dir, listenDir), newID()+newID()
		spawn = &req
	}
	child, err := parent.s.Spawn(ctx, cc)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	if req.Workspace == orchestrator.Isolated {
		s.metrics.add(func(m *metrics) { m.clone.observe(time.Since(t0)) })
	}
	mode := req.Workspace
	if mode == "" {
		mode = orchestrator.Shared
	}
	parent.mu.Lock()
	info := parent.info
	parent.mu.Unlock()
	e := &entry{s: child, cfg: parent.cfg, hub: newHub(id), dir: dir, noOT: parent.noOT, artifacts: map[string]string{},
		spawn: spawn, kernel: child.Listening()}
	e.info = api.Session{ID: id, State: api.Open, Workspace: child.Workspace(), Cwd: child.Cwd(), Transport: info.Transport,
		Parent: parent.info.ID, Name: req.Name, Mode: mode, Created: time.Now().UTC(),
		BlockingBudget: info.BlockingBudget, NoOutputTimeout: info.NoOutputTimeout, Clone: child.CloneReport().API()}
	if err := s.register(e); err != nil {
		return nil, err
	}
	parent.mu.Lock()
	parent.children = append(parent.children, id)
	parent.info.Children = slices.Clone(parent.children)
	parent.mu.Unlock()
	parent.save()
	return e, nil
}

// get returns a session.
func (s *Server) get(id string) (*entry, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e := s.sessions[id]; e != nil {
		return e, nil
	}
	return nil, &orchestrator.NotFoundError{What: "session", ID: id}
}

// describe returns a session's description, with its jobs.
func (s *Server) describe(e *entry) api.Session {
	e.mu.Lock()
	info := e.info
	info.Children = slices.Clone(e.children)
	arts := e.artifacts
	e.mu.Unlock()
	if e.s != nil {
		info.Spawned = orchestrator.SpawnedAPI(e.s.SpawnedChildren())
		info.Jobs = nil
		e.mu.Lock()
		for _, j := range e.past {
			info.Jobs = append(info.Jobs, j)
		}
		e.mu.Unlock()
		for _, j := range e.s.Jobs() {
			info.Jobs = append(info.Jobs, describeJob(j, arts))
		}
		sort.Slice(info.Jobs, func(a, b int) bool { return jobLess(info.Jobs[a].ID, info.Jobs[b].ID) })
	}
	return info
}

// jobLess orders job ids by their number.
func jobLess(a, b string) bool {
	if len(a) != len(b) {
		return len(a) < len(b)
	}
	return a < b
}

func describeJob(j *orchestrator.Job, arts map[string]string) api.Job {
	out := api.Job{ID: j.ID(), Script: j.Script(), Result: j.Result().API()}
	out.Saved = out.Result.Saved
	select {
	case <-j.Done():
		out.Done = true
	default:
	}
	if arts != nil {
		out.Artifact = arts[j.ID()]
	}
	return out
}

// closeSession closes a session and its children (theirs first: an isolated child's
// workspace is handed back before its parent closes), removes its state, and returns its
// last description.
func (s *Server) closeSession(id string) (api.Session, error) {
	e, err := s.get(id)
	if err != nil {
		return api.Session{}, err
	}
	e.mu.Lock()
	kids := slices.Clone(e.children)
	e.mu.Unlock()
	var errs []error
	for _, k := range kids {
		if _, err := s.closeSession(k); err != nil && !isNotFound(err) {
			errs = append(errs, err)
		}
	}
	s.mu.Lock()
	if s.sessions[id] != e {
		s.mu.Unlock()
		return api.Session{}, &orchestrator.NotFoundError{What: "session", ID: id}
	}
	delete(s.sessions, id)
	s.mu.Unlock()
	info := s.describe(e)
	if e.s != nil {
		t0 := time.Now()
		synced, err := e.close()
		var hbe *session.HandbackError
		switch {
		case errors.As(err, &hbe):
			info.HandbackError = hbe.Error()
		case err != nil:
			errs = append(errs, err)
		}
		e.mu.Lock()
		scripted := e.scripted
		e.scripted = nil
		e.mu.Unlock()
		for _, k := range scripted {
			s.forget(k) // closed with their parent, and handed back
		}
		if info.Mode == orchestrator.Isolated {
			s.metrics.add(func(m *metrics) { m.handback.observe(time.Since(t0)) })
		}
		info.Handback = e.s.Handback().API()
		if info.Handback == nil {
			info.Handback = synced.API()
		}
		s.metrics.add(func(m *metrics) { m.open--; m.closed++ })
	}
	s.dropClean(info.Handback)
	e.hub.close()
	e.mu.Lock()
	e.move(entryClose) // one that ended stays ended in its last description
	info.State = e.info.State
	e.move(entryRemove)
	at := e.kernel
	e.mu.Unlock()
	if err := os.RemoveAll(e.dir); err != nil {
		errs = append(errs, err)
	}
	s.dropListen(at.Listen)
	if info.Parent != "" {
		if p, err := s.get(info.Parent); err == nil {
			p.mu.Lock()
			p.children = slices.DeleteFunc(p.children, func(c string) bool { return c == id })
			p.info.Children = slices.Clone(p.children)
			p.mu.Unlock()
			p.save()
		}
	}
	return info, errors.Join(errs...)
}

// detached reports whether a job id is a call that went on past its budget.
func (e *entry) detached(id string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	_, ok := e.artifacts[id]
	return ok
}

// close closes the session, then finishes its transport: a workspace copied to a box is
// handed back (the report), what the transport holds is freed.
func (e *entry) close() (*workspace.Report, error) {
	err := e.s.Close()
	if e.finish == nil {
		return nil, err
	}
	rep, ferr := e.finish(context.Background())
	return rep, errors.Join(err, ferr)
}

func isNotFound(err error) bool {
	var nf *orchestrator.NotFoundError
	return errors.As(err, &nf)
}

// stateError is a request that needs an open session, made to an ended one.
type stateError struct{ ID string }

func (e *stateError) Error() string { return fmt.Sprintf("session %s has ended", e.ID) }

// Code is the stable code of the error.
func (e *stateError) Code() string { return "session_ended" }

// Class is the error's class.
func (e *stateError) Class() errdefs.Class { return errdefs.Conflict }

// bash runs a call, keeping its whole output in an artifact file while it runs: the file
// stays when the call detached or its output was cut, and goes otherwise.
func (s *Server) bash(ctx context.Context, e *entry, req api.BashRequest) (_ *orchestrator.Result, artifact, cwd string, _ error) {
	if e.s == nil {
		return nil, "", "", &stateError{ID: e.info.ID}
	}
	budget := e.cfg.Budget // 0: the call blocks to its end
	if req.Budget != "" {
		d, err := config.ParseDuration(req.Budget)
		if err != nil {
			return nil, "", "", &badRequest{msg: "budget: " + err.Error()}
		}
		budget = max(d, 0)
	}
	n := e.calls.Add(1)
	art := filepath.Join(e.dir, fmt.Sprintf("call-%d.out", n))
	call := orchestrator.Call{Script: req.Script, Artifact: art, Live: e.live}
	if req.Shell != "" {
		sh, err := e.shell(req.Shell)
		if err != nil {
			return nil, "", "", err
		}
		call.Shell = sh
		defer func() {
			if cwd = sh.Cwd(); cwd == "" {
				cwd = e.s.Cwd()
			}
		}()
	}
	t0 := time.Now()
	defer func() { s.metrics.add(func(m *metrics) { m.callSeconds.observe(time.Since(t0)) }) }()
	j, err := e.s.StartJob(call)
	if err != nil {
		os.Remove(art)
		return nil, "", "", err
	}
	var timeout <-chan time.Time
	if budget > 0 {
		t := time.NewTimer(budget)
		defer t.Stop()
		timeout = t.C
	}
	select {
	case <-j.Done():
	case <-ctx.Done():
		j.Kill()
		<-j.Done()
		e.s.ForgetJobs(e.detached)
		os.Remove(art)
		return nil, "", "", ctx.Err()
	case <-timeout:
	}
	res := j.Result()
	if res.End.Kind != "" { // ended in time (or while its snapshot was taken)
		// A call that ended within its budget is no job: only detached calls are kept.
		e.s.ForgetJobs(e.detached)
		s.countSteps(res)
		if !dropped(res) {
			os.Remove(art)
			art = ""
		}
		return res, art, "", nil
	}
	res.End = orchestrator.End{Kind: orchestrator.Detached, Job: j.ID()}
	e.mu.Lock()
	e.artifacts[j.ID()] = art
	e.info.Jobs = append(e.info.Jobs, api.Job{ID: j.ID(), Script: j.Script(), Artifact: art})
	e.mu.Unlock()
	e.save() // a daemon killed now still lists the job, and its output so far
	s.persist(e, j)
	s.metrics.add(func(m *metrics) { m.detached++ })
	s.wg.Add(1)
	go s.watchJob(e, j, art)
	return res, art, "", nil
}

// Bounds of a session's named shells: how many it keeps (past it the one used least
// recently is forgotten: its next call starts afresh) and a name's length.
const (
	maxShells    = 64
	maxShellName = 128
)

// namedShell is a shell and when it was last used.
type namedShell struct {
	sh   *orchestrator.Shell
	used int64 // the session's call count at its last use
}

// shell is the session's shell of that name, made at its first call.
func (e *entry) shell(name string) (*orchestrator.Shell, error) {
	if len(name) > maxShellName {
		return nil, &badRequest{msg: fmt.Sprintf("shell: a name of more than %d bytes", maxShellName)}
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	now := e.calls.Load()
	if ns := e.shells[name]; ns != nil {
		ns.used = now
		return ns.sh, nil
	}
	if e.shells == nil {
		e.shells = map[string]*namedShell{}
	}
	if len(e.shells) >= maxShells {
		oldest := ""
		for n, ns := range e.shells {
			if oldest == "" || ns.used < e.shells[oldest].used {
				oldest = n
			}
		}
		delete(e.shells, oldest)
	}
	ns := &namedShell{sh: &orchestrator.Shell{}, used: now}
	e.shells[name] = ns
	return ns.sh, nil
}

// dropped reports whether any step's output was cut.
func dropped(r *orchestrator.Result) bool {
	for _, st := range r.Steps {
		if st.Stdout.DroppedBytes > 0 || st.Stderr.DroppedBytes > 0 {
			return true
		}
	}
	return false
}

func (s *Server) countSteps(r *orchestrator.Result) {
	s.metrics.add(func(m *metrics) {
		m.steps["ran"] += int64(len(r.Steps))
		if r.End.Kind == orchestrator.Refused {
			m.steps[r.End.Code]++
		}
	})
}

// watchJob waits for a detached job's end and tells the stream.
func (s *Server) watchJob(e *entry, j *orchestrator.Job, art string) {
	defer s.wg.Done()
	select {
	case <-j.Done():
	case <-s.life.Done():
		return
	}
	res := j.Result()
	e.mu.Lock()
	for i := range e.info.Jobs {
		if e.info.Jobs[i].ID == j.ID() {
			e.info.Jobs[i].Done, e.info.Jobs[i].Result, e.info.Jobs[i].Saved = true, res.API(), res.Saved.API()
		}
	}
	e.mu.Unlock()
	e.save()
	s.countSteps(res)
	s.metrics.add(func(m *metrics) { m.jobs[res.End.Kind]++ })
	e.hub.publish(api.Event{Kind: api.EventJobEnd, Job: &api.Job{ID: j.ID(), Script: j.Script(), Done: true, Artifact: art, Result: res.API(), Saved: res.Saved.API()}})
}

// ParseDuration is the daemon's reading of a duration setting (config.ParseDuration): "30s",
// "5m", a bare number of seconds, "-1" for no limit.
func ParseDuration(v string) (time.Duration, error) { return config.ParseDuration(v) }

// BadRequest is the error of a request that cannot be carried out as written (answered 400,
// code bad_request): an opener's answer to a wrong setting, say.
func BadRequest(msg string) error { return &badRequest{msg: msg} }

// badRequest is a request the API cannot read.
type badRequest struct{ msg string }

func (e *badRequest) Error() string        { return e.msg }
func (e *badRequest) Code() string         { return "bad_request" }
func (e *badRequest) Class() errdefs.Class { return errdefs.InvalidArgument }

// Log returns the server's logger.
func (s *Server) Log() *slog.Logger { return s.log }
