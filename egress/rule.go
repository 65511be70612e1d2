// Package egress carries a sandbox's network connections out through the host, each one
// judged there: the allow and deny lists of the trusted settings, else a question on the
// session's approval route; never to a link-local, metadata, loopback or private address
// unless the allow list names that address. This file is the decision; proxy.go the proxy
// that gathers its facts and does what it says.
package egress

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"
)

// Rule is one entry of network.allow or network.deny: a host name (github.com), every name
// under a domain (*.golang.org, not golang.org itself), an address (10.0.0.5, ::1) or an
// address range (10.0.0.0/8), each with a port or, without one, every port.
type Rule struct {
	Name   string       // a host name, lower case, no trailing dot; "" for an address rule
	Suffix bool         // Name is a domain: the rule holds the names under it
	Prefix netip.Prefix // an address rule's addresses (one address: its full length)
	Port   uint16       // 0: every port
}

// String is the rule as an entry reads.
func (r Rule) String() string {
	var h string
	switch {
	case r.Name != "" && r.Suffix:
		h = "*." + r.Name
	case r.Name != "":
		h = r.Name
	case r.Prefix.IsSingleIP():
		h = r.Prefix.Addr().String()
		if r.Prefix.Addr().Is6() && r.Port != 0 {
			h = "[" + h + "]"
		}
	default:
		h = r.Prefix.String()
	}
	if r.Port != 0 {
		h += ":" + strconv.Itoa(int(r.Port))
	}
	return h
}

// ByAddress says whether the rule names addresses, not names.
func (r Rule) ByAddress() bool { return r.Name == "" }

// RuleError is an entry that is not a rule.
type RuleError struct {
	Entry  string
	Reason string
}

func (e *RuleError) Error() string { return fmt.Sprintf("network rule %q: %s", e.Entry, e.Reason) }

// Code is the error's stable code.
func (e *RuleError) Code() string { return "usage" }

// ParseRules reads entries as the settings and the --allow-net flag give them: each entry
// may be a comma-separated list, spaces around an item ignored.
func ParseRules(entries []string) ([]Rule, error) {
	var out []Rule
	for _, e := range entries {
		for item := range strings.SplitSeq(e, ",") {
			item = strings.TrimSpace(item)
			if item == "" {
				continue
			}
			r, err := ParseRule(item)
			if err != nil {
				return nil, err
			}
			out = append(out, r)
		}
	}
	return out, nil
}

// ParseRule reads one entry: HOST, HOST:PORT, *.DOMAIN[:PORT], ADDRESS, [IPV6]:PORT or
// PREFIX/BITS (an address range takes no port).
func ParseRule(entry string) (Rule, error) {
	bad := func(reason string) (Rule, error) { return Rule{}, &RuleError{Entry: entry, Reason: reason} }
	s := strings.ToLower(strings.TrimSpace(entry))
	if s == "" {
		return bad("empty")
	}
	if strings.Contains(s, "/") {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return bad("not an address range (10.0.0.0/8)")
		}
		return Rule{Prefix: p.Masked()}, nil
	}
	host, port, err := splitHostPort(s, false)
	if err != nil {
		return bad(err.Error())
	}
	if a, err := netip.ParseAddr(host); err == nil {
		a = a.Unmap()
		return Rule{Prefix: netip.PrefixFrom(a, a.BitLen()), Port: port}, nil
	}
	suffix := false
	if rest, ok := strings.CutPrefix(host, "*."); ok {
		suffix, host = true, rest
	}
	if err := checkName(host); err != nil {
		return bad(err.Error())
	}
	return Rule{Name: normal(host), Suffix: suffix, Port: port}, nil
}

// Target is where a connection asks to go: a host name or an address, and a port.
type Target struct {
	Host string     // a name, lower case, no trailing dot; "" when Addr is set
	Addr netip.Addr // the address asked for, when the request names one
	Port uint16     // never 0
}

// String is the target as host:port.
func (t Target) String() string {
	h := t.Host
	if t.Addr.IsValid() {
		h = t.Addr.String()
		if t.Addr.Is6() {
			h = "[" + h + "]"
		}
	}
	return h + ":" + strconv.Itoa(int(t.Port))
}

// TargetError is a request's target that cannot be connected to as written.
type TargetError struct{ Reason string }

func (e *TargetError) Error() string { return "egress: " + e.Reason }

// Code is the error's stable code.
func (e *TargetError) Code() string { return "bad_target" }

// ParseTarget reads a connection's target, host:port as a CONNECT request's authority gives
// it (defaultPort 0: the port is required) or a URL's host (defaultPort: the scheme's).
func ParseTarget(hostport string, defaultPort uint16) (Target, error) {
	s := strings.ToLower(hostport)
	host, port, err := splitHostPort(s, defaultPort == 0)
	if err != nil {
		return Target{}, &TargetError{Reason: err.Error()}
	}
	if port == 0 {
		port = defaultPort
	}
	if a, err := netip.ParseAddr(host); err == nil {
		if a.Zone() != "" {
			return Target{}, &TargetError{Reason: "an address with a zone"}
		}
		return Target{Addr: a.Unmap(), Port: port}, nil
	}
	if err := checkName(host); err != nil {
		return Target{}, &TargetError{Reason: err.Error()}
	}
	return Target{Host: normal(host), Port: port}, nil
}

