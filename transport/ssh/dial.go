package ssh

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/user"
	"strings"
	"sync"
	"time"

	xssh "golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/agent"
	"golang.org/x/crypto/ssh/knownhosts"
)

// DefaultTimeout is the connect timeout when neither the Dialer nor the ssh configuration
// sets one.
const DefaultTimeout = 15 * time.Second

// DefaultKeepAlive is how often an idle connection is checked; a connection that does not
// answer within the connect timeout is lost.
const DefaultKeepAlive = 5 * time.Second

// Dialer connects to boxes as ssh(1) in batch mode would: the user's ssh configuration for
// aliases, users, ports and identity files; host keys checked against known_hosts, an unknown
// or changed key refused; keys from the agent and the identity files, never a password or a
// passphrase prompt. The zero Dialer reads the usual files.
type Dialer struct {
	// ConfigFile is the ssh client configuration; "": ~/.ssh/config then
	// /etc/ssh/ssh_config; "none": no file.
	ConfigFile string
	// KnownHosts are the known_hosts files; none: the configuration's UserKnownHostsFile and
	// GlobalKnownHostsFile, else ~/.ssh/known_hosts and /etc/ssh/ssh_known_hosts.
	KnownHosts []string
	// IdentityFiles are tried before the configuration's.
	IdentityFiles []string
	// AgentSocket is the ssh agent's socket; "": the configuration's IdentityAgent, else
	// $SSH_AUTH_SOCK; "none": no agent.
	AgentSocket string
	// Timeout bounds the TCP connect and the handshake; 0: the configuration's
	// ConnectTimeout, else DefaultTimeout.
	Timeout time.Duration
	// KeepAlive is how often a connection is checked; 0: DefaultKeepAlive.
	KeepAlive time.Duration
	// Home and User are the local user's home and name; "": the process's.
	Home string
	User string
	// Getenv looks up SSH_AUTH_SOCK; nil: os.Getenv.
	Getenv func(string) string
}

func (d *Dialer) home() string {
	if d.Home != "" {
		return d.Home
	}
	h, _ := os.UserHomeDir()
	return h
}

func (d *Dialer) localUser() string {
	if d.User != "" {
		return d.User
	}
	if u, err := user.Current(); err == nil {
		return u.Username
	}
	return os.Getenv("USER")
}

func (d *Dialer) getenv(k string) string {
	if d.Getenv != nil {
		return d.Getenv(k)
	}
	return os.Getenv(k)
}

// Resolve returns the target a host name reaches through the ssh configuration.
func (d *Dialer) Resolve(name string) (*Target, error) { return d.resolve(name) }

func (d *Dialer) timeout(t *Target) time.Duration {
	switch {
	case d.Timeout > 0:
		return d.Timeout
	case t.ConnectTimeout > 0:
		return t.ConnectTimeout
	}
	return DefaultTimeout
}

// Dial connects to the host named. Every failure is an *Error.
func (d *Dialer) Dial(ctx context.Context, name string) (*Conn, error) {
	t, err := d.resolve(name)
	if err != nil {
		return nil, err
	}
	return d.dial(ctx, t)
}

