// Package docker starts a kernel in a Docker container through the Docker Engine API: a
// container from an image with the kernel binary bound in read-only (the kernel is static, so
// any Linux image works), the session's path map bound, and the container's standard input
// and output attached for frames. The container is confined by default (Hardening); it
// carries labels naming its session and its host process, is removed with its session, and a
// reaper removes the containers of host processes that died.
package docker

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	cerrdefs "github.com/containerd/errdefs"

	"github.com/docker/docker/api/types"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/client"
	"github.com/docker/docker/pkg/stdcopy"

	"github.com/paddockhq/paddock/transport"
)

var _ transport.Transport = (*Transport)(nil)

// Grace is how long Kill waits after closing the kernel's stdin before it kills the
// container.
const Grace = 2 * time.Second

// Connect returns a client of the engine named by the environment (DOCKER_HOST and the
// rest, else the local socket), with its API version negotiated, after checking the engine
// answers.
func Connect(ctx context.Context) (*client.Client, error) { return ConnectTo(ctx, "") }

// ConnectTo is Connect to the engine at host (unix:///run/podman/podman.sock, say: Podman's
// Docker-compatible service); "" is the environment's.
func ConnectTo(ctx context.Context, host string) (*client.Client, error) {
	opts := []client.Opt{client.FromEnv, client.WithAPIVersionNegotiation()}
	if host != "" {
		opts = append(opts, client.WithHost(host))
	}
	cli, err := client.NewClientWithOpts(opts...)
	if err != nil {
		return nil, fmt.Errorf("docker: %w", err)
	}
	if _, err := cli.Ping(ctx); err != nil {
		cli.Close()
		return nil, fmt.Errorf("docker: the engine does not answer: %w", err)
	}
	cli.NegotiateAPIVersion(ctx)
	return cli, nil
}

// Transport starts kernels in containers.
type Transport struct {
	Client *client.Client
	// Image is the image the containers run; its own entrypoint and command are replaced by
	// the kernel.
	Image string
	// Mounts are bound in besides the path map's mounts: the host image's system
	// directories, say. A path-map mount at the same sandbox path wins.
	Mounts []Mount
	// Hardening confines the containers; the zero value is the hardened default.
	Hardening Hardening
	// Stderr receives the kernel's diagnostics; nil discards them.
	Stderr io.Writer
	// Log receives the transport's diagnostics; nil discards them.
	Log *slog.Logger
	// Runtime is the OCI runtime the containers run under, as the engine registered it
	// (runsc, say: daemon.json's runtimes); "" is the engine's default. Podman's
	// Docker-compatible service ignores it and runs its own default runtime (4.3.1): a
	// caller checks that one against it (session does).
	Runtime string
	// NoReap skips the reaper at the first Start.
	NoReap bool

	reapOnce sync.Once
}

// Start creates the kernel's container, attaches its standard streams and starts it. On
// any error nothing is left behind.
func (t *Transport) Start(ctx context.Context, spec transport.Spec) (transport.Kernel, error) {
	if t.Client == nil {
		return nil, errors.New("docker: no client")
	}
	if !t.NoReap {
		t.reapOnce.Do(func() {
			if n, err := Reap(ctx, t.Client); err != nil {
				t.log().Warn("reaper", "err", err)
			} else if n > 0 {
				t.log().Info("reaper removed the containers of host processes that died", "count", n)
			}
		})
	}
	var b [4]byte
	_, _ = rand.Read(b[:])
	h := t.Hardening
	h.User = SandboxUser(h.User, OwnerOf(spec))
	if spec.Listen != "" {
		if uid, gid := t.kernelUser(ctx, h.User); !transport.ListenAs(uid) {
			t.log().Warn("the kernel's user cannot listen in a directory of this process; its session will not outlive this process",
				"user", h.User, "image", t.Image, "uid", uid)
			spec.Listen, spec.Key = "", ""
		} else if err := transport.PrepareListen(spec, uid, gid); err != nil {
			return nil, fmt.Errorf("docker: %w", err)
		}
	}
	p, err := planContainer(spec, t.Image, t.Mounts, h, selfLabels(), hex.EncodeToString(b[:]))
	if err != nil {
		return nil, err
	}
	if t.Runtime != "" {
		p.host.Runtime = t.Runtime
		p.config.Labels[LabelRuntime] = t.Runtime
	}
	t0 := time.Now()
	created, err := t.Client.ContainerCreate(ctx, p.config, p.host, nil, nil, p.name)
	if err != nil {
		return nil, fmt.Errorf("docker: create the kernel's container: %w", err)
	}
	id := created.ID
	ok := false
	defer func() {
		if !ok {
			t.remove(id)
		}
	}()
	t1 := time.Now()
	if spec.Listen != "" {
		if err := t.Client.ContainerStart(ctx, id, container.StartOptions{}); err != nil {
			return nil, fmt.Errorf("docker: start the kernel's container: %w", err)
		}
		k, err := t.attach(ctx, id, spec)
		if err != nil {
			return nil, err
		}
		ok = true
		t.log().Debug("listening kernel container started", "container", id, "create", t1.Sub(t0), "start", time.Since(t1))
		return k, nil
	}
	att, err := t.Client.ContainerAttach(ctx, id, container.AttachOptions{Stream: true, Stdin: true, Stdout: true, Stderr: true})
	if err != nil {
		return nil, fmt.Errorf("docker: attach to the kernel's container: %w", err)
	}
	if err := t.Client.ContainerStart(ctx, id, container.StartOptions{}); err != nil {
		att.Close()
		return nil, fmt.Errorf("docker: start the kernel's container: %w", err)
	}
	ok = true
	t.log().Debug("kernel container started", "container", id, "create", t1.Sub(t0), "start", time.Since(t1))
	stderr := t.Stderr
	if stderr == nil {
		stderr = io.Discard
	}
	pr, pw := io.Pipe()
	k := &kernel{t: t, id: id, att: att, stdout: pr, done: make(chan struct{}), copied: make(chan struct{})}
	go func() { // the demultiplexer: stdout to the frames' reader, stderr to Stderr
		_, err := stdcopy.StdCopy(pw, stderr, att.Reader)
		pw.CloseWithError(err)
		close(k.copied)
	}()
	go k.wait()
	return k, nil
}

