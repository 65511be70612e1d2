package orchestrator

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/paddockhq/paddock/egress"
	"github.com/paddockhq/paddock/policy"
	"github.com/paddockhq/paddock/transport"
	"github.com/paddockhq/paddock/transport/wire"
)

// Egress says how a session's sandbox reaches the network: through a proxy on the host that
// judges every connection (egress.Proxy).
type Egress struct {
	// Allow and Deny are the trusted lists: network.allow with --allow-net, network.deny.
	Allow, Deny []egress.Rule
	// Loopback: the proxy listens on the host's loopback, which the kernel's programs reach
	// themselves (a local or wrapped kernel): the proxy variables are then advisory, since
	// nothing keeps a program from dialling out directly. Else the sandbox has no network of
	// its own: the proxy listens in a directory bound into it (transport.Spec.Egress) and
	// the kernel carries each connection to egress.SandboxAddr there.
	Loopback bool
	// Listen, when set, makes the listener the proxy serves where the sandbox's programs
	// reach it (an ssh box's loopback, forwarded back over the connection); like Loopback,
	// the sandbox's network is its own, the variables advisory, and every request must
	// carry the session's token.
	Listen func(ctx context.Context) (net.Listener, error)
	// Dir is where the directories bound into sandboxes are made; "": the system's
	// temporary directory.
	Dir string
	// Limits, when set, are the bounds the proxies of the session and its children hold
	// together (a child's config shares its parent's); nil: each proxy its own.
	Limits *egress.Limits
	// Resolver and Dial, when set, replace the host's resolver and dialer (tests).
	Resolver egress.Resolver
	Dial     func(ctx context.Context, network, address string) (net.Conn, error)
	// Record, when set, receives every connection's record besides the audit.
	Record func(session string, r egress.Record)
}

// Sandboxed says whether the sandbox has no network of its own: the kernel carries its
// connections to the proxy.
func (e *Egress) Sandboxed() bool { return !e.Loopback && e.Listen == nil }

// egressState is a session's proxy and where it listens.
type egressState struct {
	proxy *egress.Proxy
	token string
	url   string   // what the sandbox's variables say
	env   []string // the variables, for each step's environment (stepEnv)

	mu      sync.Mutex
	parent  string                  // guarded by mu: the private directory the session's bound directories are made in
	listens map[string]net.Listener // guarded by mu: by host directory ("" for loopback)
	made    []string                // guarded by mu: directories this session made, removed at its end
	wg      sync.WaitGroup          // the Serve goroutines
}

// openEgress makes the session's proxy, and on loopback (or where Listen says) starts
// listening: the sandbox's variables are known before its kernel starts.
func (s *Session) openEgress(ctx context.Context) error {
	e := s.cfg.Egress
	if e == nil {
		return nil
	}
	st := &egressState{listens: map[string]net.Listener{}}
	if e.Loopback || e.Listen != nil {
		// Other programs of the host reach its loopback: the proxy serves only requests
		// that carry the session's token. A sandbox's own loopback is its alone, and its
		// variables stay the same for a kernel taken up by a new host.
		var b [16]byte
		_, _ = rand.Read(b[:])
		st.token = hex.EncodeToString(b[:])
	}
	st.proxy = egress.New(egress.Config{
		Allow: e.Allow, Deny: e.Deny, Token: st.token,
		Ask: s.askConnect, Resolver: e.Resolver, Dial: e.Dial, Limits: e.Limits,
		Record: s.recordConnect, Log: s.log.With("part", "egress"),
	})
	s.egress = st
	addr := egress.SandboxAddr
	if e.Loopback || e.Listen != nil {
		listen := e.Listen
		if listen == nil {
			listen = func(context.Context) (net.Listener, error) { return net.Listen("tcp", "127.0.0.1:0") }
		}
		l, err := listen(ctx)
		if err != nil {
			return fmt.Errorf("egress: %w", err)
		}
		st.serve("", l)
		addr = l.Addr().String()
	}
	st.url = egress.URL(addr, st.token)
	st.env = egress.Env(st.url)
	return nil
}

