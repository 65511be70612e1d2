package kubernetes

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/watch"
	k8s "k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/remotecommand"

	"github.com/paddockhq/paddock/transport"
)

// A kernel in a pod that outlives its host. Started with Spec.Listen, the pod's first
// process becomes the kernel, listening on a unix socket in an emptyDir of the pod
// (transport.ListenDir), once the host has streamed it in and written its key there (a
// file the kernel removes once read). Nothing of the host's is mounted: the pod's node need
// not be the host's machine. The host reaches the socket over an exec of `paddock-kernel
// join`, whose standard streams become the connection: the first as it starts the kernel,
// a new one after the first host died (Reattach). The pod ends with the kernel. The host's
// Spec.Listen directory is kept on the host only as the reaper's sign that an owner will
// come back (the pod's annotation names it), as a container's bound directory is.

var _ transport.Reattacher = (*Transport)(nil)

// listenSocket is the listening kernel's socket in the pod.
const listenSocket = transport.ListenDir + "/" + transport.ListenSocket

// AttachTimeout bounds an attach to a listening kernel: the join's exec, the kernel's
// resume frame.
const AttachTimeout = 30 * time.Second

// launch writes the kernel's key into the pod and tells its first process to become the
// kernel (listenCommand). The key goes on the exec's input, never on a command line, which
// the API server's audit log would keep.
func (t *Transport) launch(ctx context.Context, pod, key string) error {
	script := fmt.Sprintf("umask 077 && cat > %[1]s.new && mv %[1]s.new %[1]s && kill -USR1 1", listenKeyPath)
	ex, err := t.executor(pod, []string{"/bin/sh", "-c", script}, true)
	if err != nil {
		return err
	}
	var stderr bytes.Buffer
	if err := ex.StreamWithContext(ctx, remotecommand.StreamOptions{Stdin: strings.NewReader(key), Stdout: io.Discard, Stderr: &stderr}); err != nil {
		return fmt.Errorf("kubernetes: start the listening kernel in pod %s: %w %s", pod, err, strings.TrimSpace(stderr.String()))
	}
	return nil
}

// Reattach connects to the listening kernel an earlier host started with spec.Listen, and
// that still runs; ErrGone when its pod is gone or no longer runs (a pod that ended is
// deleted).
func (t *Transport) Reattach(ctx context.Context, spec transport.Spec) (transport.Kernel, error) {
	if t.Client == nil || t.Config == nil {
		return nil, errors.New("kubernetes: no client")
	}
	p, err := listeningPod(ctx, t.Client, t.Namespace, spec.Listen)
	if err != nil {
		return nil, err
	}
	if p == nil {
		return nil, fmt.Errorf("kubernetes: no pod of session %s: %w", spec.Session, transport.ErrGone)
	}
	if done, err := podEnded(p); done || p.DeletionTimestamp != nil {
		t.delete(p.Name)
		return nil, fmt.Errorf("kubernetes: the pod of session %s ended (%v): %w", spec.Session, err, transport.ErrGone)
	}
	if up, _ := running(p); !up {
		t.delete(p.Name)
		return nil, fmt.Errorf("kubernetes: the pod of session %s does not run (%s): %w", spec.Session, p.Status.Phase, transport.ErrGone)
	}
	return t.attachPod(ctx, p.Name, spec.Key)
}

// listeningPod is the pod whose kernel listens for the host directory listen (its
// annotation), nil when there is none. More than one is an error: whoever may make pods in
// the namespace can make one that says so, and neither is the host's to attach to or delete.
func listeningPod(ctx context.Context, c k8s.Interface, namespace, listen string) (*corev1.Pod, error) {
	if listen == "" {
		return nil, errors.New("kubernetes: no listening directory to find a pod by")
	}
	list, err := c.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: LabelManaged + "=1"})
	if err != nil {
		return nil, fmt.Errorf("kubernetes: find the session's pod: %w", err)
	}
	var found *corev1.Pod
	for i := range list.Items {
		if list.Items[i].Annotations[AnnotationListen] != listen {
			continue
		}
		if found != nil {
			return nil, fmt.Errorf("kubernetes: pods %s and %s both say they listen for %s: neither is taken", found.Name, list.Items[i].Name, listen)
		}
		found = &list.Items[i]
	}
	return found, nil
}

// attachPod attaches to the kernel listening in a running pod, over a join exec, and
// watches the pod for its end; the pod is deleted once it ends.
func (t *Transport) attachPod(ctx context.Context, pod, key string) (transport.Kernel, error) {
	wctx, cancel := context.WithCancel(context.Background())
	k := &listener{t: t, pod: pod, cancel: cancel, done: make(chan struct{}), ended: make(chan struct{})}
	go k.watch(wctx)
	actx, acancel := context.WithTimeout(ctx, AttachTimeout)
	defer acancel()
	a, err := transport.AttachBy(actx, func() (transport.Conn, error) { return t.join(pod) }, key, k.ended)
	if err != nil {
		k.Kill()
		return nil, fmt.Errorf("kubernetes: attach to the kernel in pod %s: %w", pod, err)
	}
	k.Attached = a
	k.mu.Lock()
	k.conn = a.Conn
	k.mu.Unlock()
	if k.isDone() {
		k.closeConn() // the pod ended as the host attached
	}
	return k, nil
}

