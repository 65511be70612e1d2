package containerd

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/paddockhq/paddock/errdefs"
)

// This file decides how containerd runs a container under the OCI runtime a session names
// (kernelTransport.runtime): a shim of that name, or containerd's runc shim running another
// runc-compatible binary in place of runc (its BinaryName option). Nothing here talks to
// containerd; writeWrapper writes the one file a runtime may need.

// Shims containerd knows by name.
const (
	RuncShim  = "io.containerd.runc.v2"
	RunscShim = "io.containerd.runsc.v1"
)

// Runtime is how containerd runs a session's containers.
type Runtime struct {
	// Name is the runtime as the session names it ("" and "runc": containerd's default).
	Name string
	// Shim is the containerd shim: RuncShim, RunscShim or the one named.
	Shim string
	// Binary, with RuncShim, is the OCI runtime the shim runs in place of runc; "" is runc.
	Binary string
	// Wrapper, when set, is the content of a script Binary must be: the runtime's binary
	// with the flags Paddock's sandboxes need (gVisor's runsc: its network, the OCI
	// system-call filter applied inside).
	Wrapper string
	// GVisor: the sandbox runs on gVisor's kernel, not the host's.
	GVisor bool
}

// RuntimeError is a runtime that cannot be used on this machine.
type RuntimeError struct{ Name, Why string }

func (e *RuntimeError) Error() string {
	return fmt.Sprintf("containerd: runtime %q: %s", e.Name, e.Why)
}

// Code is the error's stable code.
func (e *RuntimeError) Code() string { return "no_runtime" }

// Class is the error's class.
func (e *RuntimeError) Class() errdefs.Class { return errdefs.Unavailable }

// ChooseRuntime decides how containerd runs a sandbox under the runtime named, for a
// sandbox whose network is network ("" or "none", or "host"); look finds a program on the
// machine (exec.LookPath).
//
//   - "" or "runc": containerd's runc shim as it is.
//   - "runsc": gVisor's own shim when the machine has it (containerd-shim-runsc-v1), else the
//     runc shim running runsc through a wrapper: runsc takes the flags a sandbox needs
//     before its command, which the runc shim does not pass. The wrapper asks for
//     --oci-seccomp (without it runsc ignores the spec's system-call filter: the sandbox's
//     programs would run unfiltered against gVisor's kernel) and a network matching the
//     sandbox's: none, or the host's.
//   - "io.containerd.NAME.vN": that shim.
//   - any other name: a runc-compatible binary on the PATH (crun, youki) run by the runc
//     shim.
func ChooseRuntime(name, network string, look func(string) (string, error)) (Runtime, error) {
	switch {
	case name == "" || name == "runc":
		return Runtime{Name: name, Shim: RuncShim}, nil
	case name == "runsc":
		if _, err := look("containerd-shim-runsc-v1"); err == nil {
			return Runtime{Name: name, Shim: RunscShim, GVisor: true}, nil
		}
		bin, err := look("runsc")
		if err != nil {
			return Runtime{}, &RuntimeError{Name: name, Why: "gVisor is not installed (no runsc on the PATH; Debian: apt-get install runsc)"}
		}
		var net string
		switch network {
		case "", "none":
			net = "--network=none"
		case "host":
			net = "--network=host"
		default:
			return Runtime{}, &RuntimeError{Name: name, Why: fmt.Sprintf("network %q: gVisor here takes none or host", network)}
		}
		// The runc shim deletes a container that stopped without --force, which runsc
		// refuses once the sandbox has gone ("sandbox is not running"): the wrapper adds it.
		w := "#!/bin/sh\n# Written by Paddock: containerd's runc shim runs gVisor through this file.\n" +
			"for a do shift; if [ \"$a\" = delete ]; then set -- \"$@\" delete --force; else set -- \"$@\" \"$a\"; fi; done\n" +
			"exec " + shellQuote(bin) + " --oci-seccomp --cgroupfs " + net + " \"$@\"\n"
		return Runtime{Name: name, Shim: RuncShim, Wrapper: w, GVisor: true}, nil
	case strings.HasPrefix(name, "io.containerd."):
		return Runtime{Name: name, Shim: name}, nil
	case strings.ContainsAny(name, "/ \t\n"):
		return Runtime{}, &RuntimeError{Name: name, Why: "a runtime is named (runc, runsc, crun, io.containerd.NAME.vN), not given as a path"}
	}
	bin, err := look(name)
	if err != nil {
		return Runtime{}, &RuntimeError{Name: name, Why: "no such program on the PATH, and not a containerd shim's name (io.containerd.NAME.vN)"}
	}
	return Runtime{Name: name, Shim: RuncShim, Binary: bin}, nil
}

// shellQuote quotes s for sh.
func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// WrapperDir is where runtime wrappers are written: paddock/runtime in the user's cache
// directory.
func WrapperDir() (string, error) {
	c, err := os.UserCacheDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(c, "paddock", "runtime"), nil
}

// writeWrapper writes a runtime's wrapper in dir, named by its content's hash so that
// wrappers of different flags live side by side, and returns its path. A wrapper already
// there with that content is kept; the file is replaced in one rename, never seen half
// written by a shim that runs it.
func writeWrapper(dir, content string) (string, error) {
	sum := sha256.Sum256([]byte(content))
	p := filepath.Join(dir, "runsc-"+hex.EncodeToString(sum[:6]))
	if b, err := os.ReadFile(p); err == nil && string(b) == content {
		return p, nil
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	f, err := os.CreateTemp(dir, ".wrapper-*")
	if err != nil {
		return "", err
	}
	defer os.Remove(f.Name())
	if _, err := f.WriteString(content); err != nil {
		f.Close()
		return "", err
	}
	if err := f.Chmod(0o700); err != nil {
		f.Close()
		return "", err
	}
	if err := f.Close(); err != nil {
		return "", err
	}
	if err := os.Rename(f.Name(), p); err != nil {
		return "", err
	}
	return p, nil
}
