package session

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"

	"github.com/paddockhq/paddock/daemon/api"
	"github.com/paddockhq/paddock/transport"
	"github.com/paddockhq/paddock/transport/pathmap"
	"github.com/paddockhq/paddock/workspace"
)

// A Provider is one kind of transport: how a session's kernel is started there, taken up or
// cleaned up after a host that died, and checked by `paddock doctor`. Each registers once
// (Register, from its file's init).
type Provider interface {
	// Kind names the transport, as the settings' kernelTransport.kind and every front end
	// do: docker, containerd, wrapped, ssh, local.
	Kind() string
	// Options are the transport options (Transport.Given's names: the CLI's flags, which
	// a daemon's request sets by the same names) it applies; an option no provider lists
	// applies to every kind.
	Options() []string
	// Open starts nothing yet: it makes the transport a session's kernel starts on, and
	// what the session needs of it (kernel binary, environment, path map).
	Open(ctx context.Context, r *Request) (*Opened, error)
	// Recover cleans up after a session a host that died left open and that could not be
	// taken up again (its containers, its kernel on a box), and says what it found; "" when
	// the kind leaves nothing behind.
	Recover(ctx context.Context, l Left) string
	// Reap removes what host processes that died left running (their containers); it
	// returns how many were removed. A kind that leaves nothing behind returns 0, nil.
	Reap(ctx context.Context) (int, error)
	// Check reports whether this machine can run the kind, and what to fix when not; the
	// zero Check when there is nothing to check.
	Check(ctx context.Context) Check
}

// Check is one line of a doctor's report.
type Check struct {
	Name   string `json:"name"`
	OK     bool   `json:"ok"`
	Detail string `json:"detail"`
	Fix    string `json:"fix,omitempty"`
}

// String is the check as `paddock doctor` prints it: ok or fix, its name and what was found,
// then the fix on a line of its own when there is one.
func (c Check) String() string {
	mark := "ok "
	if !c.OK {
		mark = "fix"
	}
	s := fmt.Sprintf("%s  %-10s %s\n", mark, c.Name, c.Detail)
	if c.Fix != "" {
		s += fmt.Sprintf("     %-10s %s\n", "", c.Fix)
	}
	return s
}

// Request is what a provider opens a transport for.
type Request struct {
	Options
	// Environ is the host's environment the sandbox's is chosen from.
	Environ []string
	// docker is the engine client found when the kind was chosen by trying it, for the
	// docker provider to take over.
	docker any
}

// Opened is a provider's transport for a session, and what the session needs of it.
type Opened struct {
	Transport transport.Transport
	Kernel    string       // the kernel binary's host path
	Env       []string     // the sandbox's environment, NAME=value
	PathMap   *pathmap.Map // nil: the sandbox sees the host's paths
	// Ephemeral: the sandbox is a fresh container, removed at its end.
	Ephemeral bool
	// Workspace, when set, is where the session works in place of the options' (a copy).
	Workspace string
	// Pools says the transport can keep warm sandboxes (Settings' kernelTransport.docker.pool).
	Pools bool
	// ListenOnce says the transport's kernels should listen for this host only
	// (orchestrator.Config.ListenOnce): a socket bound into the sandbox carries the frames
	// faster than the engine relays standard streams.
	ListenOnce bool
	// Notices are what to tell the user: variables left out, a missing sftp subsystem.
	Notices []string
	// Close, when set, is run once the session has closed: it hands a copied workspace back
	// (its report) and frees what the transport holds.
	Close func(ctx context.Context) (*workspace.Report, error)
	// Resume, when set, is what the provider takes the session up by after its host died
	// (Options.Resume): a synced workspace's local directory.
	Resume string
	// Egress is how the sandbox can reach the host's proxy: EgressSandbox, EgressLoopback,
	// EgressConnection, or "" when its network is its own and nothing carries the proxy
	// there.
	Egress string
	// EgressListen, with EgressConnection, listens where the sandbox's programs reach the
	// host's proxy (the box's loopback, forwarded back over the connection).
	EgressListen func(ctx context.Context) (net.Listener, error)
}

var (
	mu        sync.RWMutex
	providers = map[string]Provider{}
)

// Register makes a provider known by its kind. Registering a kind twice panics.
func Register(p Provider) {
	mu.Lock()
	defer mu.Unlock()
	if _, ok := providers[p.Kind()]; ok {
		panic("session: provider registered twice: " + p.Kind())
	}
	providers[p.Kind()] = p
}

// Lookup is the provider of a kind.
func Lookup(kind string) (Provider, bool) {
	mu.RLock()
	defer mu.RUnlock()
	p, ok := providers[kind]
	return p, ok
}

// Kinds are the kinds registered, sorted.
func Kinds() []string {
	mu.RLock()
	defer mu.RUnlock()
	var ks []string
	for k := range providers {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

// Providers are the providers registered, by kind.
func Providers() []Provider {
	var ps []Provider
	for _, k := range Kinds() {
		p, _ := Lookup(k)
		ps = append(ps, p)
	}
	return ps
}

// Left is what a session a host that died left, for its provider to clean up.
type Left struct {
	Session string // its id
	// Request is what opened it, a daemon's request; nil when not known.
	Request *api.OpenRequest
	// Kernel is where its kernel listens (transport.Reattacher's Spec); zero when it did
	// not.
	Kernel transport.Spec
}

// Recover asks the provider of kind to clean up after a session a host that died left.
func Recover(ctx context.Context, kind string, l Left) string {
	p, ok := Lookup(kind)
	if !ok {
		return ""
	}
	return p.Recover(ctx, l)
}

// applies reports whether an option applies to a kind, and the kinds it applies to.
func applies(option, kind string) (bool, []string) {
	var kinds []string
	for _, p := range Providers() {
		if slices.Contains(p.Options(), option) {
			kinds = append(kinds, p.Kind())
		}
	}
	return len(kinds) == 0 || slices.Contains(kinds, kind), kinds
}

// notApplied says why a kind applies no confinement option, for the ones that do not.
type notApplied interface{ NotApplied() string }

// refused is the error for the options given that the kind does not apply; nil when each
// applies. An option given for a kind it does not apply to is refused rather than ignored:
// a memory limit on the local transport would otherwise read as a limit that does not exist.
func refused(kind string, given []string) error {
	var bad []string
	for _, o := range slices.Sorted(slices.Values(given)) {
		if ok, kinds := applies(o, kind); !ok {
			bad = append(bad, fmt.Sprintf("--%s (%s only)", o, strings.Join(kinds, ", ")))
		}
	}
	if len(bad) == 0 {
		return nil
	}
	msg := fmt.Sprintf("the %s transport does not apply %s", kind, strings.Join(bad, ", "))
	if p, ok := Lookup(kind); ok {
		if n, ok := p.(notApplied); ok {
			msg += ": " + n.NotApplied()
		}
	}
	return &OptionError{Msg: msg}
}