// listener is a listening kernel in its pod, reached over a join exec.
type listener struct {
	*transport.Attached
	t      *Transport
	pod    string
	cancel context.CancelFunc // ends the watch

	mu   sync.Mutex
	conn transport.Conn // guarded by mu; the join's, once attached

	ended   chan struct{} // closed when the pod has ended (before its deletion)
	done    chan struct{} // closed when the pod has ended and its deletion was asked
	err     error         // set before done closes
	killing atomic.Bool

	killOnce sync.Once
}

// Pod is the name of the kernel's pod.
func (k *listener) Pod() string { return k.pod }

// Relabel sets labels on the kernel's pod (pool.Relabeler).
func (k *listener) Relabel(ctx context.Context, labels map[string]string) error {
	return k.t.relabel(ctx, k.pod, labels)
}

// watch waits for the pod to end, then deletes it and ends the connection.
func (k *listener) watch(ctx context.Context) {
	err := k.t.watchEnd(ctx, k.pod)
	close(k.ended)
	if k.killing.Load() {
		err = nil
	}
	k.err = err
	k.t.delete(k.pod)
	close(k.done)
	k.closeConn()
}

// closeConn ends the join's connection, once attached.
func (k *listener) closeConn() {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.conn != nil {
		k.conn.Close()
	}
}

func (k *listener) isDone() bool {
	select {
	case <-k.done:
		return true
	default:
		return false
	}
}

func (k *listener) Wait() error {
	<-k.done
	return k.err
}

// Kill ends the kernel as a pod's deletion does: TERM to it (it then ends what it
// started), KILL when it has not ended within Grace; the pod is gone, or its deletion
// forced, before Kill returns.
func (k *listener) Kill() error {
	k.killOnce.Do(func() {
		k.killing.Store(true)
		k.closeConn()
		grace := int64(Grace / time.Second)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		err := k.t.Client.CoreV1().Pods(k.t.Namespace).Delete(ctx, k.pod, metav1.DeleteOptions{GracePeriodSeconds: &grace})
		if err != nil && !apierrors.IsNotFound(err) {
			k.t.log().Warn("pod not deleted", "pod", k.pod, "err", err)
		}
		select {
		case <-k.done:
		case <-ctx.Done():
			k.cancel()
			k.t.delete(k.pod)
			<-k.done
		}
	})
	return nil
}

