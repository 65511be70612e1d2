// Package kubernetes starts a kernel in a Kubernetes pod through client-go: one pod per
// kernel, confined by default as a Docker container is (Settings.Hardening), labelled with
// its session and its host process like the containers. No registry is needed for the
// kernel: its static binary is streamed into an emptyDir of the pod through an exec channel
// (once per pod, named by its content's hash), or copied there from a kernel image by an
// init container. The kernel is then exec'd in the pod, its frames on the exec's standard
// input and output over client-go's remotecommand (WebSocket, SPDY when the server does not
// upgrade). When the kernel ends, the pod is deleted; a reaper deletes the pods of host
// processes that died.
package kubernetes

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
	k8s "k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/remotecommand"
	utilexec "k8s.io/client-go/util/exec"
	"k8s.io/streaming/pkg/httpstream"

	"github.com/paddockhq/paddock/errdefs"
	"github.com/paddockhq/paddock/transport"
	"github.com/paddockhq/paddock/transport/docker"
)

var _ transport.Transport = (*Transport)(nil)

// Grace is how long Kill waits after closing the kernel's stdin before it deletes the pod.
const Grace = docker.Grace

// StartTimeout bounds the wait for a pod to run when the caller's context does not.
const StartTimeout = 5 * time.Minute

// Connect returns a client of the cluster the kubeconfig names (its path, else KUBECONFIG,
// else ~/.kube/config, else the cluster a pod runs in) in the context named ("" for its
// current one), and the namespace that context says ("default" when it says none).
func Connect(kubeconfig, kubeContext string) (*rest.Config, k8s.Interface, string, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if kubeconfig != "" {
		rules.ExplicitPath = kubeconfig
	}
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: kubeContext})
	cfg, err := cc.ClientConfig()
	if err != nil {
		return nil, nil, "", fmt.Errorf("kubernetes: %w", err)
	}
	ns, _, err := cc.Namespace()
	if err != nil || ns == "" {
		ns = "default"
	}
	// A fan-out of children opens many pods at once: client-go's default of 5 requests a
	// second would queue them.
	cfg.QPS, cfg.Burst = 100, 200
	cfg.UserAgent = "paddock"
	cs, err := k8s.NewForConfig(cfg)
	if err != nil {
		return nil, nil, "", fmt.Errorf("kubernetes: %w", err)
	}
	return cfg, cs, ns, nil
}

// Transport starts kernels in pods.
type Transport struct {
	Config *rest.Config
	Client k8s.Interface
	Settings
	// Stderr receives the kernel's diagnostics; nil discards them.
	Stderr io.Writer
	// Log receives the transport's diagnostics; nil discards them.
	Log *slog.Logger
	// NoReap skips the reaper at the first Start.
	NoReap bool
	// Sync, when set, is the session's synced workspace: the first kernel started gets it
	// in its pod at SyncDir, and its end brings it back (StartSync).
	Sync *Sync

	reapOnce  sync.Once
	rootImage atomic.Bool // the image was found to run as root
}

// PodGoneError is a kernel whose pod went away under it: deleted, evicted, its node lost.
type PodGoneError struct {
	Pod    string
	Reason string // the pod's status reason (Evicted), or what was seen
}

func (e *PodGoneError) Error() string {
	return fmt.Sprintf("kubernetes: the session's pod %s is gone (%s)", e.Pod, e.Reason)
}

// Unwrap makes the error a transport.ErrGone.
func (e *PodGoneError) Unwrap() error { return transport.ErrGone }

// Code is the error's stable code.
func (e *PodGoneError) Code() string { return "sandbox_gone" }

// Class is the error's class.
func (e *PodGoneError) Class() errdefs.Class { return errdefs.Gone }

// PodError is a pod that could not start: its image cannot be pulled, its settings are
// refused, it was not scheduled in time.
type PodError struct {
	Pod, Reason, Message string
}

func (e *PodError) Error() string {
	return fmt.Sprintf("kubernetes: the kernel's pod %s did not start: %s: %s", e.Pod, e.Reason, e.Message)
}

// Code is the error's stable code.
func (e *PodError) Code() string { return "sandbox_start" }

// Class is the error's class.
func (e *PodError) Class() errdefs.Class { return errdefs.Unavailable }

