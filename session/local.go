package session

import (
	"context"
	"fmt"
	"runtime"
	"strings"

	"github.com/paddockhq/paddock/images"
	"github.com/paddockhq/paddock/transport/docker"
	"github.com/paddockhq/paddock/transport/environ"
	"github.com/paddockhq/paddock/transport/local"
	"github.com/paddockhq/paddock/transport/pathmap"
	"github.com/paddockhq/paddock/transport/wrapped"
)

func init() {
	Register(localProvider{})
	Register(wrappedProvider{})
}

type localProvider struct{}

func (localProvider) Kind() string       { return "local" }
func (localProvider) Options() []string  { return nil }
func (localProvider) EgressPath() string { return EgressLoopback }
func (localProvider) NotApplied() string {
	return "the local transport runs the kernel as a host process, unconfined, in the workspace itself"
}

// Open runs the kernel as a host process, with the host's environment less its credentials.
func (localProvider) Open(ctx context.Context, r *Request) (*Opened, error) {
	closeClient(r)
	kernel, err := images.Default.Find(ctx, runtime.GOARCH)
	if err != nil {
		return nil, err
	}
	return &Opened{Transport: &local.Transport{Stderr: r.Stderr}, Kernel: kernel, Env: environ.Local(r.Environ), Egress: EgressLoopback}, nil
}

func (localProvider) Recover(context.Context, Left) string { return "" }
func (localProvider) Reap(context.Context) (int, error)    { return 0, nil }

// Check has nothing to check: the local transport is always there.
func (localProvider) Check(context.Context) Check { return Check{} }

type wrappedProvider struct{}

func (wrappedProvider) Kind() string       { return "wrapped" }
func (wrappedProvider) Options() []string  { return []string{"mount", "wrap", "kernel-path"} }
func (wrappedProvider) EgressPath() string { return EgressLoopback }
func (wrappedProvider) NotApplied() string { return "the wrapper command makes the sandbox" }

// Open starts the kernel under the wrapper command (the options', else the settings'); the
// sandbox sees the host's paths unless mounts say otherwise.
func (wrappedProvider) Open(ctx context.Context, r *Request) (*Opened, error) {
	closeClient(r)
	kt := r.Settings.Settings.KernelTransport
	prefix := kt.Wrapped.ArgvPrefix
	if len(r.Transport.Wrap) > 0 {
		prefix = r.Transport.Wrap
	}
	if len(prefix) == 0 {
		return nil, &OptionError{Msg: `--transport wrapped needs the wrapper command: --wrap "docker exec -i box" or kernelTransport.wrapped.argvPrefix`}
	}
	kernel, err := images.Default.Find(ctx, runtime.GOARCH)
	if err != nil {
		return nil, err
	}
	pm, err := pathMap(r, false)
	if err != nil {
		return nil, err
	}
	env, diags := environ.Sandbox(r.Environ, kt.Env, docker.DefaultEnv, pm)
	t := &wrapped.Transport{ArgvPrefix: prefix, KernelPath: kt.Wrapped.KernelPath, Stderr: r.Stderr}
	return &Opened{Transport: t, Kernel: kernel, Env: env, PathMap: pm, Notices: diags, Egress: EgressLoopback}, nil
}

func (wrappedProvider) Recover(context.Context, Left) string { return "" }
func (wrappedProvider) Reap(context.Context) (int, error)    { return 0, nil }

// Check has nothing to check: the wrapper command is the session's.
func (wrappedProvider) Check(context.Context) Check { return Check{} }

// pathMap is the session's path map: the options' mounts, else the settings' pathMap, else
// (when sameDefault) the workspace at its own path, else nil (the sandbox sees the host's
// paths).
func pathMap(r *Request, sameDefault bool) (*pathmap.Map, error) {
	mounts := r.Settings.Settings.KernelTransport.PathMap
	if len(r.Transport.Mounts) > 0 {
		mounts = r.Transport.Mounts
	}
	if len(mounts) == 0 {
		if !sameDefault {
			return nil, nil
		}
		mounts = []pathmap.Mount{{Host: r.Workspace, Sandbox: r.Workspace}}
	}
	pm, err := pathmap.New(mounts...)
	if err != nil {
		return nil, &OptionError{Msg: "path map: " + err.Error()}
	}
	return pm, nil
}

// ParseMount reads a mount as a command line or a request writes it: HOST:SANDBOX or
// HOST:SANDBOX:ro (or :rw).
func ParseMount(m string) (pathmap.Mount, error) {
	parts := strings.Split(m, ":")
	if len(parts) < 2 || len(parts) > 3 || len(parts) == 3 && parts[2] != "ro" && parts[2] != "rw" {
		return pathmap.Mount{}, &OptionError{Msg: fmt.Sprintf("--mount %q: HOST:SANDBOX or HOST:SANDBOX:ro", m)}
	}
	return pathmap.Mount{Host: parts[0], Sandbox: parts[1], ReadOnly: len(parts) == 3 && parts[2] == "ro"}, nil
}