// Reattach connects to the listening kernel of spec.Session, started by an earlier host with
// spec.Listen and still running.
func (t *Transport) Reattach(ctx context.Context, spec transport.Spec) (transport.Kernel, error) {
	if t.Client == nil {
		return nil, errors.New("docker: no client")
	}
	list, err := t.Client.ContainerList(ctx, container.ListOptions{All: true, Filters: filters.NewArgs(
		filters.Arg("label", LabelSession+"="+spec.Session), filters.Arg("label", LabelListen+"="+spec.Listen))})
	if err != nil {
		return nil, fmt.Errorf("docker: find the session's container: %w", err)
	}
	if len(list) != 1 {
		return nil, fmt.Errorf("docker: %d containers of session %s: %w", len(list), spec.Session, transport.ErrGone)
	}
	if c := list[0]; c.State != "running" {
		t.remove(c.ID)
		return nil, fmt.Errorf("docker: the container of session %s is %s: %w", spec.Session, c.State, transport.ErrGone)
	}
	return t.attach(ctx, list[0].ID, spec)
}

// attach connects to the listening kernel of a running container; the container is removed
// once it ends.
func (t *Transport) attach(ctx context.Context, id string, spec transport.Spec) (transport.Kernel, error) {
	k := &kernel{t: t, id: id, done: make(chan struct{}), copied: make(chan struct{})}
	close(k.copied)
	go k.wait()
	actx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	a, err := transport.Attach(actx, spec.Listen, spec.Key, k.done)
	if err != nil {
		k.Kill()
		return nil, fmt.Errorf("docker: %w%s", err, t.logsOf(id))
	}
	k.listen = a
	return transport.Listening(a, k), nil
}

// logsOf is the end of a container's output, for an error about it.
func (t *Transport) logsOf(id string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	r, err := t.Client.ContainerLogs(ctx, id, container.LogsOptions{ShowStdout: true, ShowStderr: true, Tail: "5"})
	if err != nil {
		return ""
	}
	defer r.Close()
	var out strings.Builder
	stdcopy.StdCopy(&out, &out, io.LimitReader(r, 4096))
	if s := strings.TrimSpace(out.String()); s != "" {
		return " (the kernel said: " + s + ")"
	}
	return ""
}

// kernelUser is the uid and gid the kernel runs as: u, else the image's user; -1 for a
// name, which only the image can resolve.
func (t *Transport) kernelUser(ctx context.Context, u string) (int, int) {
	if u == "" {
		img, err := t.Client.ImageInspect(ctx, t.Image)
		if err != nil {
			return -1, -1
		}
		if img.Config != nil {
			u = img.Config.User
		}
	}
	if u == "" || u == "root" {
		return 0, 0
	}
	return numericUser(u)
}

