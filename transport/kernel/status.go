//go:build linux

package kernel

import (
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/paddockhq/paddock/transport/wire"
)

// Shell exit codes for a command that did not start, as bash gives them.
const (
	codeNotFound      = 127 // no such program
	codeNotExecutable = 126 // found, but it cannot be run
	codeRedirect      = 1   // a redirection could not be opened
)

// exitStatus is how a wait status reads on the wire: the exit code, or the signal's name
// and 128 plus its number.
func exitStatus(ws syscall.WaitStatus) wire.ExitStatus {
	switch {
	case ws.Exited():
		return wire.ExitStatus{Code: ws.ExitStatus()}
	case ws.Signaled():
		sig := ws.Signal()
		return wire.ExitStatus{Code: 128 + int(sig), Signal: signalName(sig)}
	}
	// Stopped or continued statuses are never asked for (no WUNTRACED).
	return wire.ExitStatus{Code: 128, Error: "unknown wait status"}
}

// signalName is a signal's short name: "TERM" for SIGTERM; a number when it has none.
func signalName(sig syscall.Signal) string {
	if n := unix.SignalName(sig); n != "" {
		return strings.TrimPrefix(n, "SIG")
	}
	return "SIG" + strconv.Itoa(int(sig))
}

// sendable are the signals a signal request may name.
var sendable = map[string]syscall.Signal{
	"TERM": syscall.SIGTERM,
	"KILL": syscall.SIGKILL,
	"INT":  syscall.SIGINT,
	"HUP":  syscall.SIGHUP,
	"QUIT": syscall.SIGQUIT,
}

// parseSignal reads a signal request's name: TERM, KILL, INT, HUP or QUIT, with or
// without a SIG prefix, in any case.
func parseSignal(name string) (syscall.Signal, bool) {
	n := strings.TrimPrefix(strings.ToUpper(name), "SIG")
	sig, ok := sendable[n]
	return sig, ok
}
