package main

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strings"
	"time"

	"github.com/docker/docker/client"
	"github.com/docker/go-units"
	"github.com/spf13/pflag"
	"mvdan.cc/sh/v3/shell"

	"github.com/paddockhq/paddock/config"
	"github.com/paddockhq/paddock/images"
	"github.com/paddockhq/paddock/orchestrator"
	"github.com/paddockhq/paddock/transport/docker"
	"github.com/paddockhq/paddock/transport/environ"
	"github.com/paddockhq/paddock/transport/local"
	"github.com/paddockhq/paddock/transport/pathmap"
	"github.com/paddockhq/paddock/transport/wrapped"
)

// transportFlags are the flags that choose and configure the transport of a command's
// session. Most are bound to a settings key (transportKeys), so the settings hold the flag's
// value when it was given and the settings' otherwise; the rest have no settings key yet
// and are read here.
type transportFlags struct {
	capAdd        []string
	newPrivileges bool
	noTmpfs       bool
	mounts        []string
	wrap          string

	fs *pflag.FlagSet // the flags registered: which were given
}

// transportKeys binds the transport flags to settings keys.
var transportKeys = map[string]string{
	"transport":     "kernelTransport.kind",
	"image":         "kernelTransport.docker.image",
	"network":       "kernelTransport.docker.network",
	"memory":        "kernelTransport.docker.memory",
	"pids-limit":    "kernelTransport.docker.pids",
	"user":          "kernelTransport.docker.user",
	"writable-root": "kernelTransport.docker.writableRoot",
	"env":           "kernelTransport.env",
	"kernel-path":   "kernelTransport.wrapped.kernelPath",
}

func (f *transportFlags) register(fs *pflag.FlagSet) {
	f.fs = fs
	fs.String("transport", "", "where the kernel runs: docker, containerd, wrapped, ssh or local (default: docker when an engine is reachable, else local)")
	fs.String("image", "", "docker: the image the sandbox runs (default: the host image, the host's system directories read-only)")
	fs.String("network", "", "docker: the sandbox's network, e.g. bridge (default: none)")
	fs.String("memory", "", "docker: the sandbox's memory limit, e.g. 2g; -1: none (default 2g)")
	fs.Int64("pids-limit", 0, "docker: the sandbox's process limit; -1: none (default 1024)")
	fs.String("user", "", "docker: the user the kernel runs as, uid[:gid] (default: the image's)")
	fs.Bool("writable-root", false, "docker: leave the sandbox's root filesystem writable (default: read-only)")
	fs.StringSliceVar(&f.capAdd, "cap-add", nil, "docker: a capability the sandbox keeps (default: none; repeatable)")
	fs.BoolVar(&f.newPrivileges, "new-privileges", false, "docker: leave the engine's no-new-privileges flag off (the kernel sets no_new_privs on itself all the same)")
	fs.BoolVar(&f.noTmpfs, "no-tmpfs", false, "docker: no private tmpfs at /tmp")
	fs.StringSlice("env", nil, "host variables passed into a sandbox (credentials never are; repeatable)")
	fs.StringArrayVar(&f.mounts, "mount", nil, "HOST:SANDBOX[:ro], a directory both sides see (default for docker: the workspace at its own path; repeatable)")
	fs.StringVar(&f.wrap, "wrap", "", `wrapped: the wrapper command, e.g. "docker exec -i box"`)
	fs.String("kernel-path", "", "wrapped: the kernel binary's path in the sandbox (default: the host's)")
	registerSSH(fs)
	registerPool(fs)
}

