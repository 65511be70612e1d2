package ssh

import (
	"errors"
	"fmt"

	"github.com/paddockhq/paddock/errdefs"
)

// The codes of an Error.
const (
	// CodeConfig: the host as named, or the ssh configuration, cannot be used.
	CodeConfig = "config"
	// CodeUnreachable: no connection (the name does not resolve, the port refuses).
	CodeUnreachable = "unreachable"
	// CodeConnectTimeout: the host did not answer, or did not finish the handshake, within
	// the connect timeout.
	CodeConnectTimeout = "connect_timeout"
	// CodeHostKeyUnknown: the host's key is in no known_hosts file. It is never accepted
	// silently: add it with ssh-keyscan or a first interactive `ssh HOST`.
	CodeHostKeyUnknown = "host_key_unknown"
	// CodeHostKeyChanged: known_hosts holds another key for the host (or the key is revoked).
	CodeHostKeyChanged = "host_key_changed"
	// CodeAuth: the server accepted none of the keys from the agent and identity files.
	CodeAuth = "auth"
	// CodeConnectionLost: the connection dropped, or stopped answering, during a session.
	CodeConnectionLost = "connection_lost"
	// CodeBox: the box cannot run a kernel (an unknown architecture, no kernel binary for
	// it, the upload failed, the kernel did not start).
	CodeBox = "box"
	// CodeForwardRefused: the box's sshd refused to forward a port on the box back over the
	// connection (its AllowTcpForwarding or DisableForwarding).
	CodeForwardRefused = "forward_refused"
)

// Error is a refusal or failure of the ssh transport with a stable Code.
type Error struct {
	Code string
	Host string // the host as the settings or the user named it
	Err  error  // the cause, if any
}

func (e *Error) Error() string {
	var what string
	switch e.Code {
	case CodeConfig:
		what = "cannot be used"
	case CodeUnreachable:
		what = "cannot be reached"
	case CodeConnectTimeout:
		what = "did not answer within the connect timeout"
	case CodeHostKeyUnknown:
		what = "has a host key that is in no known_hosts file; refused (add it with `ssh-keyscan` after checking its fingerprint, or connect once with ssh)"
	case CodeHostKeyChanged:
		what = "presented a host key that differs from the one in known_hosts; refused (if the box was reinstalled, remove the old key with `ssh-keygen -R`)"
	case CodeAuth:
		what = "accepted none of the keys from the ssh agent or the identity files"
	case CodeConnectionLost:
		what = "connection was lost"
	case CodeBox:
		what = "cannot run a kernel"
	case CodeForwardRefused:
		what = "refused to forward a port of the box back to the host (allow it with AllowTcpForwarding remote in its sshd_config)"
	default:
		what = e.Code
	}
	if e.Err != nil {
		return fmt.Sprintf("ssh: host %s %s: %v", e.Host, what, e.Err)
	}
	return fmt.Sprintf("ssh: host %s %s", e.Host, what)
}

func (e *Error) Unwrap() error { return e.Err }

// Is makes errors.Is(err, &Error{Code: c}) match any Error with code c.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == e.Code && t.Host == ""
}

// CodeOf returns the Code of the first *Error in err's chain, or "".
func CodeOf(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}

// OutsideError is a working directory under no mount of the path map: the kernel would
// work where the host cannot follow it.
type OutsideError struct{ Cwd string }

func (e *OutsideError) Error() string {
	return fmt.Sprintf("ssh: the working directory %q is outside every mount of the path map; add a mount (pathMap) for it, or use workspace sync", e.Cwd)
}

// Code is the stable code of the error.
func (e *OutsideError) Code() string { return "outside" }

// Class is the error's class.
func (e *OutsideError) Class() errdefs.Class { return errdefs.PermissionDenied }