func (d *Dialer) dial(ctx context.Context, t *Target) (*Conn, error) {
	fail := func(code string, err error) (*Conn, error) {
		return nil, &Error{Code: code, Host: t.Name, Err: err}
	}
	timeout := d.timeout(t)
	hostKey, algos, err := hostKeyCheck(t)
	if err != nil {
		return fail(CodeConfig, err)
	}
	// With no key at all the handshake still runs: the host key is checked first, and the
	// server's refusal is the auth error.
	auth, closeAuth := d.auth(t)
	defer closeAuth()
	cfg := &xssh.ClientConfig{
		User:              t.User,
		Auth:              auth,
		HostKeyCallback:   hostKey,
		HostKeyAlgorithms: algos,
		Timeout:           timeout,
		ClientVersion:     "SSH-2.0-Paddock",
	}
	dctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	nc, err := (&net.Dialer{}).DialContext(dctx, "tcp", t.Addr())
	if err != nil {
		var ne net.Error
		switch {
		case ctx.Err() != nil:
			return fail(CodeConnectTimeout, ctx.Err())
		case errors.As(err, &ne) && ne.Timeout():
			return fail(CodeConnectTimeout, err)
		}
		return fail(CodeUnreachable, err)
	}
	// The handshake ends by the deadline, or when ctx ends.
	deadline := time.Now().Add(timeout)
	nc.SetDeadline(deadline)
	stop := context.AfterFunc(ctx, func() { nc.SetDeadline(time.Unix(1, 0)) })
	sc, chans, reqs, err := xssh.NewClientConn(nc, t.Addr(), cfg)
	stopped := stop()
	if err != nil {
		nc.Close()
		var ke *knownhosts.KeyError
		var re *knownhosts.RevokedError
		var ne net.Error
		switch {
		case errors.As(err, &ke) && len(ke.Want) == 0:
			return fail(CodeHostKeyUnknown, hostKeyDetail(err))
		case errors.As(err, &ke), errors.As(err, &re):
			return fail(CodeHostKeyChanged, hostKeyDetail(err))
		case !stopped || ctx.Err() != nil:
			return fail(CodeConnectTimeout, ctx.Err())
		case errors.As(err, &ne) && ne.Timeout():
			return fail(CodeConnectTimeout, errors.New("no ssh handshake within the connect timeout"))
		case strings.Contains(err.Error(), "unable to authenticate"):
			if len(auth) == 0 {
				err = errors.New("no ssh agent and no identity file that needs no passphrase")
			}
			return fail(CodeAuth, err)
		case errors.Is(err, io.EOF):
			return fail(CodeUnreachable, errors.New("the server closed the connection during the handshake"))
		}
		return fail(CodeUnreachable, err)
	}
	nc.SetDeadline(time.Time{})
	c := &Conn{
		Client: xssh.NewClient(sc, chans, reqs),
		Target: t,
		done:   make(chan struct{}),
		stop:   make(chan struct{}),
	}
	keep := d.KeepAlive
	if keep <= 0 {
		keep = DefaultKeepAlive
	}
	c.wg.Add(2)
	go c.watch()
	go c.keepAlive(keep, timeout)
	return c, nil
}

// hostKeyDetail keeps the useful part of a host key refusal.
func hostKeyDetail(err error) error {
	var ke *knownhosts.KeyError
	if errors.As(err, &ke) && len(ke.Want) > 0 {
		return fmt.Errorf("known_hosts %s:%d holds another key", ke.Want[0].Filename, ke.Want[0].Line)
	}
	var re *knownhosts.RevokedError
	if errors.As(err, &re) {
		return fmt.Errorf("the key is revoked in %s:%d", re.Revoked.Filename, re.Revoked.Line)
	}
	return nil
}

// hostKeyCheck returns the callback that checks the host's key against the target's
// known_hosts files, and the key algorithms to ask for: those of the keys known for the
// host, so a server holding several keys shows the one known rather than failing as changed.
func hostKeyCheck(t *Target) (xssh.HostKeyCallback, []string, error) {
	if len(t.KnownHosts) == 0 {
		return func(string, net.Addr, xssh.PublicKey) error {
			return &knownhosts.KeyError{} // no file: every key is unknown
		}, nil, nil
	}
	cb, err := knownhosts.New(t.KnownHosts...)
	if err != nil {
		return nil, nil, fmt.Errorf("known_hosts: %v", err)
	}
	// Ask the callback with a key no file holds: its KeyError lists the keys known.
	probe := probeKey{}
	addr := &net.TCPAddr{IP: net.ParseIP(t.HostName), Port: t.Port}
	if addr.IP == nil {
		addr = &net.TCPAddr{IP: net.IPv4zero, Port: t.Port}
	}
	var algos []string
	var ke *knownhosts.KeyError
	if err := cb(t.Addr(), addr, probe); errors.As(err, &ke) {
		seen := map[string]bool{}
		for _, k := range ke.Want {
			for _, a := range algorithmsOf(k.Key.Type()) {
				if !seen[a] {
					seen[a] = true
					algos = append(algos, a)
				}
			}
		}
	}
	return cb, algos, nil
}

// algorithmsOf lists the signature algorithms that show a key of the given type.
func algorithmsOf(keyType string) []string {
	switch keyType {
	case xssh.KeyAlgoRSA:
		return []string{xssh.KeyAlgoRSASHA512, xssh.KeyAlgoRSASHA256, xssh.KeyAlgoRSA}
	case xssh.CertAlgoRSAv01:
		return []string{xssh.CertAlgoRSASHA512v01, xssh.CertAlgoRSASHA256v01, xssh.CertAlgoRSAv01}
	}
	return []string{keyType}
}

// probeKey is a public key no known_hosts file holds.
type probeKey struct{}

func (probeKey) Type() string                         { return "paddock-probe" }
func (probeKey) Marshal() []byte                      { return []byte("\x00\x00\x00\x0dpaddock-probe") }
func (probeKey) Verify([]byte, *xssh.Signature) error { return errors.New("probe") }

