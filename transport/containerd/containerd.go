// Package containerd starts a kernel in a container through containerd: the same confined
// sandbox as the docker transport (every capability dropped, no new privileges, a read-only
// root, no network, process and memory limits, the default system-call filter), its OCI
// runtime spec built from runtime-spec types, in Paddock's own containerd namespace. The
// kernel binary is bound in read-only, the session's path map is bound, and the kernel's
// standard input and output are the task's I/O. Every container carries labels naming its
// session and its host process, is removed with its session, and a reaper removes the
// containers of host processes that died.
package containerd

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/containerd/containerd/api/types/runc/options"
	"github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/core/snapshots"
	"github.com/containerd/containerd/v2/defaults"
	"github.com/containerd/containerd/v2/pkg/cio"
	"github.com/containerd/containerd/v2/pkg/namespaces"
	"github.com/containerd/errdefs"

	"github.com/paddockhq/paddock/transport"
	"github.com/paddockhq/paddock/transport/docker"
)

var _ transport.Transport = (*Transport)(nil)

// Namespace is the containerd namespace Paddock works in.
const Namespace = "paddock"

// Grace is how long Kill waits after closing the kernel's stdin before it kills the task.
const Grace = docker.Grace

// Sockets are where containerd listens, in the order Connect tries them: the daemon's own
// and the one the Docker engine runs.
var Sockets = []string{"/run/containerd/containerd.sock", "/run/docker/containerd/containerd.sock"}

// DialTimeout bounds each try of Connect: the dial and the first answer.
const DialTimeout = 5 * time.Second

// Connect returns a client of the containerd at address, or of the first of Sockets that
// answers when address is "", after checking it serves.
func Connect(ctx context.Context, address string) (*client.Client, error) {
	addrs := Sockets
	if address != "" {
		addrs = []string{address}
	}
	var errs []error
	for _, a := range addrs {
		if address == "" {
			if _, err := os.Stat(a); err != nil {
				errs = append(errs, err)
				continue
			}
		}
		c, err := client.New(a, client.WithDefaultNamespace(Namespace), client.WithTimeout(DialTimeout))
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", a, err))
			continue
		}
		// The gRPC connection is made lazily and waits for the server to be ready: without a
		// deadline, an address where nothing (or something else) answers waits forever.
		actx, cancel := context.WithTimeout(ctx, DialTimeout)
		ok, err := c.IsServing(namespaces.WithNamespace(actx, Namespace))
		cancel()
		if !ok || err != nil {
			c.Close()
			if actx.Err() != nil && ctx.Err() == nil {
				err = fmt.Errorf("no answer within %v", DialTimeout)
			}
			errs = append(errs, fmt.Errorf("%s does not serve: %v", a, err))
			continue
		}
		return c, nil
	}
	return nil, fmt.Errorf("containerd: no daemon answers: %w", errors.Join(errs...))
}

// Transport starts kernels in containerd containers.
type Transport struct {
	Client *client.Client
	// Image is the image in Paddock's namespace whose root the containers run (the images
	// package loads images there); its entrypoint and command are replaced by the kernel.
	Image string
	// Snapshotter makes the containers' roots; "" is containerd's default.
	Snapshotter string
	// Mounts are bound in besides the path map's mounts: the host image's system
	// directories, say. A path-map mount at the same sandbox path wins.
	Mounts []docker.Mount
	// Hardening confines the containers; the zero value is the hardened default. Network
	// knows none and host.
	Hardening docker.Hardening
	// Stderr receives the kernel's diagnostics; nil discards them.
	Stderr io.Writer
	// Runtime is the OCI runtime the containers run under (kernelTransport.runtime): ""
	// or "runc" containerd's default, "runsc" gVisor, a containerd shim's name, or a
	// runc-compatible program on the PATH (ChooseRuntime).
	Runtime string
	// WrapperDir is where a runtime's wrapper is written; "" is WrapperDir().
	WrapperDir string
	// Log receives the transport's diagnostics; nil discards them.
	Log *slog.Logger
	// NoReap skips the reaper at the first Start.
	NoReap bool

	mu    sync.Mutex
	ready bool // guarded by mu: setup succeeded
	facts Facts
	img   client.Image
	rt    Runtime
	opts  any // the shim's options: the runc shim's binary, or nil
}

