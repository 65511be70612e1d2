// Package wrapped starts a kernel under a wrapper command that carries its standard input and
// output into a sandbox: `docker exec -i box`, `podman exec -i box`, `kubectl exec -i pod --`,
// `bwrap …`. The kernel must already be in the sandbox, at KernelPath. The wrapper runs on
// the host in its own process group; the kernel ends when its input does.
//
// The commands the kernel runs get the environment each exec request names; the kernel's own
// environment is the wrapper's to give (docker exec gives the container's). The wrapper
// itself gets the host's environment less every credential, so a wrapper that passes its
// environment on (bwrap) passes none.
package wrapped

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"

	"github.com/paddockhq/paddock/errdefs"
	"github.com/paddockhq/paddock/transport"
	"github.com/paddockhq/paddock/transport/environ"
	"github.com/paddockhq/paddock/transport/local"
)

var _ transport.Transport = (*Transport)(nil)

// Transport starts kernels under a wrapper.
type Transport struct {
	// ArgvPrefix is the wrapper command; the kernel's path and arguments follow it.
	ArgvPrefix []string
	// KernelPath is the kernel binary's path inside the sandbox; "" is the Spec's Kernel (a
	// wrapper that sees the host's files, like bwrap with the host's root bound).
	KernelPath string
	// Env is the wrapper's environment; nil is the host's less its credentials.
	Env []string
	// Stderr receives the wrapper's and the kernel's diagnostics; nil discards them.
	Stderr io.Writer
}

// Start runs ArgvPrefix, then the kernel with spec.Args. spec.Cwd must be a sandbox path
// under a mount of spec.PathMap (when there is one), else nothing starts. Without a path map
// the wrapper starts in spec.Cwd (a host path then); with one, the wrapper decides the
// directory the kernel process starts in (docker exec -w). Every command the kernel runs
// starts in the directory its exec request names, the session's.
func (t *Transport) Start(ctx context.Context, spec transport.Spec) (transport.Kernel, error) {
	if len(t.ArgvPrefix) == 0 {
		return nil, errors.New("wrapped: no wrapper command (argvPrefix) named")
	}
	kpath := t.KernelPath
	if kpath == "" {
		kpath = spec.Kernel
	}
	if kpath == "" {
		return nil, errors.New("wrapped: no kernel path in the sandbox named")
	}
	if spec.PathMap != nil {
		if _, ok := spec.PathMap.Mount(spec.Cwd); !ok {
			return nil, &OutsideError{Cwd: spec.Cwd}
		}
	}
	argv := append(append(append([]string{}, t.ArgvPrefix...), kpath), spec.Args...)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = t.Env
	if cmd.Env == nil {
		cmd.Env = environ.Local(os.Environ())
	}
	if spec.PathMap == nil {
		// The identity map: the sandbox's paths are the host's, so the wrapper (bwrap, env,
		// sudo -u) starts where the kernel should.
		cmd.Dir = spec.Cwd
	}
	cmd.Stderr = t.Stderr
	k, err := local.StartProcess(cmd)
	if err != nil {
		return nil, fmt.Errorf("wrapped: start %s: %w", argv[0], err)
	}
	return k, nil
}

// OutsideError is a working directory under no mount of the path map.
type OutsideError struct{ Cwd string }

func (e *OutsideError) Error() string {
	return fmt.Sprintf("wrapped: the working directory %q is outside every mount of the sandbox", e.Cwd)
}

// Code is the stable code of the refusal.
func (e *OutsideError) Code() string { return "outside" }

// Class is the error's class.
func (e *OutsideError) Class() errdefs.Class { return errdefs.PermissionDenied }
