// The kubernetes transport on the project's one-node cluster (integration/k8s/up, which
// .ci/run starts): the conformance and security suites, the differential test against bash,
// and the faults (a pod deleted or evicted mid-step, the API server restarted mid-session).
// The tests read the variables up writes to STATE/env (set -a; . STATE/env; set +a); without
// PADDOCK_KUBECONFIG they skip, and fail when PADDOCK_REQUIRE_INTEGRATION=1.

package integration

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"

	k8s "k8s.io/client-go/kubernetes"

	"github.com/paddockhq/paddock/internal/peer"
	"github.com/paddockhq/paddock/orchestrator"
	"github.com/paddockhq/paddock/transport/docker"
	"github.com/paddockhq/paddock/transport/environ"
	"github.com/paddockhq/paddock/transport/kubernetes"
	"github.com/paddockhq/paddock/transport/pathmap"
)

// cluster is the test cluster integration/k8s/up started (PADDOCK_KUBECONFIG and the rest,
// as .ci/run exports them).
type cluster struct {
	Config    *rest.Config
	Client    k8s.Interface
	Namespace string
	Image     string
	Kubectl   string
	State     string // up's state directory
}

// k8sCluster returns the test cluster, or marks it missing.
func k8sCluster(t testing.TB) cluster {
	t.Helper()
	kc := os.Getenv("PADDOCK_KUBECONFIG")
	if kc == "" {
		needPeer(t, "no cluster: PADDOCK_KUBECONFIG is not set (integration/k8s/up STATE starts one; .ci/run does)")
	}
	cfg, cli, ns, err := kubernetes.Connect(kc, "")
	if err != nil {
		needPeer(t, "the cluster's kubeconfig %s: %v", kc, err)
	}
	if n := os.Getenv("PADDOCK_K8S_NAMESPACE"); n != "" {
		ns = n
	}
	if _, err := cli.Discovery().ServerVersion(); err != nil {
		needPeer(t, "the cluster of %s does not answer: %v", kc, err)
	}
	img := os.Getenv("PADDOCK_K8S_IMAGE")
	if img == "" {
		needPeer(t, "PADDOCK_K8S_IMAGE names no sandbox image in the cluster")
	}
	return cluster{Config: cfg, Client: cli, Namespace: ns, Image: img, Kubectl: os.Getenv("PADDOCK_K8S_KUBECTL"), State: os.Getenv("PADDOCK_K8S_STATE")}
}

// transport is a kubernetes transport of the cluster's sandbox image, hardened by h.
func (c cluster) transport(t testing.TB, h docker.Hardening) *kubernetes.Transport {
	return &kubernetes.Transport{Config: c.Config, Client: c.Client, Stderr: testWriter{t}, Settings: kubernetes.Settings{
		Namespace: c.Namespace, Image: c.Image, PullPolicy: "Never", Hardening: h}}
}