// stepEnv is the environment a step runs with: the session's, and the proxy's variables.
// The variables go with each exec, never into the kernel's own environment: a kernel's
// command line on an ssh box is visible to the box's other users, and the URL may carry the
// session's token.
func (s *Session) stepEnv() []string {
	if s.egress == nil {
		return s.cfg.Env
	}
	return mergeEnv(s.cfg.Env, s.egress.env)
}

func (st *egressState) serve(dir string, l net.Listener) {
	st.listens[dir] = l
	st.wg.Go(func() { st.proxy.Serve(l) })
}

// egressSpec sets the directory a new kernel's sandbox binds for the proxy (Spec.Egress).
func (s *Session) egressSpec(spec *transport.Spec) error {
	st := s.egress
	if st == nil || !s.cfg.Egress.Sandboxed() {
		return nil
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	if spec.Listen != "" {
		// Beside the directory the kernel listens in, where a new host that takes the
		// session up finds it again.
		dir := transport.EgressBeside(spec.Listen)
		if err := os.Mkdir(dir, 0o755); err != nil && !os.IsExist(err) {
			return fmt.Errorf("egress: %w", err)
		}
		st.made = append(st.made, dir)
		spec.Egress = dir
		return nil
	}
	if st.parent == "" {
		// Not the session's state directory: a child's is deep in its parent's, and a unix
		// socket's path holds at most 107 bytes.
		base := s.cfg.Egress.Dir
		if base == "" {
			base = os.TempDir()
		}
		// The parent is private: no other user of the host reaches the socket through it.
		p, err := os.MkdirTemp(base, "paddock-egress-")
		if err != nil {
			return fmt.Errorf("egress: %w", err)
		}
		st.parent = p
	}
	dir := filepath.Join(st.parent, spec.Session)
	if err := os.Mkdir(dir, 0o755); err != nil && !os.IsExist(err) {
		return fmt.Errorf("egress: %w", err)
	}
	spec.Egress = dir
	return nil
}

// startEgress has a new kernel carry its sandbox's connections to the proxy: the proxy
// listens in the directory the sandbox binds (the kernel's own when it says one, a pool's),
// and the kernel forwards egress.SandboxAddr to it.
func (s *Session) startEgress(ctx context.Context, c *conn, spec transport.Spec) error {
	st := s.egress
	if st == nil || !s.cfg.Egress.Sandboxed() {
		return nil
	}
	dir := spec.Egress
	if e, ok := c.k.(transport.Egressed); ok && e.EgressDir() != "" {
		dir = e.EgressDir()
	} else if dir == "" && spec.Listen != "" {
		dir = transport.EgressBeside(spec.Listen) // a kernel taken up again
	}
	if dir == "" {
		return fmt.Errorf("egress: the %T transport binds no directory for the proxy", s.cfg.Transport)
	}
	st.mu.Lock()
	if _, ok := st.listens[dir]; !ok {
		l, err := listenIn(dir, transport.EgressSocket, 0o666)
		if err != nil {
			st.mu.Unlock()
			return fmt.Errorf("egress: %w", err)
		}
		st.serve(dir, l)
	}
	st.mu.Unlock()
	_, err := c.request(ctx, wire.TypeEgress, wire.Egress{Socket: transport.EgressDir + "/" + transport.EgressSocket, Listen: egress.SandboxAddr}, nil)
	if err != nil {
		return fmt.Errorf("egress: the kernel did not forward %s: %w", egress.SandboxAddr, err)
	}
	return nil
}

// listenIn listens on a unix socket name in dir (an earlier one's file replaced), made
// connectable with mode: the sandbox's user may not be the host's. Both go through a
// descriptor of the directory opened following no link, and the mode is set on the socket
// opened the same way: the path's length is no matter (a socket's address holds 107
// bytes), and neither a link put in the directory's place nor one where the socket is moves
// either. (The directory is bound read-only into the sandbox, but a workspace that held
// Paddock's state would let it reach the directory another way.)
func listenIn(dir, name string, mode os.FileMode) (net.Listener, error) {
	dfd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: dir, Err: err}
	}
	defer unix.Close(dfd)
	at := fmt.Sprintf("/proc/self/fd/%d/%s", dfd, name)
	unix.Unlinkat(dfd, name, 0) // an earlier kernel's
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: at, Net: "unix"})
	if err != nil {
		return nil, err
	}
	l.SetUnlinkOnClose(false) // the name it was bound by means nothing once dfd is closed
	if err := chmodAt(dfd, name, mode); err != nil {
		l.Close()
		return nil, err
	}
	return l, nil
}

