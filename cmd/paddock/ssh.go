package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"

	"github.com/spf13/pflag"

	"github.com/paddockhq/paddock/config"
	"github.com/paddockhq/paddock/images"
	"github.com/paddockhq/paddock/orchestrator"
	"github.com/paddockhq/paddock/transport"
	"github.com/paddockhq/paddock/transport/environ"
	"github.com/paddockhq/paddock/transport/ssh"
)

// The ssh transport's flags, bound to settings keys like the others.
func init() {
	transportKeys["host"] = "kernelTransport.ssh.host"
	transportKeys["kernel-cache"] = "kernelTransport.ssh.kernelCache"
	transportKeys["sync"] = "kernelTransport.ssh.sync"
}

// registerSSH adds the ssh transport's flags.
func registerSSH(fs *pflag.FlagSet) {
	fs.String("host", "", "ssh: the box, an ssh_config alias or [user@]host[:port] (--transport ssh); unix://PATH: the daemon to run in")
	fs.String("kernel-cache", "", "ssh: the directory on the box that keeps kernels (default ~/.cache/paddock/kernel)")
	fs.Bool("sync", false, "ssh: copy the workspace to the box and hand it back at the end, for a box with no shared filesystem")
}

// sshSandboxEnv is the kernel's own environment on a box, before the home.
var sshSandboxEnv = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}

// configureSSH fills in a session on a remote box: the box's kernel, the path map (the
// settings' pathMap or --mount, else the workspace at its own path on a shared filesystem;
// with sync, the box's copy of an isolated workspace), and the environment.
func (f *transportFlags) configureSSH(ctx context.Context, cfg *orchestrator.Config, kt config.KernelTransport) (notes []string, err error) {
	host := kt.SSH.Host
	if host == "" {
		return nil, &usageError{msg: "--transport ssh needs the box: --host HOST or kernelTransport.ssh.host in the global settings"}
	}
	t := &ssh.Transport{Host: host, KernelCache: kt.SSH.KernelCache, Stderr: os.Stderr}
	box, err := t.Box(ctx)
	if err != nil {
		return nil, err
	}
	kernel, err := images.Default.Find(ctx, box.Arch)
	if err != nil {
		return nil, &codeError{code: exitNoKernel, err: err}
	}
	t.Kernels = func(context.Context, string) (string, error) { return kernel, nil }
	if !box.SFTP {
		notes = append(notes, fmt.Sprintf("ssh box %s has no sftp subsystem; files are copied over exec channels (cat, tar)", host))
	}
	var tr transport.Transport = t
	if kt.SSH.Sync {
		st, err := startSync(ctx, t, cfg.Workspace)
		if err != nil {
			return nil, err
		}
		if cfg.PathMap, err = st.sync.PathMap(); err != nil {
			return nil, err
		}
		cfg.Workspace = st.sync.Copy()
		tr = st
		notes = append(notes, fmt.Sprintf("workspace sent to %s:%s; it is handed back when the session ends", host, st.sync.Remote))
	} else if cfg.PathMap, err = f.pathMap(kt.PathMap, cfg.Workspace, true); err != nil {
		return nil, err
	}
	env, diags := environ.Sandbox(os.Environ(), kt.Env, append(sshSandboxEnv, "HOME="+box.Home), cfg.PathMap)
	cfg.Transport, cfg.Kernel, cfg.Env = tr, kernel, env
	return append(notes, diags...), nil
}

// syncTransport is the ssh transport on a synced workspace: when its kernel is killed (the
// session closes), the box's copy is handed back to the parent, once, and the outcome shown.
type syncTransport struct {
	*ssh.Transport
	sync      *ssh.Sync
	out       io.Writer
	once      sync.Once
	conflicts int // set by handback
}

// HandbackConflicts counts the conflicts of the hand-back, once it has run.
func (t *syncTransport) HandbackConflicts() int {
	t.handback()
	return t.conflicts
}

func startSync(ctx context.Context, t *ssh.Transport, parent string) (*syncTransport, error) {
	cache, err := os.UserCacheDir()
	if err != nil {
		return nil, err
	}
	var b [6]byte
	rand.Read(b[:])
	dir := filepath.Join(cache, "paddock", "sync", hex.EncodeToString(b[:]))
	if err := os.MkdirAll(filepath.Dir(dir), 0o700); err != nil {
		return nil, err
	}
	pool := &ssh.Pool{}
	t.Pool = pool
	s, err := ssh.StartSync(ctx, ssh.SyncOptions{Host: t.Host, Pool: pool, Parent: parent, Dir: dir})
	if err != nil {
		return nil, err
	}
	return &syncTransport{Transport: t, sync: s, out: os.Stderr}, nil
}

func (t *syncTransport) Start(ctx context.Context, spec transport.Spec) (transport.Kernel, error) {
	k, err := t.Transport.Start(ctx, spec)
	if err != nil {
		return nil, err
	}
	return &syncKernel{Kernel: k, t: t}, nil
}

func (t *syncTransport) handback() {
	t.once.Do(func() {
		rep, err := t.sync.Handback(context.Background())
		if err != nil {
			fmt.Fprintf(t.out, "paddock: the workspace on %s was not handed back: %v (the local copy is in %s)\n", t.Host, err, t.sync.Dir)
			return
		}
		t.conflicts = rep.Counts.Conflicts
		fmt.Fprintf(t.out, "paddock: workspace handed back from %s: %d changes taken, %d conflicts\n", t.Host, rep.Counts.Taken, rep.Counts.Conflicts)
		for _, c := range rep.Conflicts {
			fmt.Fprintf(t.out, "paddock: conflict: %s (%s); the box's version is in %s\n", c.Path, c.Reason, filepath.Join(t.sync.Dir, c.Saved))
		}
		t.Transport.Pool.Close()
	})
}

type syncKernel struct {
	transport.Kernel
	t *syncTransport
}

// Kill ends the kernel, then hands the workspace back.
func (k *syncKernel) Kill() error {
	err := k.Kernel.Kill()
	k.t.handback()
	return err
}