// auth returns the public-key methods: the agent's keys (unless IdentitiesOnly), then each
// identity file's key that needs no passphrase, or the agent's key for it. Nothing prompts.
func (d *Dialer) auth(t *Target) ([]xssh.AuthMethod, func()) {
	var signers []xssh.Signer
	var agentSigners []xssh.Signer
	closeAuth := func() {}
	if t.IdentityAgent != "" {
		if ac, err := net.DialTimeout("unix", t.IdentityAgent, 2*time.Second); err == nil {
			closeAuth = func() { ac.Close() }
			if s, err := agent.NewClient(ac).Signers(); err == nil {
				agentSigners = s
			}
		}
	}
	inAgent := func(pub xssh.PublicKey) xssh.Signer {
		for _, s := range agentSigners {
			if string(s.PublicKey().Marshal()) == string(pub.Marshal()) {
				return s
			}
		}
		return nil
	}
	if !t.IdentitiesOnly {
		signers = append(signers, agentSigners...)
	}
	for _, f := range t.IdentityFiles {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		s, err := xssh.ParsePrivateKey(b)
		var pm *xssh.PassphraseMissingError
		switch {
		case err == nil:
			if t.IdentitiesOnly || inAgent(s.PublicKey()) == nil {
				signers = append(signers, s)
			}
		case errors.As(err, &pm) && pm.PublicKey != nil:
			// A key with a passphrase is used only through the agent: never a prompt.
			if as := inAgent(pm.PublicKey); as != nil && t.IdentitiesOnly {
				signers = append(signers, as)
			}
		}
	}
	if len(signers) == 0 {
		return nil, closeAuth
	}
	return []xssh.AuthMethod{xssh.PublicKeys(signers...)}, closeAuth
}

// Conn is one SSH connection to a box, watched: when it drops or stops answering its
// keepalives, Lost returns why and every channel on it ends.
type Conn struct {
	*xssh.Client
	Target *Target

	wg       sync.WaitGroup
	done     chan struct{} // closed when the connection has ended
	stop     chan struct{} // closed by Close
	stopOnce sync.Once

	boxMu sync.Mutex // held while the box is probed or a kernel uploaded

	mu     sync.Mutex
	lost   error // guarded by mu; why the connection ended, nil after Close
	closed bool  // guarded by mu
	box    *box  // guarded by mu; what is known of the box
}

// watch waits for the connection to end.
func (c *Conn) watch() {
	defer c.wg.Done()
	err := c.Client.Wait()
	c.mu.Lock()
	if !c.closed && c.lost == nil {
		if err == nil {
			err = io.EOF
		}
		c.lost = &Error{Code: CodeConnectionLost, Host: c.Target.Name, Err: err}
	}
	c.mu.Unlock()
	close(c.done)
}

// keepAlive asks the server for an answer every interval; one not given within timeout
// ends the connection as lost.
func (c *Conn) keepAlive(interval, timeout time.Duration) {
	defer c.wg.Done()
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-c.stop:
			return
		case <-c.done:
			return
		case <-tick.C:
		}
		if err := c.ping(timeout); err != nil {
			c.drop(err)
			return
		}
	}
}

// ping sends one keepalive request and waits up to timeout for its answer.
func (c *Conn) ping(timeout time.Duration) error {
	answered := make(chan error, 1)
	go func() {
		_, _, err := c.Client.SendRequest("keepalive@openssh.com", true, nil)
		answered <- err
	}()
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case err := <-answered:
		return err
	case <-t.C:
		return fmt.Errorf("no answer to a keepalive within %v", timeout)
	case <-c.stop:
		return nil
	}
}

// drop ends the connection as lost, for why.
func (c *Conn) drop(why error) {
	c.mu.Lock()
	if !c.closed && c.lost == nil {
		c.lost = &Error{Code: CodeConnectionLost, Host: c.Target.Name, Err: why}
	}
	c.mu.Unlock()
	c.Client.Close()
}

// Lost returns why the connection ended, if it did other than by Close.
func (c *Conn) Lost() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lost
}

// Done is closed when the connection has ended.
func (c *Conn) Done() <-chan struct{} { return c.done }

// Check returns nil when the connection still answers, within timeout.
func (c *Conn) Check(timeout time.Duration) error {
	if err := c.ping(timeout); err != nil {
		c.drop(err)
		if l := c.Lost(); l != nil {
			return l
		}
		return &Error{Code: CodeConnectionLost, Host: c.Target.Name, Err: err}
	}
	return nil
}

// Close ends the connection and waits for its watchers.
func (c *Conn) Close() error {
	c.mu.Lock()
	if c.lost == nil {
		c.closed = true
	}
	c.mu.Unlock()
	c.stopOnce.Do(func() { close(c.stop) })
	err := c.Client.Close()
	c.wg.Wait()
	return err
}