// Start creates the kernel's container and task with the kernel's standard streams as the
// task's I/O, and starts it. On any error nothing is left behind.
func (t *Transport) Start(ctx context.Context, spec transport.Spec) (transport.Kernel, error) {
	if t.Client == nil {
		return nil, errors.New("containerd: no client")
	}
	ctx = namespaces.WithNamespace(ctx, Namespace)
	t.mu.Lock()
	if !t.ready {
		// Until it succeeds, each Start sets up again: a cancelled first start does not
		// spoil the transport.
		if err := t.setup(ctx); err != nil {
			t.mu.Unlock()
			return nil, err
		}
		t.ready = true
	}
	t.mu.Unlock()
	var b [4]byte
	_, _ = rand.Read(b[:])
	h := t.Hardening
	h.User = docker.SandboxUser(h.User, docker.OwnerOf(spec))
	if spec.Listen != "" {
		uid, gid, err := user(h.User)
		switch {
		case err != nil:
			return nil, err
		case !transport.ListenAs(int(uid)):
			t.log().Warn("the kernel's user cannot listen in a directory of this process; its session will not outlive this process", "uid", uid)
			spec.Listen, spec.Key = "", ""
		default:
			if err := transport.PrepareListen(spec, int(uid), int(gid)); err != nil {
				return nil, fmt.Errorf("containerd: %w", err)
			}
		}
	}
	p, err := planContainer(spec, Namespace, t.Mounts, h, t.facts, docker.HostLabels(), hex.EncodeToString(b[:]))
	if err != nil {
		return nil, err
	}
	if t.rt.Name != "" {
		p.labels[docker.LabelRuntime] = t.rt.Name
	}

	c, err := t.Client.NewContainer(ctx, p.id,
		client.WithContainerLabels(p.labels),
		client.WithImageName(t.Image),
		client.WithSnapshotter(t.Snapshotter),
		client.WithNewSnapshot(p.id, t.img, snapshots.WithLabels(p.labels)),
		client.WithSpec(p.spec),
		client.WithRuntime(t.rt.Shim, t.opts),
	)
	if err != nil {
		return nil, fmt.Errorf("containerd: create the kernel's container: %w", err)
	}
	ok := false
	defer func() {
		if !ok {
			t.remove(c.ID())
		}
	}()
	if spec.Listen != "" {
		k, err := t.startListening(ctx, c, p.id, spec)
		if err != nil {
			return nil, err
		}
		ok = true
		return k, nil
	}
	stderr := t.Stderr
	if stderr == nil {
		stderr = io.Discard
	}
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	task, err := c.NewTask(ctx, cio.NewCreator(cio.WithStreams(inR, outW, stderr)))
	if err != nil {
		inW.Close()
		return nil, fmt.Errorf("containerd: create the kernel's task: %w", err)
	}
	exited, err := task.Wait(context.WithoutCancel(ctx))
	if err != nil {
		inW.Close()
		return nil, fmt.Errorf("containerd: wait on the kernel's task: %w", err)
	}
	if err := task.Start(ctx); err != nil {
		inW.Close()
		return nil, fmt.Errorf("containerd: start the kernel's task: %w", err)
	}
	ok = true
	k := &kernel{t: t, id: p.id, c: c, task: task, stdin: inW, stdinR: inR, stdout: outR, done: make(chan struct{})}
	go k.wait(exited, outW)
	return k, nil
}

// startListening starts the task of a listening kernel and attaches to it. The task's
// output goes to a log file beside the listening directory, written by containerd's shim:
// the kernel outlives this process, and no stream of it may depend on this process reading.
func (t *Transport) startListening(ctx context.Context, c client.Container, id string, spec transport.Spec) (transport.Kernel, error) {
	logf := spec.Listen + ".log"
	f, err := os.OpenFile(logf, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("containerd: the kernel's log: %w", err)
	}
	f.Close()
	task, err := c.NewTask(ctx, cio.LogFile(logf))
	if err != nil {
		return nil, fmt.Errorf("containerd: create the kernel's task: %w", err)
	}
	if err := task.Start(ctx); err != nil {
		return nil, fmt.Errorf("containerd: start the kernel's task: %w", err)
	}
	return t.attach(ctx, c, task, id, spec)
}