// watchEnd waits until pod ends: its kernel's container ended, the pod failed, or it was
// deleted. It returns the kernel's error: nil for an exit with status 0. The API server may
// go away meanwhile (restarted, a network's fault): the watch is made again, with a pause
// that grows to two seconds, until ctx ends.
func (t *Transport) watchEnd(ctx context.Context, pod string) error {
	pods := t.Client.CoreV1().Pods(t.Namespace)
	wait := 50 * time.Millisecond
	for {
		p, err := pods.Get(ctx, pod, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			return &PodGoneError{Pod: pod, Reason: "deleted"}
		case err == nil:
			if done, err := podEnded(p); done {
				return err
			}
			w, err := pods.Watch(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", pod).String(), ResourceVersion: p.ResourceVersion})
			if err != nil {
				break
			}
			for ev := range w.ResultChan() {
				switch ev.Type {
				case watch.Deleted:
					w.Stop()
					return &PodGoneError{Pod: pod, Reason: "deleted"}
				case watch.Added, watch.Modified:
					if p, ok := ev.Object.(*corev1.Pod); ok {
						if done, err := podEnded(p); done {
							w.Stop()
							return err
						}
					}
				}
			}
			w.Stop()
			wait = 50 * time.Millisecond // it watched: the server answers
		}
		if !pause(ctx, &wait) {
			return ctx.Err()
		}
	}
}

// podEnded says whether a pod's kernel has ended, and its error: nil for an exit with
// status 0.
func podEnded(p *corev1.Pod) (bool, error) {
	for _, c := range p.Status.ContainerStatuses {
		if c.Name != Container {
			continue
		}
		if tm := c.State.Terminated; tm != nil {
			if tm.ExitCode == 0 {
				return true, nil
			}
			return true, fmt.Errorf("kubernetes: the kernel exited with status %d (%s)", tm.ExitCode, tm.Reason)
		}
	}
	switch p.Status.Phase {
	case corev1.PodFailed:
		return true, &PodGoneError{Pod: p.Name, Reason: strings.TrimSpace(string(p.Status.Phase) + " " + p.Status.Reason + " " + p.Status.Message)}
	case corev1.PodSucceeded:
		return true, nil
	}
	return false, nil
}

// join is a connection to the pod's listening kernel: an exec of `paddock-kernel join`,
// its standard streams the connection's two ways.
func (t *Transport) join(pod string) (transport.Conn, error) {
	ex, err := t.executor(pod, []string{KernelPath, "join", listenSocket}, true)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	c := &execConn{pod: pod, in: inW, out: outR, outW: outW, cancel: cancel, ended: make(chan struct{})}
	go func() {
		defer close(c.ended)
		var stderr tail
		err := ex.StreamWithContext(ctx, remotecommand.StreamOptions{Stdin: inR, Stdout: outW, Stderr: &stderr})
		if err != nil && ctx.Err() == nil {
			err = fmt.Errorf("kubernetes: the kernel's channel in pod %s: %w %s", pod, err, strings.TrimSpace(stderr.String()))
		}
		outW.CloseWithError(err)
		inR.CloseWithError(io.ErrClosedPipe)
		cancel()
	}()
	return c, nil
}

// closeGrace bounds the clean end of a join's exec at Close; then the exec is cut.
const closeGrace = 2 * time.Second

// execConn is a connection over an exec's standard streams (transport.Conn). A deadline
// cuts the connection when it passes: the attach, the one user of deadlines here, gives up
// then anyway.
type execConn struct {
	pod    string
	in     *io.PipeWriter
	out    *io.PipeReader
	outW   *io.PipeWriter // the exec's end of out
	cancel context.CancelFunc
	ended  chan struct{} // closed when the exec has ended

	closed    atomic.Bool
	closeOnce sync.Once

	mu    sync.Mutex
	timer *time.Timer // guarded by mu
}

func (c *execConn) Read(p []byte) (int, error) {
	if c.closed.Load() {
		return 0, net.ErrClosed
	}
	return c.out.Read(p)
}

func (c *execConn) Write(p []byte) (int, error) { return c.in.Write(p) }

// CloseWrite ends the exec's input: the kernel's connection ends its reading half.
func (c *execConn) CloseWrite() error { return c.in.Close() }

// Close ends the connection. The exec ends as it should rather than cut: its input ends, so
// the kernel ends the connection and the join exits; what comes meanwhile is dropped. An
// exec that has not ended within closeGrace is cut. (Cut at once, client-go's stream copiers
// would log their broken pipes as errors at every close.)
func (c *execConn) Close() error {
	c.closeOnce.Do(func() {
		c.closed.Store(true)
		c.SetDeadline(time.Time{})
		c.in.Close()
		go io.Copy(io.Discard, c.out) // ends with the exec, which closes the pipe
		go func() {
			t := time.NewTimer(closeGrace)
			defer t.Stop()
			select {
			case <-c.ended:
			case <-t.C:
				c.cut(net.ErrClosed)
			}
		}()
	})
	return nil
}

// cut ends the exec at once; reads fail with err.
func (c *execConn) cut(err error) {
	c.cancel()
	c.in.CloseWithError(err)
	c.outW.CloseWithError(err)
}

func (c *execConn) LocalAddr() net.Addr  { return execAddr("host") }
func (c *execConn) RemoteAddr() net.Addr { return execAddr(c.pod) }

func (c *execConn) SetDeadline(t time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.timer != nil {
		c.timer.Stop()
		c.timer = nil
	}
	if !t.IsZero() {
		c.timer = time.AfterFunc(time.Until(t), func() { c.cut(os.ErrDeadlineExceeded) })
	}
	return nil
}

func (c *execConn) SetReadDeadline(t time.Time) error  { return c.SetDeadline(t) }
func (c *execConn) SetWriteDeadline(t time.Time) error { return c.SetDeadline(t) }

// execAddr names an end of an exec's connection.
type execAddr string

func (a execAddr) Network() string { return "kubernetes-exec" }
func (a execAddr) String() string  { return string(a) }

// tail keeps the last KiB written to it: an exec's diagnostics for an error.
type tail struct {
	mu sync.Mutex
	b  []byte // guarded by mu
}

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > 1024 {
		t.b = t.b[len(t.b)-1024:]
	}
	return len(p), nil
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.b)
}

// relabel sets labels on a pod, keeping the others: a warm pod takes on the session that
// claims it.
func (t *Transport) relabel(ctx context.Context, pod string, labels map[string]string) error {
	patch, err := relabelPatch(labels)
	if err != nil {
		return err
	}
	if _, err := t.Client.CoreV1().Pods(t.Namespace).Patch(ctx, pod, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("kubernetes: relabel %s: %w", pod, err)
	}
	return nil
}

// relabelPatch is the merge patch that sets labels on a pod as its making does (podLabels):
// a value no label can hold goes in an annotation; the session's label holds its id, or a
// hash of it (SessionLabel), and its annotation the id.
func relabelPatch(labels map[string]string) ([]byte, error) {
	l, a := map[string]string{}, map[string]string{}
	for k, v := range labels {
		switch {
		case k == LabelSession:
			l[k] = SessionLabel(v)
			a[AnnotationSession] = v
		case len(validation.IsQualifiedName(k)) == 0 && len(validation.IsValidLabelValue(v)) == 0:
			l[k] = v
		default:
			a[annotationKey(k)] = v
		}
	}
	return json.Marshal(map[string]any{"metadata": map[string]any{"labels": l, "annotations": a}})
}

// Relabel sets labels on the kernel's pod (pool.Relabeler).
func (k *kernel) Relabel(ctx context.Context, labels map[string]string) error {
	return k.t.relabel(ctx, k.pod, labels)
}
