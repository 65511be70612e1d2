package ssh

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/kevinburke/ssh_config"
)

// Target is a host as the user's ssh configuration resolves it.
type Target struct {
	Name           string        // as named: an alias or [user@]host[:port]
	Alias          string        // the host part of Name, looked up in the ssh configuration
	User           string        // the remote user
	HostName       string        // what is dialled
	Port           int           // what is dialled
	IdentityFiles  []string      // private key files, tried after the agent's keys
	IdentitiesOnly bool          // only the identity files' keys, even when the agent has others
	KnownHosts     []string      // known_hosts files that exist
	IdentityAgent  string        // the agent's socket; "" none
	ConnectTimeout time.Duration // 0: the dialler's own
}

// Addr is the address dialled.
func (t *Target) Addr() string { return net.JoinHostPort(t.HostName, strconv.Itoa(t.Port)) }

// key identifies the connection a target reaches: sessions with equal keys share one.
func (t *Target) key() string {
	return t.User + "@" + t.Addr() + "|" + strings.Join(t.IdentityFiles, ":") + "|" + t.IdentityAgent
}

// splitName splits [user@]host[:port] (host may be [v6]). A port that is not a number, an
// empty host or a name holding a space or control character is refused.
func splitName(name string) (user, host string, port int, err error) {
	if name == "" {
		return "", "", 0, errors.New("no host named")
	}
	for _, r := range name {
		if r <= ' ' || r == 0x7f {
			return "", "", 0, fmt.Errorf("host %q holds a space or control character", name)
		}
	}
	host = name
	if i := strings.LastIndexByte(host, '@'); i >= 0 {
		user, host = host[:i], host[i+1:]
		if user == "" {
			return "", "", 0, fmt.Errorf("host %q has an empty user", name)
		}
	}
	switch {
	case strings.HasPrefix(host, "["):
		h, p, err := net.SplitHostPort(host)
		switch {
		case err == nil:
			host = h
			if port, err = parsePort(p); err != nil {
				return "", "", 0, fmt.Errorf("host %q: %v", name, err)
			}
		case strings.HasSuffix(host, "]") && strings.Count(host, "[") == 1 && strings.Count(host, "]") == 1:
			host = host[1 : len(host)-1]
		default:
			return "", "", 0, fmt.Errorf("host %q: %v", name, err)
		}
	case strings.Count(host, ":") == 1:
		h, p, _ := strings.Cut(host, ":")
		host = h
		if port, err = parsePort(p); err != nil {
			return "", "", 0, fmt.Errorf("host %q: %v", name, err)
		}
	}
	if host == "" || strings.HasPrefix(host, "-") {
		return "", "", 0, fmt.Errorf("host %q: no host name", name)
	}
	return user, host, port, nil
}

func parsePort(p string) (int, error) {
	n, err := strconv.Atoi(p)
	if err != nil || n < 1 || n > 65535 {
		return 0, fmt.Errorf("port %q is not a number from 1 to 65535", p)
	}
	return n, nil
}

// sshConfig is the ssh client configuration: the files read, first match wins (as ssh(1)).
type sshConfig struct {
	files []*ssh_config.Config
}

// loadConfig reads the named file, or ~/.ssh/config then /etc/ssh/ssh_config when file is
// "" (a missing one is skipped), or nothing when file is "none".
func loadConfig(file, home string) (*sshConfig, error) {
	var names []string
	strict := false
	switch file {
	case "none":
	case "":
		names = []string{filepath.Join(home, ".ssh", "config"), "/etc/ssh/ssh_config"}
	default:
		names, strict = []string{file}, true
	}
	c := &sshConfig{}
	for _, n := range names {
		f, err := os.Open(n)
		if err != nil {
			if !strict && errors.Is(err, os.ErrNotExist) {
				continue
			}
			return nil, err
		}
		cfg, err := ssh_config.Decode(f)
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("%s: %v", n, err)
		}
		c.files = append(c.files, cfg)
	}
	return c, nil
}

func (c *sshConfig) get(alias, key string) string {
	for _, f := range c.files {
		if v, err := f.Get(alias, key); err == nil && v != "" {
			return v
		}
	}
	return ""
}

func (c *sshConfig) getAll(alias, key string) []string {
	var out []string
	for _, f := range c.files {
		if v, err := f.GetAll(alias, key); err == nil {
			out = append(out, v...)
		}
	}
	return out
}

// defaultIdentities are the files ssh(1) tries when the configuration names none.
var defaultIdentities = []string{"id_rsa", "id_ecdsa", "id_ecdsa_sk", "id_ed25519", "id_ed25519_sk"}