// splitHostPort splits HOST[:PORT] or [IPV6][:PORT]; needPort: the port must be given.
// A port is 1 to 65535, in decimal digits only.
func splitHostPort(s string, needPort bool) (string, uint16, error) {
	host, portText := s, ""
	switch {
	case strings.HasPrefix(s, "["):
		end := strings.Index(s, "]")
		if end < 0 {
			return "", 0, errors.New("an unclosed [")
		}
		host, portText = s[1:end], s[end+1:]
		if portText != "" {
			p, ok := strings.CutPrefix(portText, ":")
			if !ok {
				return "", 0, errors.New("text after ]")
			}
			portText = p
			if portText == "" {
				return "", 0, errors.New("no port after the colon")
			}
		}
		if _, err := netip.ParseAddr(host); err != nil || !strings.Contains(host, ":") {
			return "", 0, errors.New("not an IPv6 address in [ ]")
		}
	case strings.Count(s, ":") > 1:
		// A bare IPv6 address: no port can follow it.
		if _, err := netip.ParseAddr(s); err != nil {
			return "", 0, errors.New("not a host")
		}
	case strings.Contains(s, ":"):
		host, portText, _ = strings.Cut(s, ":")
		if portText == "" {
			return "", 0, errors.New("no port after the colon")
		}
	}
	if host == "" {
		return "", 0, errors.New("no host")
	}
	if portText == "" {
		if needPort {
			return "", 0, errors.New("no port")
		}
		return host, 0, nil
	}
	if len(portText) > 5 || strings.TrimLeft(portText, "0123456789") != "" {
		return "", 0, errors.New("the port is not a number from 1 to 65535")
	}
	n, _ := strconv.Atoi(portText)
	if n < 1 || n > 65535 {
		return "", 0, errors.New("the port is not a number from 1 to 65535")
	}
	return host, uint16(n), nil
}

// checkName accepts a DNS host name: labels of letters, digits, '-' and '_' joined by dots,
// at most 253 bytes, a trailing dot allowed (and dropped by the caller's lower-casing rules).
// A name of digits and dots alone is refused: resolvers read such names as addresses in
// forms (127.1, 0x7f.1) that no rule could be written for.
func checkName(h string) error {
	h = strings.TrimSuffix(h, ".")
	if h == "" || len(h) > 253 {
		return errors.New("not a host name")
	}
	allDigits := true
	for label := range strings.SplitSeq(h, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return errors.New("not a host name")
		}
		for i := 0; i < len(label); i++ {
			c := label[i]
			switch {
			case c >= 'a' && c <= 'z', c == '-', c == '_':
				allDigits = false
			case c >= '0' && c <= '9':
			default:
				return errors.New("not a host name")
			}
		}
	}
	if allDigits {
		return errors.New("digits and dots that are not an address")
	}
	if strings.HasPrefix(h, "0x") || strings.Contains(h, ".0x") {
		if _, err := strconv.ParseUint(strings.ReplaceAll(strings.ReplaceAll(h, "0x", ""), ".", ""), 16, 64); err == nil {
			return errors.New("a hexadecimal address form")
		}
	}
	return nil
}

// normal is a host name as rules compare it.
func normal(h string) string { return strings.TrimSuffix(strings.ToLower(h), ".") }

// Verdict is what the lists say of a target before anything is resolved.
type Verdict int

const (
	Ask   Verdict = iota // no list names it: a person decides
	Allow                // an allow rule names it
	Deny                 // a deny rule names it
)

func (v Verdict) String() string {
	switch v {
	case Allow:
		return "allow"
	case Deny:
		return "deny"
	}
	return "ask"
}

// Decision is Decide's verdict and the rule that gave it.
type Decision struct {
	Verdict Verdict
	Rule    string // the rule's entry; "" for Ask
}

// Decide judges a target by the lists alone, before any name is resolved (a name is sent
// to no resolver until it is allowed: a question does not leak it): a deny rule wins over
// every allow rule; an allow rule allows; else a person is asked. A name is judged by name
// rules, an address by address rules; what a name resolves to is judged after (Dialable).
func Decide(allow, deny []Rule, t Target) Decision {
	for _, r := range deny {
		if r.matches(t) {
			return Decision{Verdict: Deny, Rule: r.String()}
		}
	}
	for _, r := range allow {
		if r.matches(t) {
			return Decision{Verdict: Allow, Rule: r.String()}
		}
	}
	return Decision{Verdict: Ask}
}

func (r Rule) portMatches(p uint16) bool { return r.Port == 0 || r.Port == p }