// configure fills in the transport part of a session's configuration from the settings,
// and the file-access host requests over its path map. notice, when set, is what to show
// the user (why a default was not taken, variables left out).
func (f *transportFlags) configure(ctx context.Context, cfg *orchestrator.Config, s *config.Settings) (notice string, err error) {
	kt := s.KernelTransport
	kind := kt.Kind
	var cli *client.Client
	if kind == "" {
		cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		c, err := docker.Connect(cctx)
		cancel()
		if err != nil {
			kind = "local"
			notice = fmt.Sprintf("no Docker engine reachable (%v): the kernel runs locally, unconfined; `paddock doctor` says what to fix", oneLine(err))
		} else {
			kind, cli = "docker", c
		}
	}
	var notes []string
	if notice != "" {
		notes = append(notes, notice)
	}
	if f.fs != nil {
		if err := refusedFlags(kind, f.fs.Changed); err != nil {
			if notice != "" { // the kind was not asked for: say why it is this one
				err.msg += "\n" + notice
			}
			return "", err
		}
	}
	switch kind {
	case "local":
		kernel, err := images.Default.Find(ctx, runtime.GOARCH)
		if err != nil {
			return "", &codeError{code: exitNoKernel, err: err}
		}
		cfg.Transport = &local.Transport{Stderr: os.Stderr}
		cfg.Kernel = kernel
		cfg.Env = environ.Local(os.Environ())
	case "docker":
		if cli == nil {
			if cli, err = docker.Connect(ctx); err != nil {
				return "", fmt.Errorf("--transport docker: %w (run `paddock doctor`)", err)
			}
		}
		t, err := f.dockerTransport(ctx, cli, kt.Docker)
		if err != nil {
			return "", err
		}
		pm, err := f.pathMap(kt.PathMap, cfg.Workspace, true)
		if err != nil {
			return "", err
		}
		kernel, err := images.Default.Find(ctx, engineArch(ctx, cli))
		if err != nil {
			return "", &codeError{code: exitNoKernel, err: err}
		}
		env, diags := environ.Sandbox(os.Environ(), kt.Env, docker.DefaultEnv, pm)
		notes = append(notes, diags...)
		cfg.Transport, cfg.Kernel, cfg.Env, cfg.PathMap = t, kernel, env, pm
	case "wrapped":
		prefix := kt.Wrapped.ArgvPrefix
		if f.wrap != "" {
			if prefix, err = shell.Fields(f.wrap, func(string) string { return "" }); err != nil {
				return "", &usageError{msg: "--wrap: " + err.Error()}
			}
		}
		if len(prefix) == 0 {
			return "", &usageError{msg: `--transport wrapped needs the wrapper command: --wrap "docker exec -i box" or kernelTransport.wrapped.argvPrefix`}
		}
		kernel, err := images.Default.Find(ctx, runtime.GOARCH)
		if err != nil {
			return "", &codeError{code: exitNoKernel, err: err}
		}
		pm, err := f.pathMap(kt.PathMap, cfg.Workspace, false)
		if err != nil {
			return "", err
		}
		env, diags := environ.Sandbox(os.Environ(), kt.Env, docker.DefaultEnv, pm)
		notes = append(notes, diags...)
		cfg.Transport = &wrapped.Transport{ArgvPrefix: prefix, KernelPath: kt.Wrapped.KernelPath, Stderr: os.Stderr}
		cfg.Kernel, cfg.Env, cfg.PathMap = kernel, env, pm
	case "containerd":
		diags, err := f.configureContainerd(ctx, cfg, kt)
		if err != nil {
			return "", err
		}
		notes = append(notes, diags...)
	case "ssh":
		ssh, err := f.configureSSH(ctx, cfg, kt)
		if err != nil {
			return "", err
		}
		notes = append(notes, ssh...)
	default:
		return "", &usageError{msg: fmt.Sprintf("unknown transport %q (docker, containerd, wrapped, ssh or local)", kind)}
	}
	if n := kt.Docker.Pool; n > 0 {
		if kind != "docker" && kind != "containerd" {
			notes = append(notes, fmt.Sprintf("--pool keeps docker and containerd sandboxes; the %s transport starts its kernels as asked", kind))
		} else if err := withPool(cfg, n); err != nil {
			return "", err
		}
	}
	// A fresh container is removed at its end: a path under no mount is the sandbox's alone.
	// (The session serves fs.read and fs.write itself, over cfg.PathMap.)
	cfg.Ephemeral = kind == "docker" || kind == "containerd"
	return strings.Join(notes, "\npaddock: "), nil
}

// dockerTransport is the docker transport the settings and flags describe: the named image,
// or the host image with the host's system directories.
func (f *transportFlags) dockerTransport(ctx context.Context, cli *client.Client, d config.Docker) (*docker.Transport, error) {
	h := docker.Hardening{
		CapAdd:        f.capAdd,
		NewPrivileges: f.newPrivileges,
		Network:       d.Network,
		Pids:          d.Pids,
		WritableRoot:  d.WritableRoot,
		NoTmpfs:       f.noTmpfs,
		User:          d.User,
	}
	switch m := strings.TrimSpace(d.Memory); m {
	case "", "0":
	case "-1", "none", "unlimited":
		h.Memory = -1
	default:
		n, err := units.RAMInBytes(m)
		if err != nil || n <= 0 {
			return nil, &usageError{msg: fmt.Sprintf("memory %q: a size such as 512m or 2g, or -1", m)}
		}
		h.Memory = n
	}
	t := &docker.Transport{Client: cli, Image: d.Image, Hardening: h, Stderr: os.Stderr}
	if t.Image == "" {
		ref, err := images.Host(ctx, cli, "", nil)
		if err != nil {
			return nil, err
		}
		t.Image = ref
		for _, m := range images.HostMounts() {
			t.Mounts = append(t.Mounts, docker.Mount{Host: m.Host, Sandbox: m.Sandbox, ReadOnly: true})
		}
	}
	return t, nil
}

// pathMap is the session's path map: --mount flags, else the settings' pathMap, else (when
// sameDefault) the workspace at its own path, else nil (the sandbox sees the host's paths).
func (f *transportFlags) pathMap(set []pathmap.Mount, workspace string, sameDefault bool) (*pathmap.Map, error) {
	mounts := set
	if len(f.mounts) > 0 {
		mounts = nil
		for _, m := range f.mounts {
			parts := strings.Split(m, ":")
			if len(parts) < 2 || len(parts) > 3 || len(parts) == 3 && parts[2] != "ro" && parts[2] != "rw" {
				return nil, &usageError{msg: fmt.Sprintf("--mount %q: HOST:SANDBOX or HOST:SANDBOX:ro", m)}
			}
			mounts = append(mounts, pathmap.Mount{Host: parts[0], Sandbox: parts[1], ReadOnly: len(parts) == 3 && parts[2] == "ro"})
		}
	}
	if len(mounts) == 0 {
		if !sameDefault {
			return nil, nil
		}
		mounts = []pathmap.Mount{{Host: workspace, Sandbox: workspace}}
	}
	pm, err := pathmap.New(mounts...)
	if err != nil {
		return nil, &usageError{msg: "path map: " + err.Error()}
	}
	return pm, nil
}

// engineArch is the engine's architecture as Go names it; the host's when it cannot say.
func engineArch(ctx context.Context, cli *client.Client) string {
	info, err := cli.Info(ctx)
	if err != nil {
		return runtime.GOARCH
	}
	switch info.Architecture {
	case "x86_64", "amd64":
		return "amd64"
	case "aarch64", "arm64":
		return "arm64"
	case "armv7l", "arm":
		return "arm"
	case "s390x", "ppc64le", "riscv64":
		return info.Architecture
	}
	return runtime.GOARCH
}

// oneLine is an error's first line.
func oneLine(err error) string {
	s, _, _ := strings.Cut(err.Error(), "\n")
	return s
}