// errRootImage is a pod refused because its image runs as root and runAsNonRoot is set.
var errRootImage = errors.New("the image runs as root")

// Start makes the kernel's pod, waits for it to run, puts the kernel in it and exec's the
// kernel with its frames on the exec's standard streams. On any error nothing is left.
func (t *Transport) Start(ctx context.Context, spec transport.Spec) (transport.Kernel, error) {
	if t.Client == nil || t.Config == nil {
		return nil, errors.New("kubernetes: no client")
	}
	if !t.NoReap {
		t.reapOnce.Do(func() {
			if n, err := Reap(ctx, t.Client, t.Namespace); err != nil {
				t.log().Warn("reaper", "err", err)
			} else if n > 0 {
				t.log().Info("reaper removed the pods of host processes that died", "count", n)
			}
		})
	}
	// A pod has a network of its own: the host's proxy is not carried into it.
	spec.Egress = ""
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, StartTimeout)
		defer cancel()
	}
	s := t.Settings
	sync, err := t.Sync.claim()
	if err != nil {
		return nil, err
	}
	ok := false // the kernel runs
	defer func() {
		if !ok {
			sync.release()
		}
	}()
	if sync != nil {
		s.syncCopy = sync.Copy()
	}
	if spec.Once || spec.Key == "" || sync != nil {
		// A kernel listening for this host only gains nothing here: its socket, as the
		// exec's streams, is reached through the API server. A synced workspace comes back
		// over exec once the kernel has ended, and a listening kernel's pod ends with it.
		spec.Listen, spec.Key, spec.Once = "", "", false
	}
	if spec.Listen != "" {
		// The reaper spares a listening kernel's pod while this directory is there: its
		// owner keeps it, and a new host reattaches to the kernel or removes it.
		if err := os.MkdirAll(spec.Listen, 0o700); err != nil {
			return nil, fmt.Errorf("kubernetes: listen: %w", err)
		}
	}
	s.Hardening.User = docker.SandboxUser(s.Hardening.User, docker.OwnerOf(spec))
	named := t.Settings.Hardening.User != ""
	t0 := time.Now()
	name, err := t.run(ctx, spec, s)
	if errors.Is(err, errRootImage) && !named {
		// The image runs as root and no user was asked for: it runs so, as the Docker
		// sandbox of such an image does, every other confinement kept.
		t.rootImage.Store(true)
		t.log().Info("the image runs as root: its pods run without runAsNonRoot", "image", s.Image)
		name, err = t.run(ctx, spec, s)
	}
	if err != nil {
		return nil, err
	}
	sync.hold(name)
	defer func() {
		if !ok {
			t.delete(name)
		}
	}()
	t1 := time.Now()
	if s.KernelImage == "" {
		if err := t.streamKernel(ctx, name, spec.Kernel); err != nil {
			return nil, err
		}
	}
	if spec.Listen != "" {
		if err := t.launch(ctx, name, spec.Key); err != nil {
			return nil, err
		}
		k, err := t.attachPod(ctx, name, spec.Key)
		if err != nil {
			return nil, err
		}
		ok = true
		t.log().Debug("listening kernel pod started", "pod", name, "run", t1.Sub(t0), "kernel", time.Since(t1))
		return k, nil
	}
	if sync != nil {
		if err := t.send(ctx, name, sync); err != nil {
			return nil, err
		}
	}
	k := t.exec(name, append([]string{KernelPath}, spec.Args...), sync)
	ok = true
	t.log().Debug("kernel pod started", "pod", name, "run", t1.Sub(t0), "kernel", time.Since(t1))
	return k, nil
}

// run creates a pod for spec and waits until it runs; it returns the pod's name. A pod that
// does not run is deleted.
func (t *Transport) run(ctx context.Context, spec transport.Spec, s Settings) (string, error) {
	var b [4]byte
	_, _ = rand.Read(b[:])
	pod, err := planPod(spec, s, docker.HostLabels(), podName(spec.Session, hex.EncodeToString(b[:])), t.rootImage.Load())
	if err != nil {
		return "", err
	}
	created, err := t.Client.CoreV1().Pods(s.Namespace).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("kubernetes: create the kernel's pod: %w", err)
	}
	if err := t.waitRunning(ctx, created); err != nil {
		t.delete(created.Name)
		return "", err
	}
	return created.Name, nil
}