// k8sWorkspace is a workspace the sandbox image's user (65534) owns, as a user's own
// workspace is theirs: the pod runs as its owner.
func k8sWorkspace(t testing.TB) string {
	t.Helper()
	ws := t.TempDir()
	if err := os.Chown(ws, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	// The test's own temporary directory above must let that user through.
	if err := os.Chmod(filepath.Dir(ws), 0o755); err != nil {
		t.Fatal(err)
	}
	return ws
}

// k8sEnv is a conformance environment on the cluster: a fresh pod per session, the
// workspace a hostPath volume at /work.
func k8sEnv(t *testing.T, c cluster, kernel string, h docker.Hardening) Env {
	ws := t.TempDir() // the process's own: the kernel runs as its user (h.User)
	if h.User == "" {
		ws = k8sWorkspace(t) // the image's user's: the pod runs as its owner
	}
	pm, err := pathmap.New(pathmap.Mount{Sandbox: "/work", Host: ws})
	if err != nil {
		t.Fatal(err)
	}
	return Env{
		Transport:       c.transport(t, h),
		Kernel:          kernel,
		KernelInSandbox: kubernetes.KernelPath,
		Workspace:       ws,
		PathMap:         pm,
		Ephemeral:       true,
		Environ: func(host, names []string) []string {
			env, _ := environ.Sandbox(host, names, sandboxEnv, pm)
			return env
		},
		Leftovers: func(ctx context.Context, session string, _ []int) []string {
			names, err := kubernetes.SessionPods(ctx, c.Client, c.Namespace, session)
			if err != nil {
				return []string{err.Error()}
			}
			return names
		},
	}
}

// The conformance suite on the kubernetes transport: a fresh hardened pod of the sandbox
// image per session, the kernel streamed in through an exec channel, the workspace a
// hostPath volume at /work.
func TestConformanceKubernetes(t *testing.T) {
	c := k8sCluster(t)
	kernel := kernelBinary(t)
	// The suite's host side makes files in the workspace as this process's user (root):
	// the kernel runs as that user too, as the docker suite's does, every capability dropped.
	RunConformance(t, func(t *testing.T) Env { return k8sEnv(t, c, kernel, docker.Hardening{User: "0:0"}) })
}

// openK8s opens a session in a pod confined by h, its workspace at /work.
func openK8s(t *testing.T, ctx context.Context, c cluster, h docker.Hardening, names []string) (*orchestrator.Session, Env) {
	t.Helper()
	e := k8sEnv(t, c, kernelBinary(t), h)
	return open(t, ctx, e, nil, nil, names), e
}

// A default pod is confined: no capability, no new privileges, a system-call filter, a root
// filesystem it cannot write (and a /tmp it can), no service account token, no service
// variables, no host namespace, no host process, no credential, a memory limit.
func TestSecurityKubernetes(t *testing.T) {
	c := k8sCluster(t)
	ctx := testContext(t)
	secret := randomName("sekrit-")
	t.Setenv("GITHUB_TOKEN", secret)
	t.Setenv("PADDOCK_PLAIN", "plain")
	s, _ := openK8s(t, ctx, c, docker.Hardening{}, []string{"GITHUB_TOKEN", "PADDOCK_PLAIN"})

	t.Run("NoCapabilities", func(t *testing.T) {
		for _, f := range []string{"CapEff", "CapPrm", "CapInh", "CapBnd", "CapAmb"} {
			if v := statusField(t, ctx, s, f); strings.Trim(v, "0") != "" {
				t.Errorf("%s is %s, want none", f, v)
			}
		}
	})
	t.Run("NoNewPrivileges", func(t *testing.T) {
		if v := statusField(t, ctx, s, "NoNewPrivs"); v != "1" {
			t.Errorf("NoNewPrivs is %s", v)
		}
	})
	t.Run("SystemCallFilter", func(t *testing.T) {
		if v := statusField(t, ctx, s, "Seccomp"); v != "2" {
			t.Errorf("Seccomp is %s, want 2 (filtered)", v)
		}
	})
	t.Run("NonRoot", func(t *testing.T) {
		if out := stdout(bash(t, ctx, s, `id -u`)); strings.TrimSpace(out) == "0" {
			t.Errorf("the kernel runs as root")
		}
	})
	t.Run("ReadOnlyRoot", func(t *testing.T) {
		for _, p := range []string{"/paddock-root-write", "/etc/paddock-write", "/bin/paddock-write", "/.paddock/x", kubernetes.KernelPath} {
			if res := bash(t, ctx, s, `sh -c 'echo x > `+p+`'`); res.End.Status == 0 {
				t.Errorf("wrote %s", p)
			}
		}
		if res := bash(t, ctx, s, `sh -c 'echo x > /tmp/ok && cat /tmp/ok'`); stdout(res) != "x\n" {
			t.Errorf("/tmp is not writable: %s", res)
		}
	})
	t.Run("NoServiceAccountToken", func(t *testing.T) {
		res := bash(t, ctx, s, `sh -c 'ls /var/run/secrets /run/secrets 2>&1; env'`)
		out := stdout(res)
		if strings.Contains(out, "kubernetes.io") || strings.Contains(out, "token") {
			t.Errorf("a service account token is mounted:\n%s", out)
		}
		if strings.Contains(out, "KUBERNETES_SERVICE") || strings.Contains(out, "_PORT=tcp://") {
			t.Errorf("the cluster's service variables reached the sandbox:\n%s", out)
		}
	})
	t.Run("NoHostNamespaces", func(t *testing.T) {
		h, err := s.Ping(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, ns := range []string{"net", "pid", "ipc", "uts", "mnt"} {
			host, err := os.Readlink("/proc/self/ns/" + ns)
			if err != nil {
				t.Fatal(err)
			}
			got := strings.TrimSpace(stdout(bash(t, ctx, s, fmt.Sprintf(`readlink /proc/%d/ns/%s`, h.PID, ns))))
			if got == "" || got == host {
				t.Errorf("the kernel's %s namespace is %q, the host's %q", ns, got, host)
			}
		}
		out := stdout(bash(t, ctx, s, `sh -c 'for p in /proc/[0-9]*; do tr "\0" " " < $p/cmdline; echo; done'`))
		if strings.Contains(out, os.Args[0]) || strings.Contains(out, "kubelet") || strings.Contains(out, "containerd") {
			t.Errorf("host processes are seen:\n%s", out)
		}
	})
	t.Run("NoCredentials", func(t *testing.T) {
		out := stdout(bash(t, ctx, s, `sh -c 'env; tr "\0" "\n" < /proc/1/environ'`))
		if strings.Contains(out, secret) || strings.Contains(out, "GITHUB_TOKEN") {
			t.Errorf("a credential reached the sandbox:\n%s", out)
		}
		if !strings.Contains(out, "PADDOCK_PLAIN=plain") {
			t.Errorf("a named plain variable did not pass:\n%s", out)
		}
	})
	t.Run("MemoryLimit", func(t *testing.T) {
		res := bash(t, ctx, s, `sh -c 'cat /sys/fs/cgroup/memory.max /sys/fs/cgroup/memory/memory.limit_in_bytes 2>/dev/null; true'`)
		if got := strings.TrimSpace(stdout(res)); got != strconv.Itoa(docker.DefaultMemory) {
			t.Errorf("memory limit %q, want %d", got, docker.DefaultMemory)
		}
	})
}

// Each default gives way when asked: a capability kept, a writable root.
func TestSecurityKubernetesSettings(t *testing.T) {
	c := k8sCluster(t)
	ctx := testContext(t)
	s, _ := openK8s(t, ctx, c, docker.Hardening{CapAdd: []string{"chown"}, WritableRoot: true, Memory: 256 << 20}, nil)
	if v := statusField(t, ctx, s, "CapBnd"); v != "0000000000000001" {
		t.Errorf("asked for CAP_CHOWN, CapBnd is %s", v)
	}
	res := bash(t, ctx, s, `sh -c 'cat /sys/fs/cgroup/memory.max /sys/fs/cgroup/memory/memory.limit_in_bytes 2>/dev/null; true'`)
	if got := strings.TrimSpace(stdout(res)); got != strconv.Itoa(256<<20) {
		t.Errorf("memory limit %q, want %d", got, 256<<20)
	}
}

// k8sScripts are scripts within the kernel's grammar that run the same in the pod (busybox's
// programs) as under bash on the host.
var k8sScripts = []string{
	`echo hello; echo world`,
	`x=3; echo $((x * 7)); echo "${x}s"`,
	`for i in 1 2 3; do printf '%s-' "$i"; done; echo`,
	`f() { echo "in f: $1"; return 3; }; f arg; echo "status $?"`,
	`printf 'b\na\nc\n' | sort | head -n 2`,
	`echo one > o.txt; echo two >> o.txt; cat o.txt; wc -l < o.txt`,
	`ls missing-file 2>/dev/null || echo "absent"`,
	`a=(x y z); echo ${#a[@]} ${a[1]}`,
	`case abc in a*) echo starts-a;; *) echo other;; esac`,
	`echo $(echo nested $(echo deep))`,
	`false; echo $?; true && echo and || echo or`,
	`s="a b  c"; for w in $s; do echo "[$w]"; done`,
	`mkdir -p d/e && cd d/e && basename "$PWD"`,
	`[ -d /tmp ] && echo tmp; [ -d /nope ] || echo no-nope`,
	`exit 5`,
}

// The differential test: each script gives the same output and status from the kernel in a
// pod as from bash on the host. The pod's HOME is its workspace here, not the sandbox's
// default /tmp: the policy takes a sandbox's home to hold credentials (~/.ssh and the rest,
// on a disk the host does not see), so a step naming it (`[ -d /tmp ]`) is secret and
// asks, and with nobody attached to answer is refused with 126, in a pod as in a container.
func TestDifferentialKubernetes(t *testing.T) {
	c := k8sCluster(t)
	bashBin := peer.Program(t, "bash", "bash")
	ctx := testContext(t)
	e := k8sEnv(t, c, kernelBinary(t), docker.Hardening{})
	sandboxEnv := e.Environ
	e.Environ = func(host, names []string) []string {
		env := sandboxEnv(host, names)
		for i, kv := range env {
			if strings.HasPrefix(kv, "HOME=") {
				env[i] = "HOME=/work"
			}
		}
		return env
	}
	s := open(t, ctx, e, nil, nil, nil)
	for i, src := range k8sScripts {
		dir := filepath.Join(e.Workspace, "d"+strconv.Itoa(i))
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(dir, 65534, 65534); err != nil {
			t.Fatal(err)
		}
		cmd := exec.CommandContext(ctx, bashBin, "-c", src)
		cmd.Dir = t.TempDir()
		want, err := cmd.Output()
		wantStatus := 0
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			wantStatus = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		res := bash(t, ctx, s, "cd d"+strconv.Itoa(i)+"; "+src)
		if got := stdout(res); got != string(want) || res.End.Status != wantStatus {
			t.Errorf("%s:\n pod  %q status %d\n bash %q status %d\n%s", src, got, res.End.Status, want, wantStatus, res)
		}
	}
}

// sessionPods returns the names of the pods this process made.
func sessionPods(t testing.TB, ctx context.Context, c cluster) []string {
	t.Helper()
	list, err := c.Client.CoreV1().Pods(c.Namespace).List(ctx, metav1.ListOptions{LabelSelector: kubernetes.LabelManaged + "=1," + docker.LabelPID + "=" + strconv.Itoa(os.Getpid())})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range list.Items {
		names = append(names, p.Name)
	}
	return names
}

// settled waits until the goroutines of this process are back to at most n (the exec
// streams' and watches' have ended). Go tells of no goroutine's end, so the count is read
// again every 20 ms, for at most 30 s: their owners have already waited for them, and what
// is left ends at once (a stream's closing read).
func settled(t *testing.T, n int) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		return runtime.NumGoroutine() <= n, nil
	})
	if err != nil {
		buf := make([]byte, 1<<20)
		t.Fatalf("%d goroutines left, %d before:\n%s", runtime.NumGoroutine(), n, buf[:runtime.Stack(buf, true)])
	}
}