// Reattach connects to the listening kernel of spec.Session, started by an earlier host with
// spec.Listen and still running.
func (t *Transport) Reattach(ctx context.Context, spec transport.Spec) (transport.Kernel, error) {
	if t.Client == nil {
		return nil, errors.New("containerd: no client")
	}
	ctx = namespaces.WithNamespace(ctx, Namespace)
	list, err := t.Client.Containers(ctx, fmt.Sprintf(`labels."%s"==%s,labels."%s"==%s`,
		docker.LabelSession, quoteFilter(spec.Session), docker.LabelListen, quoteFilter(spec.Listen)))
	if err != nil {
		return nil, fmt.Errorf("containerd: find the session's container: %w", err)
	}
	if len(list) != 1 {
		return nil, fmt.Errorf("containerd: %d containers of session %s: %w", len(list), spec.Session, transport.ErrGone)
	}
	c := list[0]
	task, err := c.Task(ctx, nil)
	if err != nil {
		t.remove(c.ID())
		return nil, fmt.Errorf("containerd: the task of session %s: %v: %w", spec.Session, err, transport.ErrGone)
	}
	if st, err := task.Status(ctx); err != nil || st.Status != client.Running {
		t.remove(c.ID())
		return nil, fmt.Errorf("containerd: the task of session %s is %s: %w", spec.Session, st.Status, transport.ErrGone)
	}
	return t.attach(ctx, c, task, c.ID(), spec)
}

// attach connects to the listening kernel of a running task; the container is removed once
// the task ends.
func (t *Transport) attach(ctx context.Context, c client.Container, task client.Task, id string, spec transport.Spec) (transport.Kernel, error) {
	exited, err := task.Wait(namespaces.WithNamespace(context.WithoutCancel(ctx), Namespace))
	if err != nil {
		return nil, fmt.Errorf("containerd: wait on the kernel's task: %w", err)
	}
	k := &kernel{t: t, id: id, c: c, task: task, done: make(chan struct{})}
	ended := make(chan struct{})
	go func() {
		defer close(k.done)
		st := <-exited
		close(ended)
		if code, _, err := st.Result(); err == nil && code != 0 {
			k.err = fmt.Errorf("containerd: the kernel exited with status %d", code)
		}
		if k.listen != nil {
			k.listen.Conn.Close()
		}
		k.t.remove(k.id)
	}()
	actx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	a, err := transport.Attach(actx, spec.Listen, spec.Key, ended)
	if err != nil {
		k.Kill()
		b, _ := os.ReadFile(spec.Listen + ".log")
		return nil, fmt.Errorf("containerd: %w (the kernel said: %s)", err, strings.TrimSpace(lastLines(string(b), 5)))
	}
	k.listen = a
	return transport.Listening(a, k), nil
}

// lastLines is the last n lines of s.
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// setup finds the image and the machine's facts, and reaps once.
func (t *Transport) setup(ctx context.Context) error {
	if t.Image == "" {
		return errors.New("containerd: no image named")
	}
	img, err := t.Client.GetImage(ctx, t.Image)
	if err != nil {
		return fmt.Errorf("containerd: image %s in namespace %s (load it with the images package): %w", t.Image, Namespace, err)
	}
	t.img = img
	if t.Snapshotter == "" {
		t.Snapshotter = defaultSnapshotter
	}
	if ok, err := img.IsUnpacked(ctx, t.Snapshotter); err != nil || !ok {
		if err := img.Unpack(ctx, t.Snapshotter); err != nil {
			return fmt.Errorf("containerd: unpack %s with %s: %w", t.Image, t.Snapshotter, err)
		}
	}
	t.facts = MachineFacts()
	if err := t.chooseRuntime(); err != nil {
		return err
	}
	t.facts.GVisor = t.rt.GVisor
	if !t.NoReap {
		if n, err := Reap(ctx, t.Client); err != nil {
			t.log().Warn("reaper", "err", err)
		} else if n > 0 {
			t.log().Info("reaper removed the containers of host processes that died", "count", n)
		}
	}
	return nil
}

