package session

import (
	"context"
	"fmt"
	"net"

	"github.com/paddockhq/paddock/egress"
	"github.com/paddockhq/paddock/orchestrator"
)

// Egress paths: how a provider's sandbox can reach the host's proxy (Opened.Egress).
const (
	// EgressSandbox: the sandbox has no network of its own; the kernel carries its
	// connections to the proxy through a directory the transport binds in.
	EgressSandbox = "sandbox"
	// EgressLoopback: the kernel reaches the host's loopback itself (local, wrapped): the
	// proxy listens there and the variables point at it, advisory, since nothing keeps a
	// program from dialling out directly.
	EgressLoopback = "loopback"
	// EgressConnection: the sandbox's network is its own (an ssh box's); with network.egress
	// proxy (--egress-via-host) the host's proxy is offered to it through the connection
	// (Opened.EgressListen), advisory as on loopback.
	EgressConnection = "connection"
)

// Egress modes (network.egress).
const (
	EgressAuto  = "auto"  // the proxy where the sandbox has no network of its own
	EgressProxy = "proxy" // also on loopback and through an ssh connection, advisory
	EgressOff   = "off"   // no proxy: a sandbox without a network reaches nothing
)

// egressFor decides a session's egress from the mode, the provider's path ("": the sandbox's
// network is its own, an ssh box's or a container's with a network) and the lists; notice is
// what to tell the user when the lists cannot apply.
func egressFor(kind, mode, path string, listen func(context.Context) (net.Listener, error), allow, deny []string) (*orchestrator.Egress, string, error) {
	switch mode {
	case "", EgressAuto, EgressProxy, EgressOff:
	default:
		return nil, "", &OptionError{Msg: fmt.Sprintf("network.egress: %q is not auto, proxy or off", mode)}
	}
	a, err := egress.ParseRules(allow)
	if err != nil {
		return nil, "", &OptionError{Msg: "network.allow: " + err.Error(), Err: err}
	}
	d, err := egress.ParseRules(deny)
	if err != nil {
		return nil, "", &OptionError{Msg: "network.deny: " + err.Error(), Err: err}
	}
	listed := len(a) > 0
	// One set of bounds for the session and every child it spawns.
	lim := egress.NewLimits(0, 0, 0)
	switch {
	case mode == EgressOff:
		if listed {
			return nil, "network.egress is off: network.allow and --allow-net do not apply", nil
		}
		return nil, "", nil
	case path == EgressSandbox:
		return &orchestrator.Egress{Allow: a, Deny: d, Limits: lim}, "", nil
	case path == EgressLoopback && mode == EgressProxy:
		return &orchestrator.Egress{Allow: a, Deny: d, Loopback: true, Limits: lim}, fmt.Sprintf(
			"the %s kernel reaches the network itself: its steps are given the proxy's variables, which a program may ignore", kind), nil
	case path == EgressConnection && mode == EgressProxy && listen != nil:
		return &orchestrator.Egress{Allow: a, Deny: d, Listen: listen, Limits: lim}, fmt.Sprintf(
			"the %s box's network is its own: its steps are given the host's proxy through the connection, which a program may ignore", kind), nil
	case path == EgressConnection:
		if listed {
			return nil, fmt.Sprintf("the %s box's network is its own: --allow-net and network.allow apply only with --egress-via-host (network.egress proxy), and then only to programs that use the proxy variables", kind), nil
		}
		return nil, "", nil
	case path == EgressLoopback:
		if listed {
			return nil, fmt.Sprintf("the %s kernel reaches the network itself: --allow-net and network.allow apply only with network.egress proxy (or --egress proxy), and then only to programs that use the proxy variables", kind), nil
		}
		return nil, "", nil
	}
	if listed {
		return nil, fmt.Sprintf("the %s sandbox's network is its own: --allow-net and network.allow do not apply to it", kind), nil
	}
	return nil, "", nil
}