// numericUser is the uid and gid of a user named by number ("uid" or "uid:gid"); -1 for a
// name, which only the image can resolve.
func numericUser(u string) (int, int) {
	if u == "" {
		return -1, -1
	}
	us, gs, hasGID := strings.Cut(u, ":")
	uid, err := strconv.Atoi(us)
	if err != nil {
		return -1, -1
	}
	gid := -1
	if hasGID {
		if g, err := strconv.Atoi(gs); err == nil {
			gid = g
		}
	}
	return uid, gid
}

func (t *Transport) log() *slog.Logger {
	if t.Log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return t.Log
}

// remove removes a container and what it holds, whatever state it is in.
func (t *Transport) remove(id string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := removeContainer(ctx, t.Client, id); err != nil {
		t.log().Warn("container not removed", "container", id, "err", err)
	}
}

// kernel is one kernel's container.
type kernel struct {
	t      *Transport
	id     string
	att    types.HijackedResponse // frames over the attached standard streams, or
	listen *transport.Attached    // or over a listening kernel's socket (transport.Listening serves them)
	stdout *io.PipeReader

	done   chan struct{} // closed when the container has ended and been removed
	err    error         // set before done closes
	copied chan struct{} // closed when the output stream has ended

	closeIn  sync.Once
	killOnce sync.Once
}

// ID returns the container's id.
func (k *kernel) ID() string { return k.id }

func (k *kernel) Stdin() io.WriteCloser { return stdin{k} }
func (k *kernel) Stdout() io.Reader     { return k.stdout }

// stdin writes frames to the attached connection; closing it half-closes the connection,
// which ends the container's standard input.
type stdin struct{ k *kernel }

func (s stdin) Write(p []byte) (int, error) { return s.k.att.Conn.Write(p) }
func (s stdin) Close() error {
	var err error
	s.k.closeIn.Do(func() { err = s.k.att.CloseWrite() })
	return err
}

// wait waits for the container to end, then removes it.
func (k *kernel) wait() {
	defer close(k.done)
	ch, errc := k.t.Client.ContainerWait(context.Background(), k.id, container.WaitConditionNotRunning)
	select {
	case r := <-ch:
		switch {
		case r.Error != nil:
			k.err = fmt.Errorf("docker: kernel's container: %s", r.Error.Message)
		case r.StatusCode != 0:
			k.err = fmt.Errorf("docker: the kernel exited with status %d", r.StatusCode)
		}
	case err := <-errc:
		k.err = fmt.Errorf("docker: waiting for the kernel's container: %w", err)
	}
	// The stream ends with the container; what it held is still read before removal.
	select {
	case <-k.copied:
	case <-time.After(5 * time.Second):
	}
	k.t.remove(k.id)
	if k.listen != nil {
		k.listen.Conn.Close()
	} else if k.att.Conn != nil {
		k.att.Close()
	}
}

func (k *kernel) Wait() error {
	<-k.done
	return k.err
}

// Kill closes stdin (the kernel then ends and kills what it started); when the container
// has not ended within Grace it is killed. Either way it is removed before Kill returns.
func (k *kernel) Kill() error {
	k.killOnce.Do(func() {
		kill := func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if err := k.t.Client.ContainerKill(ctx, k.id, "KILL"); err != nil && !notFound(err) {
				k.t.log().Warn("container not killed", "container", k.id, "err", err)
			}
		}
		closeInput := func() { stdin{k}.Close() }
		if k.listen != nil {
			// A listening kernel lives on when its connection ends: TERM ends it, and it
			// kills what it started.
			closeInput = func() {
				k.listen.Conn.Close()
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				k.t.Client.ContainerKill(ctx, k.id, "TERM")
			}
		}
		if !transport.Stop(k.done, closeInput, kill, Grace, 30*time.Second) {
			k.t.remove(k.id)
		}
	})
	return nil
}

// Reap removes the containers of host processes of this machine that died, and returns how
// many it removed.
func Reap(ctx context.Context, cli *client.Client) (int, error) {
	list, err := cli.ContainerList(ctx, container.ListOptions{All: true, Filters: filters.NewArgs(filters.Arg("label", LabelManaged+"=1"))})
	if err != nil {
		return 0, fmt.Errorf("docker: list Paddock's containers: %w", err)
	}
	o := self()
	n := 0
	var errs []error
	for _, c := range list {
		if !Leftover(c.Labels, o) {
			continue
		}
		if err := removeContainer(ctx, cli, c.ID); err != nil {
			errs = append(errs, fmt.Errorf("remove %s: %w", c.ID, err))
			continue
		}
		n++
	}
	return n, errors.Join(errs...)
}

