package session

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/paddockhq/paddock/config"
	"github.com/paddockhq/paddock/images"
	"github.com/paddockhq/paddock/transport"
	"github.com/paddockhq/paddock/transport/environ"
	"github.com/paddockhq/paddock/transport/ssh"
	"github.com/paddockhq/paddock/workspace"
)

func init() { Register(sshProvider{}) }

type sshProvider struct{}

// DefaultOrphanAfter is how long a kernel listening on a box lives on with no host attached,
// when kernelTransport.ssh.orphanAfter does not say.
const DefaultOrphanAfter = 24 * time.Hour

func (sshProvider) Kind() string       { return "ssh" }
func (sshProvider) Options() []string  { return []string{"kernel-cache", "sync", "egress-via-host"} }
func (sshProvider) EgressPath() string { return EgressConnection }
func (sshProvider) NotApplied() string { return "the kernel runs on the box as its user" }

// sshSandboxEnv is the kernel's own environment on a box, before the home.
var sshSandboxEnv = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}

// Open makes a session on a remote box: the box's kernel, the path map (the settings'
// pathMap or the mounts, else the workspace at its own path on a shared filesystem; with
// sync, the box's copy of an isolated workspace, handed back when the session has closed),
// and the environment.
func (sshProvider) Open(ctx context.Context, r *Request) (*Opened, error) {
	closeClient(r)
	kt := r.Settings.Settings.KernelTransport
	host := kt.SSH.Host
	if host == "" {
		return nil, &OptionError{Msg: "--transport ssh needs the box: --host HOST or kernelTransport.ssh.host in the global settings"}
	}
	orphan := DefaultOrphanAfter
	if a := kt.SSH.OrphanAfter; a != "" {
		d, err := config.ParseDuration(a)
		if err != nil || d < 0 {
			return nil, &OptionError{Msg: fmt.Sprintf("kernelTransport.ssh.orphanAfter: %q is not a duration (24h, 0 for ever)", a)}
		}
		orphan = d
	}
	t := &ssh.Transport{Host: host, KernelCache: kt.SSH.KernelCache, Stderr: r.Stderr, OrphanAfter: orphan}
	box, err := t.Box(ctx)
	if err != nil {
		return nil, err
	}
	kernel, err := images.Default.Find(ctx, box.Arch)
	if err != nil {
		return nil, err
	}
	t.Kernels = func(context.Context, string) (string, error) { return kernel, nil }
	op := &Opened{Transport: t, Kernel: kernel, Egress: EgressConnection, EgressListen: t.ListenEgress}
	if !box.SFTP {
		op.Notices = append(op.Notices, fmt.Sprintf("ssh box %s has no sftp subsystem; files are copied over exec channels (cat, tar)", host))
	}
	// A session taken up again was synced when its first opening gave what to resume by,
	// whatever the settings say now: its kernel works in the box's copy.
	if kt.SSH.Sync || r.Resume != "" {
		s, err := startSync(ctx, t, r.Workspace, r.Resume)
		if err != nil {
			return nil, err
		}
		op.Resume = s.Dir
		if op.PathMap, err = s.PathMap(); err != nil {
			t.Pool.Close()
			return nil, err
		}
		op.Workspace = s.Copy()
		op.Close = func(ctx context.Context) (*workspace.Report, error) {
			defer t.Pool.Close()
			rep, err := s.Handback(ctx)
			if err != nil && rep == nil {
				return nil, &HandbackError{Host: host, Copy: s.Dir, Err: err}
			}
			return rep, err // handed back, perhaps with the box's copy left there
		}
		op.Notices = append(op.Notices, fmt.Sprintf("workspace sent to %s:%s; it is handed back when the session ends", host, s.Remote))
	} else if op.PathMap, err = pathMap(r, true); err != nil {
		return nil, err
	}
	var diags []string
	op.Env, diags = environ.Sandbox(r.Environ, kt.Env, append(sshSandboxEnv, "HOME="+box.Home), op.PathMap)
	op.Notices = append(op.Notices, diags...)
	return op, nil
}

// startSync copies the workspace to the box, keeping the local state of the copy in a fresh
// directory of the user's cache; resume, when set, is such a directory of a session a host
// that died opened, whose copy on the box is taken up instead.
func startSync(ctx context.Context, t *ssh.Transport, parent, resume string) (*ssh.Sync, error) {
	cache, err := os.UserCacheDir()
	if err != nil {
		return nil, err
	}
	if resume != "" {
		if b := filepath.Base(resume); filepath.Dir(resume) != filepath.Join(cache, "paddock", "sync") || b == "." || b == ".." {
			return nil, fmt.Errorf("ssh: sync: %s is no synced workspace of this user's", resume)
		}
		t.Pool = &ssh.Pool{}
		s, err := ssh.ResumeSync(resume, t.Host, t.Pool)
		if err != nil {
			t.Pool.Close()
		}
		return s, err
	}
	var b [6]byte
	rand.Read(b[:])
	dir := filepath.Join(cache, "paddock", "sync", hex.EncodeToString(b[:]))
	if err := os.MkdirAll(filepath.Dir(dir), 0o700); err != nil {
		return nil, err
	}
	t.Pool = &ssh.Pool{}
	s, err := ssh.StartSync(ctx, ssh.SyncOptions{Host: t.Host, Pool: t.Pool, Parent: parent, Dir: dir})
	if err != nil {
		t.Pool.Close()
		return nil, err
	}
	return s, nil
}

// Recover ends the kernel a session left listening on its box when the session cannot be
// taken up (its opening fails: its settings, its synced copy's local state): no kernel, and
// no job of an agent's, runs on a box with no host to answer for it. The box is the one
// the session's request and the settings name now.
func (sshProvider) Recover(ctx context.Context, l Left) string {
	if l.Kernel.Key == "" || l.Request == nil {
		return ""
	}
	o, _, err := FromRequest(*l.Request)
	if err != nil {
		return "its kernel on the box was not ended: " + oneLine(err)
	}
	s, err := Load(o)
	if err != nil {
		return "its kernel on the box was not ended: " + oneLine(err)
	}
	kt := s.Settings.KernelTransport.SSH
	if kt.Host == "" {
		return "its kernel on the box was not ended: no box is named now"
	}
	ctx, cancel := context.WithTimeout(ctx, reapTimeout)
	defer cancel()
	t := &ssh.Transport{Host: kt.Host, KernelCache: kt.KernelCache}
	defer t.Close()
	k, err := t.Reattach(ctx, l.Kernel)
	switch {
	case errors.Is(err, transport.ErrGone):
		return ""
	case err != nil:
		return fmt.Sprintf("its kernel on %s could not be reached to be ended: %v", kt.Host, oneLine(err))
	}
	k.Kill()
	return fmt.Sprintf("its kernel on %s was ended", kt.Host)
}
func (sshProvider) Reap(context.Context) (int, error) { return 0, nil }

// Check has nothing to check without a box: `paddock run --transport ssh` says what it finds.
func (sshProvider) Check(context.Context) Check { return Check{} }

// HandbackError is a synced workspace that could not be handed back: the box's copy is kept
// locally in Copy.
type HandbackError struct {
	Host, Copy string
	Err        error
}

func (e *HandbackError) Error() string {
	return fmt.Sprintf("the workspace on %s was not handed back: %v (the local copy is in %s)", e.Host, e.Err, e.Copy)
}
func (e *HandbackError) Unwrap() error { return e.Err }
