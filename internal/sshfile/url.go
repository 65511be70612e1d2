// Package sshfile reads one remote text file named by an ssh://HOST/PATH URL, for the read
// tool. It is off by default: the host must be listed in the trusted setting ssh.hosts. The
// file is read over SFTP, so no character of the path is ever shell syntax on the box, and
// every refusal is a *Rejection with a stable Code.
package sshfile

import (
	"fmt"
	"strings"
)

// The codes of a Rejection.
const (
	NotAllowed       = "not_allowed"       // the host is not in ssh.hosts
	Arguments        = "arguments"         // the URL is not ssh://HOST/PATH, or HOST has a character not allowed
	Escapes          = "escapes"           // the path's ".." go above its root
	Host             = "host"              // unknown host, no connection, host key unknown or changed
	Auth             = "auth"              // the box accepted none of the keys
	NotFound         = "not_found"         // no file at the path
	IsDirectory      = "is_directory"      // the path is a directory
	PermissionDenied = "permission_denied" // the remote user may not read it
	Binary           = "binary"            // not UTF-8, or it holds a NUL byte
	Timeout          = "timeout"           // the blocking budget ended before the cap was filled
	IO               = "io"                // any other failure to read it
)

// Rejection is a read refused on purpose, with a message fit for the agent.
type Rejection struct {
	Code string
	Msg  string
}

func (r *Rejection) Error() string { return r.Code + ": " + r.Msg }

// Is makes errors.Is(err, &Rejection{Code: c}) match any rejection with code c.
func (r *Rejection) Is(target error) bool {
	t, ok := target.(*Rejection)
	return ok && t.Code == r.Code
}

func reject(code, format string, args ...any) *Rejection {
	return &Rejection{Code: code, Msg: fmt.Sprintf(format, args...)}
}

// URL is a parsed ssh://HOST/PATH.
type URL struct {
	Host string // as written: an ssh configuration alias or user@host
	// Home: the path is under the remote user's home ("~" was its first segment); else
	// under "/".
	Home bool
	// Path is clean: absolute when !Home; relative to the home when Home ("" is the home).
	Path string
}

// String is the URL's canonical form.
func (u URL) String() string {
	switch {
	case !u.Home:
		return "ssh://" + u.Host + u.Path
	case u.Path == "":
		return "ssh://" + u.Host + "/~"
	}
	return "ssh://" + u.Host + "/~/" + u.Path
}

// Scheme is the prefix of every URL Parse takes.
const Scheme = "ssh://"

// ValidHost reports whether h is a host as an ssh:// URL may name it: letters, digits, '.',
// '-', '_' and '@', not starting with '-' (which the ssh program would take for an option).
func ValidHost(h string) bool {
	if h == "" || h[0] == '-' {
		return false
	}
	for i := 0; i < len(h); i++ {
		c := h[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case c == '.', c == '-', c == '_', c == '@':
		default:
			return false
		}
	}
	return true
}

// Parse reads ssh://HOST/PATH. The path is taken as written (no percent-decoding): it has
// one of two roots on the box, "/" or, when its first segment is exactly "~", the remote
// user's home. Empty and "." segments are dropped; ".." takes one back, and above the root
// it is refused (Escapes), never clamped.
func Parse(raw string) (URL, error) {
	if !strings.HasPrefix(raw, Scheme) {
		return URL{}, reject(Arguments, "not an ssh:// URL: want ssh://HOST/PATH")
	}
	rest := raw[len(Scheme):]
	host, path, ok := strings.Cut(rest, "/")
	if !ok {
		return URL{}, reject(Arguments, "no path: want ssh://HOST/PATH")
	}
	if !ValidHost(host) {
		return URL{}, reject(Arguments, "host %q: a host is letters, digits, '.', '-', '_' and '@', not starting with '-'", host)
	}
	if strings.IndexByte(path, 0) >= 0 {
		return URL{}, reject(Arguments, "the path holds a NUL byte")
	}
	segs := strings.Split(path, "/")
	u := URL{Host: host}
	if segs[0] == "~" {
		u.Home = true
		segs = segs[1:]
	}
	var kept []string
	for _, s := range segs {
		switch s {
		case "", ".":
		case "..":
			if len(kept) == 0 {
				root := "/"
				if u.Home {
					root = "~"
				}
				return URL{}, reject(Escapes, "the path goes above its root %s with ..", root)
			}
			kept = kept[:len(kept)-1]
		default:
			kept = append(kept, s)
		}
	}
	u.Path = strings.Join(kept, "/")
	if !u.Home {
		u.Path = "/" + u.Path
	}
	return u, nil
}
