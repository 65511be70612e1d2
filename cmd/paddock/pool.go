package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"time"

	cdclient "github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/pkg/namespaces"
	"github.com/spf13/pflag"

	"github.com/paddockhq/paddock/config"
	"github.com/paddockhq/paddock/images"
	"github.com/paddockhq/paddock/orchestrator"
	"github.com/paddockhq/paddock/pool"
	"github.com/paddockhq/paddock/transport"
	"github.com/paddockhq/paddock/transport/containerd"
	"github.com/paddockhq/paddock/transport/docker"
	"github.com/paddockhq/paddock/transport/environ"
)

// The containerd transport and warm pools: --transport containerd, --pool N.
func init() {
	transportKeys["pool"] = "kernelTransport.docker.pool"
}

// registerPool adds the pool's flag.
func registerPool(fs *pflag.FlagSet) {
	fs.Int("pool", 0, "docker, containerd: sandboxes kept started ahead, kernels answering, for this command's sessions and their children (default 0: none)")
}

// configureContainerd fills in a session in a containerd container: the settings' image
// (loaded from the Docker engine when containerd lacks it), else the host image with the
// host's system directories; the docker transport's confinement from the same flags and
// settings; the path map, the kernel and the environment. The daemon is the one at
// PADDOCK_CONTAINERD_ADDRESS, else the machine's own or the Docker engine's.
func (f *transportFlags) configureContainerd(ctx context.Context, cfg *orchestrator.Config, kt config.KernelTransport) (notes []string, err error) {
	c, err := containerd.Connect(ctx, os.Getenv("PADDOCK_CONTAINERD_ADDRESS"))
	if err != nil {
		return nil, fmt.Errorf("--transport containerd: %w (is containerd running? PADDOCK_CONTAINERD_ADDRESS names its socket)", err)
	}
	// The confinement is the docker transport's: built by the same code from the same
	// flags, with an image named so that nothing is asked of a Docker engine.
	d := kt.Docker
	d.Image = "-"
	dt, err := f.dockerTransport(ctx, nil, d)
	if err != nil {
		return nil, err
	}
	t := &containerd.Transport{Client: c, Hardening: dt.Hardening, Stderr: os.Stderr}
	if t.Image, err = containerdImage(ctx, c, kt.Docker.Image); err != nil {
		return nil, err
	}
	if kt.Docker.Image == "" {
		for _, m := range images.HostMounts() {
			t.Mounts = append(t.Mounts, docker.Mount{Host: m.Host, Sandbox: m.Sandbox, ReadOnly: true})
		}
	}
	pm, err := f.pathMap(kt.PathMap, cfg.Workspace, true)
	if err != nil {
		return nil, err
	}
	kernel, err := images.Default.Find(ctx, runtime.GOARCH)
	if err != nil {
		return nil, &codeError{code: exitNoKernel, err: err}
	}
	env, diags := environ.Sandbox(os.Environ(), kt.Env, docker.DefaultEnv, pm)
	cfg.Transport, cfg.Kernel, cfg.Env, cfg.PathMap = t, kernel, env, pm
	return diags, nil
}

// containerdImage is the image a containerd sandbox runs: the host image when none is
// named; a named one containerd's namespace holds; else the Docker engine's, loaded.
func containerdImage(ctx context.Context, cl *cdclient.Client, ref string) (string, error) {
	if ref == "" {
		return images.ContainerdHost(ctx, cl, containerd.Namespace, "", "", nil)
	}
	if _, err := cl.GetImage(namespaces.WithNamespace(ctx, containerd.Namespace), ref); err == nil {
		return ref, nil
	}
	cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	cli, err := docker.Connect(cctx)
	cancel()
	if err != nil {
		return "", fmt.Errorf("--transport containerd: containerd's %s namespace has no image %s, and no Docker engine holds one to load (%v): build it, or import it with `ctr -n %s images import`", containerd.Namespace, ref, err, containerd.Namespace)
	}
	defer cli.Close()
	return images.ContainerdFromDocker(ctx, cli, cl, containerd.Namespace, "", ref, nil)
}

// withPool puts the session's transport behind a pool of size warm sandboxes, warmed at once
// for the session's own sandbox and scoped to it: its children claim the rest, and the pool
// is removed when the session's kernel ends.
func withPool(cfg *orchestrator.Config, size int) error {
	cwd, err := filepath.Abs(cfg.Workspace)
	if err != nil {
		return err
	}
	if cfg.PathMap != nil {
		if cwd, err = cfg.PathMap.ToSandbox(cwd); err != nil {
			return err
		}
	}
	p := pool.New(pool.Config{Transport: cfg.Transport, Size: size, Env: docker.DefaultEnv})
	if err := p.Warm(transport.Spec{Kernel: cfg.Kernel, Cwd: cwd, PathMap: cfg.PathMap}); err != nil {
		return err
	}
	cfg.Transport = pool.Scope(p)
	return nil
}