// noPods waits until no pod of this process is left, for at most a minute.
func noPods(t *testing.T, ctx context.Context, c cluster) {
	t.Helper()
	untilNoPods(t, ctx, c, func(o *metav1.ListOptions) {
		o.LabelSelector = kubernetes.LabelManaged + "=1," + docker.LabelPID + "=" + strconv.Itoa(os.Getpid())
	}, nil)
}

// untilNoPods waits until none of the pods sel selects is left that counts (all, when counts
// is nil): on a watch of them (an informer's, which lists them again when its watch breaks,
// as an API server's restart breaks it), for at most a minute.
func untilNoPods(t *testing.T, ctx context.Context, c cluster, sel func(*metav1.ListOptions), counts func(*corev1.Pod) bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	lw := cache.NewFilteredListWatchFromClient(c.Client.CoreV1().RESTClient(), "pods", c.Namespace, sel)
	var pods cache.Store
	left := func() []string {
		var names []string
		for _, o := range pods.List() {
			if p := o.(*corev1.Pod); counts == nil || counts(p) {
				names = append(names, p.Name)
			}
		}
		return names
	}
	_, err := watchtools.UntilWithSync(ctx, lw, &corev1.Pod{}, func(s cache.Store) (bool, error) {
		pods = s
		return len(left()) == 0, nil
	}, func(watch.Event) (bool, error) {
		return len(left()) == 0, nil
	})
	if err != nil {
		var names []string
		if pods != nil {
			names = left()
		}
		t.Fatalf("pods left: %v (%v)", names, err)
	}
}