// waitRunning watches a pod until its container runs; it fails as soon as the pod cannot
// run (an image not pulled, a container refused, the pod ended or deleted).
func (t *Transport) waitRunning(ctx context.Context, pod *corev1.Pod) error {
	pods := t.Client.CoreV1().Pods(pod.Namespace)
	rv := pod.ResourceVersion
	last := pod
	// The API server may not answer for a while (restarted, say): the pod is watched
	// again once it does, until ctx ends.
	wait := 50 * time.Millisecond
	for {
		if done, err := running(last); done || err != nil {
			return err
		}
		if rv == "" {
			p, err := pods.Get(ctx, pod.Name, metav1.GetOptions{})
			switch {
			case apierrors.IsNotFound(err):
				return &PodGoneError{Pod: pod.Name, Reason: "deleted before it ran"}
			case err != nil:
				if !pause(ctx, &wait) {
					return t.notRunning(last, ctx.Err())
				}
				continue
			}
			last, rv = p, p.ResourceVersion
			continue
		}
		w, err := pods.Watch(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", pod.Name).String(), ResourceVersion: rv})
		if err != nil {
			if !pause(ctx, &wait) {
				return t.notRunning(last, ctx.Err())
			}
			continue
		}
		for ev := range w.ResultChan() {
			switch ev.Type {
			case watch.Deleted:
				w.Stop()
				return &PodGoneError{Pod: pod.Name, Reason: "deleted before it ran"}
			case watch.Added, watch.Modified:
				p, ok := ev.Object.(*corev1.Pod)
				if !ok {
					continue
				}
				last, rv = p, p.ResourceVersion
				if done, err := running(p); done || err != nil {
					w.Stop()
					return err
				}
			case watch.Error:
				rv = "" // too old a version: start again from the pod as it is
			}
		}
		w.Stop()
		if ctx.Err() != nil {
			return t.notRunning(last, ctx.Err())
		}
		wait = 50 * time.Millisecond // it watched: the server answers
	}
}

// pause waits *wait, or less if ctx ends first (false then), and doubles *wait up to two
// seconds: the pause between tries of an API server that does not answer.
func pause(ctx context.Context, wait *time.Duration) bool {
	select {
	case <-ctx.Done():
		return false
	case <-time.After(*wait):
	}
	*wait = min(2**wait, 2*time.Second)
	return true
}

// notRunning is the error of a pod that did not run in time: what it was waiting for.
func (t *Transport) notRunning(p *corev1.Pod, err error) error {
	why := string(p.Status.Phase)
	for _, c := range p.Status.Conditions {
		if c.Status == corev1.ConditionFalse && c.Message != "" {
			why += "; " + c.Message
		}
	}
	for _, c := range p.Status.ContainerStatuses {
		if w := c.State.Waiting; w != nil {
			why += "; " + w.Reason + " " + w.Message
		}
	}
	return &PodError{Pod: p.Name, Reason: "not running in time (" + err.Error() + ")", Message: why}
}

// running says whether a pod's container runs, or the error of a pod that will not.
func running(p *corev1.Pod) (bool, error) {
	switch p.Status.Phase {
	case corev1.PodFailed, corev1.PodSucceeded:
		return false, &PodGoneError{Pod: p.Name, Reason: strings.TrimSpace(string(p.Status.Phase) + " " + p.Status.Reason + " " + p.Status.Message)}
	}
	for _, c := range p.Status.InitContainerStatuses {
		if tm := c.State.Terminated; tm != nil && tm.ExitCode != 0 {
			return false, &PodError{Pod: p.Name, Reason: "the kernel image's copy failed", Message: tm.Reason + " " + tm.Message}
		}
		if w := c.State.Waiting; w != nil && fatalWait(w.Reason) {
			return false, &PodError{Pod: p.Name, Reason: w.Reason, Message: w.Message}
		}
	}
	for _, c := range p.Status.ContainerStatuses {
		if c.Name != Container {
			continue
		}
		if c.State.Running != nil {
			return true, nil
		}
		if w := c.State.Waiting; w != nil && fatalWait(w.Reason) {
			if strings.Contains(w.Message, "runAsNonRoot") && strings.Contains(w.Message, "root") {
				return false, fmt.Errorf("kubernetes: %s: %w", w.Message, errRootImage)
			}
			return false, &PodError{Pod: p.Name, Reason: w.Reason, Message: w.Message}
		}
		if tm := c.State.Terminated; tm != nil {
			return false, &PodGoneError{Pod: p.Name, Reason: "its container ended: " + tm.Reason + " " + tm.Message}
		}
	}
	return false, nil
}

// fatalWait says whether a container waiting for this reason will not start by waiting.
func fatalWait(reason string) bool {
	switch reason {
	case "ErrImagePull", "ImagePullBackOff", "ErrImageNeverPull", "InvalidImageName",
		"CreateContainerConfigError", "CreateContainerError", "RunContainerError":
		return true
	}
	return false
}

// kernelHashes caches the content hashes of kernel binaries, by path, size and time.
var kernelHashes sync.Map

func kernelHash(p string) (string, error) {
	fi, err := os.Stat(p)
	if err != nil {
		return "", err
	}
	key := fmt.Sprintf("%s\x00%d\x00%d", p, fi.Size(), fi.ModTime().UnixNano())
	if h, ok := kernelHashes.Load(key); ok {
		return h.(string), nil
	}
	f, err := os.Open(p)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	sum := hex.EncodeToString(h.Sum(nil))
	kernelHashes.Store(key, sum)
	return sum, nil
}

// streamKernel puts the kernel binary into the pod's kernel directory through an exec
// channel, unless the pod already holds this kernel (its hash is recorded beside it): the
// image needs /bin/sh, cat, chmod and mv. The kernel is read-only, and so is the directory
// where the pod's user may make it so (an emptyDir is the node's, mode 0777).
func (t *Transport) streamKernel(ctx context.Context, pod, kernel string) error {
	if kernel == "" {
		return errors.New("kubernetes: no kernel binary named")
	}
	sum, err := kernelHash(kernel)
	if err != nil {
		return fmt.Errorf("kubernetes: the kernel binary: %w", err)
	}
	f, err := os.Open(kernel)
	if err != nil {
		return fmt.Errorf("kubernetes: the kernel binary: %w", err)
	}
	defer f.Close()
	script := fmt.Sprintf(`d=%s; [ "$(cat $d/.sha256 2>/dev/null)" = %s ] && exit 0
cat > $d/.new && chmod 0555 $d/.new && mv $d/.new %s && echo %s > $d/.sha256 && { chmod 0555 $d 2>/dev/null; true; }`, KernelDir, sum, KernelPath, sum)
	var stderr bytes.Buffer
	ex, err := t.executor(pod, []string{"/bin/sh", "-c", script}, true)
	if err != nil {
		return err
	}
	if err := ex.StreamWithContext(ctx, remotecommand.StreamOptions{Stdin: f, Stdout: io.Discard, Stderr: &stderr}); err != nil {
		return fmt.Errorf("kubernetes: stream the kernel into pod %s (the image needs /bin/sh and cat): %w %s", pod, err, strings.TrimSpace(stderr.String()))
	}
	return nil
}

// executor is an exec of cmd in a pod's kernel container, over a WebSocket, or SPDY when the
// server does not upgrade to one.
func (t *Transport) executor(pod string, cmd []string, stdin bool) (remotecommand.Executor, error) {
	req := t.Client.CoreV1().RESTClient().Post().Namespace(t.Namespace).Resource("pods").Name(pod).SubResource("exec").
		VersionedParams(&corev1.PodExecOptions{Container: Container, Command: cmd, Stdin: stdin, Stdout: true, Stderr: true}, scheme.ParameterCodec)
	ws, err := remotecommand.NewWebSocketExecutor(t.Config, "GET", req.URL().String())
	if err != nil {
		return nil, fmt.Errorf("kubernetes: exec: %w", err)
	}
	spdy, err := remotecommand.NewSPDYExecutor(t.Config, "POST", req.URL())
	if err != nil {
		return nil, fmt.Errorf("kubernetes: exec: %w", err)
	}
	return remotecommand.NewFallbackExecutor(ws, spdy, func(err error) bool {
		return httpstream.IsUpgradeFailure(err) || httpstream.IsHTTPSProxyError(err)
	})
}

// exec starts the kernel in the pod; its end deletes the pod.
func (t *Transport) exec(pod string, argv []string, sync *Sync) *kernel {
	ctx, cancel := context.WithCancel(context.Background())
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	k := &kernel{t: t, pod: pod, stdin: inW, stdout: outR, cancel: cancel, done: make(chan struct{})}
	stderr := t.Stderr
	if stderr == nil {
		stderr = io.Discard
	}
	go func() {
		defer close(k.done)
		ex, err := t.executor(pod, argv, true)
		if err == nil {
			err = ex.StreamWithContext(ctx, remotecommand.StreamOptions{Stdin: inR, Stdout: outW, Stderr: stderr})
		}
		inR.CloseWithError(io.ErrClosedPipe)
		k.err = t.ended(pod, err, k.killing.Load())
		outW.CloseWithError(k.err)
		cancel()
		if sync != nil {
			t.fetch(pod, sync)
		}
		t.delete(pod)
	}()
	return k
}

// ended is the kernel's error once its exec has ended with err: nil when it exited 0; a
// PodGoneError when its pod went away under it (unless it was being killed).
func (t *Transport) ended(pod string, err error, killing bool) error {
	if err == nil {
		return nil
	}
	if !killing {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		p, gerr := t.Client.CoreV1().Pods(t.Namespace).Get(ctx, pod, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(gerr):
			return &PodGoneError{Pod: pod, Reason: "deleted"}
		case gerr == nil && p.DeletionTimestamp != nil:
			return &PodGoneError{Pod: pod, Reason: "being deleted"}
		case gerr == nil && p.Status.Phase == corev1.PodFailed:
			return &PodGoneError{Pod: pod, Reason: strings.TrimSpace(p.Status.Reason + " " + p.Status.Message)}
		}
	}
	var code utilexec.CodeExitError
	if errors.As(err, &code) {
		return fmt.Errorf("kubernetes: the kernel exited with status %d", code.Code)
	}
	return fmt.Errorf("kubernetes: the kernel's exec stream: %w", err)
}

// delete deletes a pod at once (its kernel has ended, or is being killed), trying again
// while the API server does not answer, for up to a minute.
func (t *Transport) delete(pod string) {
	zero := int64(0)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for wait := 50 * time.Millisecond; ; wait = min(2*wait, 2*time.Second) {
		err := t.Client.CoreV1().Pods(t.Namespace).Delete(ctx, pod, metav1.DeleteOptions{GracePeriodSeconds: &zero})
		if err == nil || apierrors.IsNotFound(err) {
			return
		}
		select {
		case <-ctx.Done():
			t.log().Warn("pod not deleted", "pod", pod, "err", err)
			return
		case <-time.After(wait):
		}
	}
}

func (t *Transport) log() *slog.Logger {
	if t.Log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return t.Log
}

// kernel is one kernel exec'd in its pod.
type kernel struct {
	t      *Transport
	pod    string
	stdin  *io.PipeWriter
	stdout *io.PipeReader
	cancel context.CancelFunc

	done    chan struct{} // closed when the exec has ended and the pod's deletion asked
	err     error         // set before done closes
	killing atomic.Bool

	killOnce sync.Once
}

// Pod is the name of the kernel's pod.
func (k *kernel) Pod() string { return k.pod }

func (k *kernel) Stdin() io.WriteCloser { return k.stdin }
func (k *kernel) Stdout() io.Reader     { return k.stdout }

func (k *kernel) Wait() error {
	<-k.done
	return k.err
}

// Kill closes stdin (the kernel then ends and kills what it started); when it has not ended
// within Grace the pod is deleted. Either way the pod's deletion is asked before Kill
// returns.
func (k *kernel) Kill() error {
	k.killOnce.Do(func() {
		k.killing.Store(true)
		kill := func() {
			k.t.delete(k.pod)
			k.cancel()
		}
		if !transport.Stop(k.done, func() { k.stdin.Close() }, kill, Grace, 30*time.Second) {
			k.cancel()
		}
	})
	return nil
}