// resolve turns a host as named into a Target through the configuration.
func (d *Dialer) resolve(name string) (*Target, error) {
	user, host, port, err := splitName(name)
	if err != nil {
		return nil, &Error{Code: CodeConfig, Host: name, Err: err}
	}
	home, local := d.home(), d.localUser()
	cfg, err := loadConfig(d.ConfigFile, home)
	if err != nil {
		return nil, &Error{Code: CodeConfig, Host: name, Err: err}
	}
	for _, k := range []string{"ProxyJump", "ProxyCommand"} {
		if v := cfg.get(host, k); v != "" && !strings.EqualFold(v, "none") {
			return nil, &Error{Code: CodeConfig, Host: name, Err: fmt.Errorf("%s is not supported: the box must be reachable directly", k)}
		}
	}
	t := &Target{Name: name, Alias: host, User: user, HostName: host, Port: port}
	if hn := cfg.get(host, "HostName"); hn != "" {
		t.HostName = expandTokens(hn, tokens{home: home, local: local, host: host})
	}
	if t.User == "" {
		t.User = cfg.get(host, "User")
	}
	if t.User == "" {
		t.User = local
	}
	if t.Port == 0 {
		if p := cfg.get(host, "Port"); p != "" {
			if t.Port, err = parsePort(p); err != nil {
				return nil, &Error{Code: CodeConfig, Host: name, Err: err}
			}
		} else {
			t.Port = 22
		}
	}
	tok := tokens{home: home, local: local, host: t.HostName, user: t.User, port: t.Port, alias: host}
	ids := append([]string(nil), d.IdentityFiles...)
	for _, f := range cfg.getAll(host, "IdentityFile") {
		if !strings.EqualFold(f, "none") {
			ids = append(ids, expandPath(f, tok))
		}
	}
	if len(ids) == 0 {
		for _, f := range defaultIdentities {
			ids = append(ids, filepath.Join(home, ".ssh", f))
		}
	}
	for _, f := range ids {
		if _, err := os.Stat(f); err == nil {
			t.IdentityFiles = append(t.IdentityFiles, f)
		}
	}
	t.IdentitiesOnly = strings.EqualFold(cfg.get(host, "IdentitiesOnly"), "yes")
	known := d.KnownHosts
	if len(known) == 0 {
		for _, v := range []string{cfg.get(host, "UserKnownHostsFile"), cfg.get(host, "GlobalKnownHostsFile")} {
			for _, f := range strings.Fields(v) {
				known = append(known, expandPath(f, tok))
			}
		}
	}
	if len(known) == 0 {
		known = []string{filepath.Join(home, ".ssh", "known_hosts"), filepath.Join(home, ".ssh", "known_hosts2"), "/etc/ssh/ssh_known_hosts", "/etc/ssh/ssh_known_hosts2"}
	}
	for _, f := range known {
		if fi, err := os.Stat(f); err == nil && fi.Mode().IsRegular() {
			t.KnownHosts = append(t.KnownHosts, f)
		}
	}
	switch {
	case d.AgentSocket == "none":
	case d.AgentSocket != "":
		t.IdentityAgent = d.AgentSocket
	default:
		switch a := cfg.get(host, "IdentityAgent"); {
		case strings.EqualFold(a, "none"):
		case a == "" || a == "SSH_AUTH_SOCK":
			t.IdentityAgent = d.getenv("SSH_AUTH_SOCK")
		case strings.HasPrefix(a, "$"):
			t.IdentityAgent = d.getenv(strings.TrimPrefix(a, "$"))
		default:
			t.IdentityAgent = expandPath(a, tok)
		}
	}
	if ct := cfg.get(host, "ConnectTimeout"); ct != "" {
		if n, err := strconv.Atoi(ct); err == nil && n > 0 {
			t.ConnectTimeout = time.Duration(n) * time.Second
		}
	}
	return t, nil
}

// tokens are the values of ssh_config's % tokens.
type tokens struct {
	home, local, host, user, alias string
	port                           int
}

// expandTokens replaces %d %u %h %r %p %n %% in s.
func expandTokens(s string, t tokens) string {
	if !strings.Contains(s, "%") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '%' || i+1 == len(s) {
			b.WriteByte(s[i])
			continue
		}
		i++
		switch s[i] {
		case '%':
			b.WriteByte('%')
		case 'd':
			b.WriteString(t.home)
		case 'u':
			b.WriteString(t.local)
		case 'h':
			b.WriteString(t.host)
		case 'r':
			b.WriteString(t.user)
		case 'n':
			b.WriteString(t.alias)
		case 'p':
			if t.port != 0 {
				b.WriteString(strconv.Itoa(t.port))
			}
		default:
			b.WriteByte('%')
			b.WriteByte(s[i])
		}
	}
	return b.String()
}

// expandPath expands tokens and a leading ~/ in a file name.
func expandPath(p string, t tokens) string {
	p = expandTokens(p, t)
	if p == "~" {
		return t.home
	}
	if strings.HasPrefix(p, "~/") {
		return filepath.Join(t.home, p[2:])
	}
	return p
}