// chooseRuntime decides the containers' runtime and writes its wrapper when it needs one.
func (t *Transport) chooseRuntime() error {
	rt, err := ChooseRuntime(t.Runtime, t.Hardening.Network, exec.LookPath)
	if err != nil {
		return err
	}
	if rt.Wrapper != "" {
		dir := t.WrapperDir
		if dir == "" {
			if dir, err = WrapperDir(); err != nil {
				return fmt.Errorf("containerd: runtime %s: %w", rt.Name, err)
			}
		}
		if rt.Binary, err = writeWrapper(dir, rt.Wrapper); err != nil {
			return fmt.Errorf("containerd: runtime %s: its wrapper: %w", rt.Name, err)
		}
	}
	t.rt, t.opts = rt, nil
	if rt.Binary != "" {
		t.opts = &options.Options{BinaryName: rt.Binary}
	}
	return nil
}

// defaultSnapshotter is containerd's own default on Linux.
const defaultSnapshotter = "overlayfs"

// MachineFacts gathers the facts of this machine the containers' spec depends on.
func MachineFacts() Facts {
	var f Facts
	var st syscall.Statfs_t
	if syscall.Statfs("/sys/fs/cgroup", &st) == nil && st.Type == 0x63677270 { // CGROUP2_SUPER_MAGIC
		f.Cgroup2 = true
	}
	if b, err := os.ReadFile("/proc/self/status"); err == nil && strings.Contains(string(b), "\nSeccomp:") {
		f.Seccomp = true
	}
	return f
}

func (t *Transport) log() *slog.Logger {
	if t.Log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return t.Log
}

// remove removes a container, its task and its snapshot, whatever state they are in.
func (t *Transport) remove(id string) {
	ctx, cancel := context.WithTimeout(namespaces.WithNamespace(context.Background(), Namespace), 30*time.Second)
	defer cancel()
	if err := removeContainer(ctx, t.Client, id); err != nil {
		t.log().Warn("container not removed", "container", id, "err", err)
	}
}

// removeContainer kills and deletes a container's task, then deletes the container and its
// snapshot. A container already gone is no error.
func removeContainer(ctx context.Context, cli *client.Client, id string) error {
	c, err := cli.LoadContainer(ctx, id)
	if errdefs.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if task, err := c.Task(ctx, nil); err == nil {
		var opts []client.ProcessDeleteOpts
		// A task that stopped is not killed first: gVisor refuses to kill a sandbox that
		// has gone, and the delete with it.
		if st, err := task.Status(ctx); err != nil || st.Status != client.Stopped {
			opts = append(opts, client.WithProcessKill)
		}
		if _, err := task.Delete(ctx, opts...); err != nil && !errdefs.IsNotFound(err) {
			return fmt.Errorf("delete task: %w", err)
		}
	} else if !errdefs.IsNotFound(err) {
		return fmt.Errorf("load task: %w", err)
	}
	if err := c.Delete(ctx, client.WithSnapshotCleanup); err != nil && !errdefs.IsNotFound(err) {
		return fmt.Errorf("delete container: %w", err)
	}
	return nil
}

// kernel is one kernel's container and task.
type kernel struct {
	t      *Transport
	id     string
	c      client.Container
	task   client.Task
	stdin  *io.PipeWriter
	stdinR *io.PipeReader
	stdout *io.PipeReader
	listen *transport.Attached // a listening kernel's connection (transport.Listening serves its frames)

	done chan struct{} // closed when the task has ended and the container been removed
	err  error         // set before done closes

	closeIn  sync.Once
	killOnce sync.Once
}

// ID returns the container's id.
func (k *kernel) ID() string { return k.id }

// Relabel sets labels on the kernel's container, keeping the others: a warm kernel takes
// on the session that claims it.
func (k *kernel) Relabel(ctx context.Context, labels map[string]string) error {
	if _, err := k.c.SetLabels(namespaces.WithNamespace(ctx, Namespace), labels); err != nil {
		return fmt.Errorf("containerd: relabel %s: %w", k.id, err)
	}
	return nil
}

func (k *kernel) Stdin() io.WriteCloser { return stdin{k} }
func (k *kernel) Stdout() io.Reader     { return k.stdout }

// stdin writes frames to the task's standard input; closing it ends that input.
type stdin struct{ k *kernel }

func (s stdin) Write(p []byte) (int, error) { return s.k.stdin.Write(p) }
func (s stdin) Close() error {
	s.k.closeIn.Do(func() {
		s.k.stdin.Close()
		ctx, cancel := context.WithTimeout(namespaces.WithNamespace(context.Background(), Namespace), 10*time.Second)
		defer cancel()
		_ = s.k.task.CloseIO(ctx, client.WithStdinCloser)
	})
	return nil
}