// SessionContainers returns the ids of the containers that carry session's label.
func SessionContainers(ctx context.Context, cli *client.Client, session string) ([]string, error) {
	list, err := cli.ContainerList(ctx, container.ListOptions{All: true, Filters: filters.NewArgs(filters.Arg("label", LabelSession+"="+session))})
	if err != nil {
		return nil, err
	}
	ids := make([]string, 0, len(list))
	for _, c := range list {
		ids = append(ids, c.ID)
	}
	return ids, nil
}

// RemoveSession removes every container of a session, whatever its state, and returns how
// many it removed.
func RemoveSession(ctx context.Context, cli *client.Client, session string) (int, error) {
	ids, err := SessionContainers(ctx, cli, session)
	if err != nil {
		return 0, err
	}
	n := 0
	var errs []error
	for _, id := range ids {
		if err := removeContainer(ctx, cli, id); err != nil {
			errs = append(errs, err)
			continue
		}
		n++
	}
	return n, errors.Join(errs...)
}

func notFound(err error) bool {
	return err != nil && (cerrdefs.IsNotFound(err) || removing(err))
}

// removing reports whether err says another client is removing the container already.
func removing(err error) bool {
	return strings.Contains(err.Error(), "is already in progress")
}

// stopRaced reports Podman's refusal of a forced removal of a container that stopped while
// it was being killed ("could not be stopped: sending SIGKILL …: container state improper:
// stopped"): tried again, the removal finds it stopped and needs no kill.
func stopRaced(err error) bool {
	s := err.Error()
	return strings.Contains(s, "could not be stopped") && strings.Contains(s, "container state improper")
}

// removeContainer removes a container and what it holds, whatever state it is in. When
// another client (a second reaper, the engine's own auto-removal) is removing it already,
// it returns once the container is gone, so that a caller counting it as removed is right.
// The engines send no event that both Docker and Podman agree on for the end of a
// removal, so the container is looked for until it is gone (or ctx ends).
func removeContainer(ctx context.Context, cli *client.Client, id string) error {
	err := cli.ContainerRemove(ctx, id, container.RemoveOptions{Force: true, RemoveVolumes: true})
	for tries := 0; err != nil && stopRaced(err) && tries < 3; tries++ {
		err = cli.ContainerRemove(ctx, id, container.RemoveOptions{Force: true, RemoveVolumes: true})
	}
	if err == nil || cerrdefs.IsNotFound(err) {
		return nil
	}
	if !removing(err) {
		return err
	}
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		if _, err := cli.ContainerInspect(ctx, id); cerrdefs.IsNotFound(err) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("container %s: removal by another client did not end: %w", id, ctx.Err())
		case <-tick.C:
		}
	}
}

// self returns the reaper's view of this process's machine.
func self() Owner {
	return Owner{Machine: machineID(), Boot: bootID(), PIDNS: pidNS(), Alive: alive, Waiting: func(dir string) bool {
		fi, err := os.Stat(dir)
		return err == nil && fi.IsDir()
	}}
}

// selfLabels are the labels that name this host process.
func selfLabels() map[string]string {
	pid := os.Getpid()
	return map[string]string{
		LabelMachine: machineID(),
		LabelBoot:    bootID(),
		LabelPID:     strconv.Itoa(pid),
		LabelStart:   startTime(pid),
		LabelPIDNS:   pidNS(),
	}
}

// pidNS is this process's pid namespace, as its inode number, or "" when it cannot be read.
func pidNS() string {
	l, err := os.Readlink("/proc/self/ns/pid") // pid:[4026531836]
	if err != nil {
		return ""
	}
	n, ok := strings.CutPrefix(l, "pid:[")
	n, ok2 := strings.CutSuffix(n, "]")
	if !ok || !ok2 {
		return ""
	}
	return n
}

func machineID() string {
	for _, f := range []string{"/etc/machine-id", "/var/lib/dbus/machine-id"} {
		if b, err := os.ReadFile(f); err == nil && len(strings.TrimSpace(string(b))) > 0 {
			return strings.TrimSpace(string(b))
		}
	}
	h, _ := os.Hostname()
	return h
}

func bootID() string {
	b, _ := os.ReadFile("/proc/sys/kernel/random/boot_id")
	return strings.TrimSpace(string(b))
}

// startTime is a process's start time in clock ticks since boot (field 22 of
// /proc/PID/stat), or "" when it cannot be read.
func startTime(pid int) string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return ""
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return ""
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 20 {
		return ""
	}
	return f[19]
}

// alive reports whether pid runs and, when start is known, started then.
func alive(pid int, start string) bool {
	now := startTime(pid)
	if now == "" {
		return false
	}
	return start == "" || now == start
}