// chmodAt sets the mode of the socket name in the directory dfd: opened with
// O_PATH|O_NOFOLLOW, it must be a socket (not a link put in its place), and the mode is set
// on that file.
func chmodAt(dfd int, name string, mode os.FileMode) error {
	fd, err := unix.Openat(dfd, name, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return &os.PathError{Op: "open", Path: name, Err: err}
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return &os.PathError{Op: "fstat", Path: name, Err: err}
	}
	if st.Mode&unix.S_IFMT != unix.S_IFSOCK {
		return fmt.Errorf("%s is not the proxy's socket", name)
	}
	// An O_PATH descriptor takes no fchmod; its /proc link names the very file.
	return os.Chmod(fmt.Sprintf("/proc/self/fd/%d", fd), mode)
}

// closeEgress closes the proxy and every connection through it, and removes what it made.
func (s *Session) closeEgress() {
	st := s.egress
	if st == nil {
		return
	}
	st.proxy.Close()
	st.wg.Wait()
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.parent != "" {
		os.RemoveAll(st.parent)
	}
	for _, d := range st.made {
		os.RemoveAll(d)
	}
}

// EgressURL is the proxy URL the session's steps are given; "" without egress.
func (s *Session) EgressURL() string {
	if s.egress == nil {
		return ""
	}
	return s.egress.url
}

// EgressOpen is how many connections are open through the session's proxy.
func (s *Session) EgressOpen() int64 {
	if s.egress == nil {
		return 0
	}
	return s.egress.proxy.Open()
}

// askConnect puts a connection no list names to the approval route, with effect net: the
// target, and the steps the session is running (one of them opened it).
func (s *Session) askConnect(ctx context.Context, t egress.Target) egress.Answer {
	var running []string
	s.running.Range(func(_, script any) bool {
		running = append(running, script.(string))
		return true
	})
	slices.Sort(running)
	cmd := "connect " + t.String()
	if len(running) > 0 {
		cmd += " (from: " + strings.Join(running, "; ") + ")"
	}
	q := Question{ID: newQuestionID(), Session: s.id, Step: -1, Command: policy.Quote([]string{cmd}), Effects: policy.Net, Connect: t.String()}
	if s.parent != nil {
		q.Subagent = s.name
	}
	r := s.route(ctx, q, policy.Net)
	a := egress.Answer{Run: r.Run, ForSession: r.Answer.ForSession, Code: r.Code, Outcome: r.Outcome, Question: q.ID, At: r.At, By: r.By}
	if r.Outcome == "gateway" {
		// The gateway rule runs steps; a connection to a host nobody listed waits for a
		// person's yes, which a gateway never gives.
		a.Run, a.Code = false, "gateway_refused"
	}
	return a
}

// recordConnect keeps a connection's verdict in the session's audit, and hands it on.
func (s *Session) recordConnect(r egress.Record) {
	s.audit.record(auditRecord{Session: s.id, Subagent: s.name, Step: -1, Command: "connect " + r.Target, Host: r.Addr,
		Effects: policy.Net, Question: r.Question, DecidedBy: r.DecidedBy, At: r.At, By: r.By,
		Outcome: r.Verdict, Code: r.Code, Rule: r.Rule, Net: &r})
	if f := s.cfg.Egress.Record; f != nil {
		f(s.id, r)
	}
}