// wait waits for the task to end, lets its output drain, then removes the container.
func (k *kernel) wait(exited <-chan client.ExitStatus, out *io.PipeWriter) {
	defer close(k.done)
	st := <-exited
	code, _, err := st.Result()
	switch {
	case err != nil:
		k.err = fmt.Errorf("containerd: waiting for the kernel's task: %w", err)
	case code != 0:
		k.err = fmt.Errorf("containerd: the kernel exited with status %d", code)
	}
	// The output ends with the task; what it held is still read before removal.
	drained := make(chan struct{})
	go func() {
		if io := k.task.IO(); io != nil {
			io.Wait()
		}
		close(drained)
	}()
	select {
	case <-drained:
	case <-time.After(5 * time.Second):
	}
	out.Close()
	k.stdinR.Close() // the copier into the task's input ends
	k.t.remove(k.id)
	if io := k.task.IO(); io != nil {
		io.Close()
	}
}

func (k *kernel) Wait() error {
	<-k.done
	return k.err
}

// Kill closes stdin (the kernel then ends and kills what it started); when the task has not
// ended within Grace it is killed. Either way its container is removed before Kill returns.
func (k *kernel) Kill() error {
	k.killOnce.Do(func() {
		kill := func() {
			ctx, cancel := context.WithTimeout(namespaces.WithNamespace(context.Background(), Namespace), 30*time.Second)
			defer cancel()
			if err := k.task.Kill(ctx, syscall.SIGKILL, client.WithKillAll); err != nil && !errdefs.IsNotFound(err) {
				k.t.log().Warn("task not killed", "container", k.id, "err", err)
			}
		}
		closeInput := func() { stdin{k}.Close() }
		if k.stdin == nil {
			// A listening kernel lives on when its connection ends: TERM ends it, and it
			// kills what it started.
			closeInput = func() {
				if k.listen != nil {
					k.listen.Conn.Close()
				}
				ctx, cancel := context.WithTimeout(namespaces.WithNamespace(context.Background(), Namespace), 30*time.Second)
				defer cancel()
				k.task.Kill(ctx, syscall.SIGTERM)
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
	ctx = namespaces.WithNamespace(ctx, Namespace)
	list, err := cli.Containers(ctx, `labels."`+docker.LabelManaged+`"==1`)
	if err != nil {
		return 0, fmt.Errorf("containerd: list Paddock's containers: %w", err)
	}
	o := docker.Self()
	n := 0
	var errs []error
	for _, c := range list {
		labels, err := c.Labels(ctx)
		if err != nil {
			if !errdefs.IsNotFound(err) {
				errs = append(errs, err)
			}
			continue
		}
		if !docker.Leftover(labels, o) {
			continue
		}
		if err := removeContainer(ctx, cli, c.ID()); err != nil {
			errs = append(errs, fmt.Errorf("remove %s: %w", c.ID(), err))
			continue
		}
		removeFIFOs(defaults.DefaultFIFODir, c.ID())
		n++
	}
	return n, errors.Join(errs...)
}

// removeFIFOs removes the directories of a container's standard-stream FIFOs its dead host
// process left under root: those holding nothing but the container's own FIFOs.
func removeFIFOs(root, id string) {
	matches, _ := filepath.Glob(filepath.Join(root, "*", id+"-stdin"))
	for _, m := range matches {
		dir := filepath.Dir(m)
		entries, err := os.ReadDir(dir)
		if err != nil {
			continue
		}
		ours := true
		for _, e := range entries {
			if !strings.HasPrefix(e.Name(), id+"-") {
				ours = false
			}
		}
		if ours {
			os.RemoveAll(dir)
		}
	}
}

// SessionContainers returns the ids of the containers that carry session's label.
func SessionContainers(ctx context.Context, cli *client.Client, session string) ([]string, error) {
	ctx = namespaces.WithNamespace(ctx, Namespace)
	list, err := cli.Containers(ctx, fmt.Sprintf(`labels."%s"==%s`, docker.LabelSession, quoteFilter(session)))
	if err != nil {
		return nil, err
	}
	ids := make([]string, 0, len(list))
	for _, c := range list {
		ids = append(ids, c.ID())
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
	ctx = namespaces.WithNamespace(ctx, Namespace)
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

// quoteFilter quotes a value for containerd's filter syntax.
func quoteFilter(v string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(v) + `"`
}