func (r Rule) matches(t Target) bool {
	if !r.portMatches(t.Port) {
		return false
	}
	if t.Addr.IsValid() {
		return r.ByAddress() && r.Prefix.Contains(t.Addr.Unmap())
	}
	if r.ByAddress() {
		return false
	}
	h := normal(t.Host)
	if r.Suffix {
		return strings.HasSuffix(h, "."+r.Name)
	}
	return h == r.Name
}

// Refusal says why an address may not be dialled; "" when it may.
type Refusal string

const (
	// Reserved: a link-local, metadata, loopback, private or otherwise non-global address
	// that no allow rule names by address.
	Reserved Refusal = "reserved_address"
	// Denied: a deny rule holds the address.
	Denied Refusal = "denied_address"
)

// Dialable judges the address a connection would really dial, after its name resolved: a
// deny rule that holds it refuses it; a non-global address (Global) only when an allow
// rule names it by address (10.0.0.5, 127.0.0.0/8) — a name that resolves there is not
// enough, so a DNS answer cannot steer a connection into the host's own networks.
func Dialable(allow, deny []Rule, a netip.Addr, port uint16) Refusal {
	return DialableFrom(allow, deny, nil, a, port)
}

// DialableFrom is Dialable on a host whose own addresses are own: each is reached only when
// an allow rule names it by address, as a private one is, even when it is global (a
// host's public address reaches every service the host binds on all its interfaces).
func DialableFrom(allow, deny []Rule, own []netip.Addr, a netip.Addr, port uint16) Refusal {
	a = a.Unmap()
	for _, r := range deny {
		if r.ByAddress() && r.portMatches(port) && r.Prefix.Contains(a) {
			return Denied
		}
	}
	if Global(a) && !slices.Contains(own, a) {
		return ""
	}
	for _, r := range allow {
		if r.ByAddress() && r.portMatches(port) && r.Prefix.Contains(a) {
			return ""
		}
	}
	return Reserved
}

// reserved are the ranges beyond netip's own tests that no connection reaches unless named:
// shared address space, IETF protocol assignments, benchmarking, documentation, reserved,
// and the metadata services' own addresses outside link-local (IPv6, Azure's).
var reserved = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),
	netip.MustParsePrefix("100.64.0.0/10"),
	netip.MustParsePrefix("192.0.0.0/24"),
	netip.MustParsePrefix("192.0.2.0/24"),
	netip.MustParsePrefix("198.18.0.0/15"),
	netip.MustParsePrefix("198.51.100.0/24"),
	netip.MustParsePrefix("203.0.113.0/24"),
	netip.MustParsePrefix("240.0.0.0/4"),
	netip.MustParsePrefix("100::/64"),
	netip.MustParsePrefix("2001:db8::/32"),
	netip.MustParsePrefix("fd00:ec2::254/128"),
	netip.MustParsePrefix("168.63.129.16/32"), // Azure's host services (WireServer), a metadata service at a global address
}

// embeds4 are IPv6 ranges that carry an IPv4 address a gateway reaches: NAT64 (the last 32
// bits) and 6to4 (bits 16 to 48). Such an address is global only if the IPv4 one is.
var (
	nat64   = netip.MustParsePrefix("64:ff9b::/96")
	nat64l  = netip.MustParsePrefix("64:ff9b:1::/48")
	sixTo4  = netip.MustParsePrefix("2002::/16")
	teredo  = netip.MustParsePrefix("2001::/32")
	v4compt = netip.MustParsePrefix("::/96")
)

// Global says whether an address is one a sandbox may reach unnamed: a global unicast
// address, not loopback, private (RFC 1918, unique local), link-local (the metadata
// services' 169.254.169.254 among them), multicast, unspecified or reserved; an IPv6
// address that embeds an IPv4 one (NAT64, 6to4, IPv4-compatible) is judged by it.
func Global(a netip.Addr) bool {
	a = a.Unmap()
	if !a.IsValid() || a.Zone() != "" {
		return false
	}
	if a.Is6() {
		b := a.As16()
		switch {
		case nat64.Contains(a):
			return Global(netip.AddrFrom4([4]byte(b[12:16])))
		case sixTo4.Contains(a):
			return Global(netip.AddrFrom4([4]byte(b[2:6])))
		case nat64l.Contains(a), teredo.Contains(a), v4compt.Contains(a):
			return false
		}
	}
	if a.IsLoopback() || a.IsPrivate() || a.IsLinkLocalUnicast() || a.IsLinkLocalMulticast() ||
		a.IsInterfaceLocalMulticast() || a.IsMulticast() || a.IsUnspecified() || !a.IsGlobalUnicast() {
		return false
	}
	if a.Is4() && a == netip.AddrFrom4([4]byte{255, 255, 255, 255}) {
		return false
	}
	for _, p := range reserved {
		if p.Contains(a) {
			return false
		}
	}
	return true
}