// midStep runs a long step in a session of its own and, once the step runs, does gone to
// its pod; the step must end with the typed error of a pod that went away, and nothing of
// the session is left, pod or goroutine.
func midStep(t *testing.T, gone func(ctx context.Context, c cluster, pod string) error) {
	c := k8sCluster(t)
	noPods(t, context.Background(), c)
	before := runtime.NumGoroutine()
	ctx := testContext(t)
	e := k8sEnv(t, c, kernelBinary(t), docker.Hardening{})
	s, err := orchestrator.Open(ctx, orchestrator.Config{Workspace: e.Workspace, Transport: e.Transport, Kernel: e.Kernel,
		Env: e.Environ(os.Environ(), nil), PathMap: e.PathMap, Ephemeral: e.Ephemeral})
	if err != nil {
		t.Fatal(err)
	}
	pods := sessionPods(t, ctx, c)
	if len(pods) != 1 {
		t.Fatalf("pods of the session: %v", pods)
	}
	var once sync.Once
	_, err = s.Run(ctx, orchestrator.Call{
		Script: `echo started; sleep 1000`,
		Live: func(_, fd int, data []byte) {
			if strings.Contains(string(data), "started") {
				once.Do(func() {
					if err := gone(ctx, c, pods[0]); err != nil {
						t.Errorf("the pod was not taken away: %v", err)
					}
				})
			}
		},
	})
	// The session reports the kernel's end with the transport's error in its text.
	if !errors.Is(err, orchestrator.ErrKernelGone) || !strings.Contains(err.Error(), "the session's pod "+pods[0]+" is gone") {
		t.Errorf("the step ended with %v (%T), want the kernel gone with its pod", err, err)
	}
	s.Close()
	noPods(t, ctx, c)
	settled(t, before+2)
}

