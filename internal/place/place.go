// Package place names Paddock's own places on the host: its settings, its state (a daemon's
// sessions with their kernels' attach keys, the audit logs), the daemon's socket directory
// and the kernel cache. The CLI, the daemon, the kernel images and the sessions take them
// from here, so that every session is kept from the same places Paddock uses.
package place

import (
	"os"
	"path/filepath"
	"strconv"
)

// ConfigDir is the global settings directory: $XDG_CONFIG_HOME/paddock, else
// ~/.config/paddock.
func ConfigDir() string {
	if x := os.Getenv("XDG_CONFIG_HOME"); x != "" {
		return filepath.Join(x, "paddock")
	}
	home, _ := os.UserHomeDir()
	return filepath.Join(home, ".config", "paddock")
}

// StateDir is Paddock's state directory: $XDG_STATE_HOME/paddock, else
// ~/.local/state/paddock. The CLI's audit log is there, and a daemon's state by default.
func StateDir() string {
	if x := os.Getenv("XDG_STATE_HOME"); x != "" {
		return filepath.Join(x, "paddock")
	}
	home, _ := os.UserHomeDir()
	return filepath.Join(home, ".local", "state", "paddock")
}

// AuditFile is the audit log in a state directory.
func AuditFile(state string) string { return filepath.Join(state, "audit.jsonl") }

// Sessions is where a daemon keeps its sessions in its state directory: each one's state
// file (with its kernel's attach key), its kernel's socket, its audit log, its jobs.
func Sessions(state string) string { return filepath.Join(state, "sessions") }

// SocketDir is the daemon's default socket directory: $TMPDIR/paddock-<uid>, /tmp when
// TMPDIR is unset.
func SocketDir() string {
	tmp := os.Getenv("TMPDIR")
	if tmp == "" {
		tmp = "/tmp"
	}
	return filepath.Join(tmp, "paddock-"+strconv.Itoa(os.Getuid()))
}

// SocketName is the daemon's socket's name in its directory.
const SocketName = "paddock.sock"

// Socket is the daemon's default socket: SocketName in SocketDir.
func Socket() string { return filepath.Join(SocketDir(), SocketName) }

// KernelCache is where kernels built from the source tree are kept: paddock/kernel in the
// user's cache directory.
func KernelCache() (string, error) {
	c, err := os.UserCacheDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(c, "paddock", "kernel"), nil
}

// Secret are Paddock's own places on this host that hold its secrets: the default state's
// sessions (their kernels' attach keys) and audit log (every command, credentials in its
// words too). A daemon elsewhere adds its own (Daemon).
func Secret() []string {
	state := StateDir()
	return []string{Sessions(state), AuditFile(state)}
}

// Sockets are the places on this host that speak for the user: the default socket
// directory (whoever connects to the daemon answers every question).
func Sockets() []string { return []string{SocketDir()} }

// Protected are Paddock's own places on this host whose content it trusts: the kernel
// cache (the binary local sessions run). The settings directory is ConfigDir.
func Protected() []string {
	if c, err := KernelCache(); err == nil {
		return []string{c}
	}
	return nil
}

// Daemon are the secret places of a daemon whose state directory is state: its sessions
// and its audit log.
func Daemon(state string) []string {
	return []string{Sessions(state), AuditFile(state)}
}