// A pod deleted while a step runs: the step ends with the typed error, nothing is left.
func TestKubernetesPodDeletedMidStep(t *testing.T) {
	midStep(t, func(ctx context.Context, c cluster, pod string) error {
		return c.Client.CoreV1().Pods(c.Namespace).Delete(ctx, pod, metav1.DeleteOptions{})
	})
}

// A pod evicted (the Eviction API, as a drain or the node's pressure takes pods away) while
// a step runs: the same.
func TestKubernetesPodEvictedMidStep(t *testing.T) {
	midStep(t, func(ctx context.Context, c cluster, pod string) error {
		return c.Client.PolicyV1().Evictions(c.Namespace).Evict(ctx, &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: pod, Namespace: c.Namespace}})
	})
}

// The API server restarted while a session is open and a step runs: the kernel's exec
// stream goes with it, so the step ends with the kernel gone (not a hang); the session
// survives, its next step run by a kernel in a new pod, and the first pod is deleted once
// the API server is back; nothing is left, pod or goroutine.
func TestKubernetesAPIServerRestart(t *testing.T) {
	c := k8sCluster(t)
	if c.State == "" {
		needPeer(t, "PADDOCK_K8S_STATE does not name the test cluster's state (its API server cannot be restarted)")
	}
	noPods(t, context.Background(), c)
	before := runtime.NumGoroutine()
	// The restart and what follows may take a minute and more: the new server's start (up
	// to 20 s on a busy machine), then the replacement's pod waits for the scheduler, whose
	// watches come back with back-off once the API server's cache is ready again (up to
	// 70 s seen). The test's own bound is wider than testContext's.
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	e := k8sEnv(t, c, kernelBinary(t), docker.Hardening{})
	replaced := make(chan struct{}, 1)
	s, err := orchestrator.Open(ctx, orchestrator.Config{Workspace: e.Workspace, Transport: e.Transport, Kernel: e.Kernel,
		Env: e.Environ(os.Environ(), nil), PathMap: e.PathMap, Ephemeral: e.Ephemeral, Replaced: func() {
			select {
			case replaced <- struct{}{}:
			default:
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	first := sessionPods(t, ctx, c)
	if len(first) != 1 {
		t.Fatalf("pods of the session: %v", first)
	}
	started := make(chan struct{})
	type outcome struct {
		res *orchestrator.Result
		err error
	}
	step := make(chan outcome, 1)
	go func() {
		var once sync.Once
		res, err := s.Run(ctx, orchestrator.Call{Script: `echo started; sleep 1000`, Live: func(_, _ int, data []byte) {
			if strings.Contains(string(data), "started") {
				once.Do(func() { close(started) })
			}
		}})
		step <- outcome{res, err}
	}()
	select {
	case <-started:
	case o := <-step:
		t.Fatalf("the step ended before the restart: %v %v", o.res, o.err)
	}
	restartAPIServer(t, c)
	o := <-step
	if !errors.Is(o.err, orchestrator.ErrKernelGone) {
		t.Errorf("the step running across the restart ended with %v (%T) %v, want the kernel gone", o.err, o.err, o.res)
	}
	t.Logf("the step running across the restart: %v", o.err)
	res, err := s.Bash(ctx, `echo after`)
	if err != nil || stdout(res) != "after\n" {
		t.Fatalf("a step after the restart: %v %v", res, err)
	}
	// The session tells of its kernel's replacement from a goroutine of its own.
	select {
	case <-replaced:
	case <-ctx.Done():
		t.Errorf("the step after the restart ran, but the session's kernel was not replaced")
	}
	if err := s.Close(); err != nil {
		t.Error(err)
	}
	noPods(t, ctx, c)
	settled(t, before+2)
}

// restartAPIServer stops the test cluster's API server and starts it again by its binary's
// path, with the arguments and environment of the one that ran (its /proc/PID/cmdline and
// environ), and waits until it is ready.
func restartAPIServer(t *testing.T, c cluster) {
	t.Helper()
	pidFile := filepath.Join(c.State, "kube-apiserver.pid")
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	argv := procStrings(t, pid, "cmdline")
	env := procStrings(t, pid, "environ")
	if len(argv) == 0 {
		t.Fatalf("the API server (pid %d) has no command line", pid)
	}
	// Its binary: argv[0] when it is a path, else argv[0] found on the PATH it ran with
	// (/proc/PID/exe is no help when its build cache's file was replaced since it started).
	bin := argv[0]
	if !strings.Contains(bin, "/") {
		for _, kv := range env {
			if dirs, ok := strings.CutPrefix(kv, "PATH="); ok {
				for _, d := range filepath.SplitList(dirs) {
					if fi, err := os.Stat(filepath.Join(d, bin)); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
						bin = filepath.Join(d, bin)
						break
					}
				}
			}
		}
	}
	if !filepath.IsAbs(bin) {
		t.Fatalf("the API server's binary %q is not found on the PATH it ran with", argv[0])
	}
	// Its end is waited on through a pidfd (it is not this process's child): poll(2) finds
	// the descriptor readable once the process has ended. At SIGTERM it stops listening at
	// once, then waits for the requests it still serves, the cluster's watches among them,
	// for up to its request timeout (a minute): as a supervisor with a short grace would, it
	// is killed when it has not ended within three seconds.
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		t.Fatalf("pidfd of the API server (pid %d): %v", pid, err)
	}
	if err := unix.PidfdSendSignal(fd, unix.SIGTERM, nil, 0); err != nil {
		unix.Close(fd)
		t.Fatal(err)
	}
	ended := pidfdEnded(fd, 3*time.Second)
	if !ended {
		t.Logf("the API server (pid %d) has not ended three seconds after SIGTERM: killed", pid)
		if err := unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0); err != nil {
			unix.Close(fd)
			t.Fatal(err)
		}
		ended = pidfdEnded(fd, time.Minute)
	}
	unix.Close(fd)
	if !ended {
		t.Fatalf("the API server (pid %d) did not end", pid)
	}

	log, err := os.OpenFile(filepath.Join(c.State, "logs", "kube-apiserver.log"), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	cmd := exec.Command(bin, argv[1:]...)
	cmd.Env = env
	cmd.Stdout, cmd.Stderr = log, log
	// A session of its own, as up starts it: it outlives this process, and the cluster's
	// teardown stops it by its pid file.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(pidFile, []byte(strconv.Itoa(cmd.Process.Pid)+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	fd, err = unix.PidfdOpen(cmd.Process.Pid, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	// An API server tells of its readiness only when asked (/readyz): it is asked every
	// 100 ms for at most two minutes, and the wait fails at once if the server ends.
	var last error
	err = wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		if pidfdEnded(fd, 0) {
			return false, fmt.Errorf("the API server started again (%s) ended; see %s", bin, log.Name())
		}
		ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		_, last = c.Client.CoreV1().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		return last == nil, nil
	})
	if err != nil {
		t.Fatalf("the API server is not ready again: %v (%v)", err, last)
	}
}

// procStrings is a /proc/PID file of NUL-ended strings (cmdline, environ).
func procStrings(t *testing.T, pid int, name string) []string {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/%s", pid, name))
	if err != nil {
		t.Fatal(err)
	}
	if len(b) == 0 {
		return nil
	}
	return strings.Split(strings.TrimSuffix(string(b), "\x00"), "\x00")
}

// pidfdEnded says whether the process of a pidfd ends within d (0: has ended).
func pidfdEnded(fd int, d time.Duration) bool {
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	deadline := time.Now().Add(d)
	for {
		n, err := unix.Poll(fds, int(time.Until(deadline).Milliseconds()))
		if err == unix.EINTR {
			continue
		}
		return err == nil && n > 0
	}
}
