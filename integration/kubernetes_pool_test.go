package integration

import (
	"context"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/paddockhq/paddock/orchestrator"
	"github.com/paddockhq/paddock/pool"
	"github.com/paddockhq/paddock/transport"
	"github.com/paddockhq/paddock/transport/docker"
	"github.com/paddockhq/paddock/transport/environ"
	"github.com/paddockhq/paddock/transport/kubernetes"
	"github.com/paddockhq/paddock/transport/pathmap"
)

// Warm pods on the test cluster (integration/k8s/up): a pool (pool.Pool) over the
// kubernetes transport, as `--pool` makes one.

// k8sPoolWorkspace is a workspace for pooled sessions on the cluster, at /work in the pod,
// and the spec the pool is warmed for.
func k8sPoolWorkspace(t testing.TB) (string, *pathmap.Map, transport.Spec) {
	t.Helper()
	ws := k8sWorkspace(t)
	pm, err := pathmap.New(pathmap.Mount{Sandbox: "/work", Host: ws})
	if err != nil {
		t.Fatal(err)
	}
	return ws, pm, transport.Spec{Kernel: kernelBinary(t), Cwd: "/work", PathMap: pm}
}

// k8sPool is a pool of size warm pods for spec, filled; it is closed at the test's end.
// With listenIn set the warm kernels listen there, each in a directory of its own, as a
// daemon's do.
func k8sPool(t testing.TB, c cluster, size int, spec transport.Spec, listenIn string) *pool.Pool {
	t.Helper()
	tr := c.transport(t, docker.Hardening{})
	tr.Stderr = nil
	p := pool.New(pool.Config{Transport: tr, Size: size, Env: sandboxEnv, Log: slog.New(slog.NewTextHandler(testWriter{t}, nil)),
		ReadyTimeout: 2 * time.Minute, ListenIn: listenIn})
	t.Cleanup(func() { p.Close() })
	if err := p.Warm(spec); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if err := p.WaitReady(ctx, spec, size); err != nil {
		t.Fatalf("the pool did not fill to %d: %v", size, err)
	}
	return p
}

// poolPods are the names of the pods of the pool with id, claimed or not.
func poolPods(t testing.TB, ctx context.Context, c cluster, id string) []string {
	t.Helper()
	list, err := c.Client.CoreV1().Pods(c.Namespace).List(ctx, metav1.ListOptions{LabelSelector: pool.Label + "=" + id})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range list.Items {
		if p.DeletionTimestamp == nil {
			names = append(names, p.Name)
		}
	}
	return names
}

// waitPod watches the pod name until ok says yes of it, failing when ctx ends first.
func waitPod(t testing.TB, ctx context.Context, c cluster, name string, ok func(*corev1.Pod) bool) {
	t.Helper()
	pods := c.Client.CoreV1().Pods(c.Namespace)
	p, err := pods.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if ok(p) {
		return
	}
	w, err := pods.Watch(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", name).String(), ResourceVersion: p.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	for ev := range w.ResultChan() {
		if p, isPod := ev.Object.(*corev1.Pod); isPod && ev.Type != watch.Deleted && ok(p) {
			return
		}
	}
	t.Fatalf("pod %s: the watch ended before it came to be as wanted (%v)", name, ctx.Err())
}

// A session on a pool of warm pods claims the warm pod: it runs in it, in its own working
// directory with its own environment, and the pod takes on the session's label; the pool
// refills with a new pod behind it; closing the session and the pool leaves no pod.
func TestKubernetesPool(t *testing.T) {
	c := k8sCluster(t)
	ctx := testContext(t)
	ws, pm, spec := k8sPoolWorkspace(t)
	os.Mkdir(ws+"/sub", 0o755)
	os.Chown(ws+"/sub", 65534, 65534)
	p := k8sPool(t, c, 1, spec, "")
	warm := poolPods(t, ctx, c, p.ID())
	if len(warm) != 1 {
		t.Fatalf("the pool's pods: %v, want one", warm)
	}
	env, _ := environ.Sandbox(append(os.Environ(), "PADDOCK_MARK=the-session"), []string{"PADDOCK_MARK"}, sandboxEnv, pm)
	t0 := time.Now()
	s, err := orchestrator.Open(ctx, orchestrator.Config{Workspace: ws + "/sub", Transport: p, Kernel: spec.Kernel, Env: env, PathMap: pm, Ephemeral: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("the session was ready in %v", time.Since(t0))
	defer s.Close()
	res := bash(t, ctx, s, `pwd; echo $PADDOCK_MARK; cat /proc/sys/kernel/hostname`)
	if got, want := stdout(res), "/work/sub\nthe-session\n"+warm[0]+"\n"; got != want {
		t.Errorf("the session's step said %q, want %q (in the warm pod)", got, want)
	}
	// The claimed pod is relabelled as the session's, in the background.
	waitPod(t, ctx, c, warm[0], func(p *corev1.Pod) bool {
		return p.Labels[kubernetes.LabelSession] == kubernetes.SessionLabel(s.ID()) && p.Annotations[kubernetes.AnnotationSession] == s.ID()
	})
	if names, err := kubernetes.SessionPods(ctx, c.Client, c.Namespace, s.ID()); err != nil || len(names) != 1 || names[0] != warm[0] {
		t.Errorf("the session's pods: %v %v, want the claimed %s", names, err, warm[0])
	}
	// The pool refills: a new warm pod beside the claimed one.
	waitPoolReady(t, p, spec, 1)
	if now := poolPods(t, ctx, c, p.ID()); len(now) != 2 || !strings.Contains(strings.Join(now, " "), warm[0]) {
		t.Errorf("the pool's pods after the refill: %v, want %s and a new one", now, warm[0])
	}
	if err := s.Close(); err != nil {
		t.Error(err)
	}
	if err := p.Close(); err != nil {
		t.Error(err)
	}
	noPods(t, ctx, c)
}

// waitPoolReady waits until n warm pods are ready.
func waitPoolReady(t testing.TB, p *pool.Pool, spec transport.Spec, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if err := p.WaitReady(ctx, spec, n); err != nil {
		t.Fatalf("the pool did not fill to %d: %v", n, err)
	}
}

// The benchmark of a claim, beside a cold session's ready time, in the same run on the same
// cluster and image:
//
//	go test ./integration -run '^$' -bench 'KubernetesPool' -benchtime 20x
//
// BenchmarkKubernetesPoolClaim/cold opens a session from nothing (a pod created and
// running, the kernel streamed in and exec'd, ping answered); /pool opens one from a full
// pool of two (a warm pod claimed, its working directory taken, ping answered), the pool
// refilled between sessions off the clock. /cold-listening and /pool-listening are the
// same with kernels that listen in their pods, as a daemon's do (the kernel's key written
// and its first process told, then a join exec attached). Each reports the p50 and p99 of
// a session's ready time besides ns/op.
func BenchmarkKubernetesPoolClaim(b *testing.B) {
	c := benchCluster(b)
	for _, listen := range []bool{false, true} {
		suffix := ""
		if listen {
			suffix = "-listening"
		}
		b.Run("cold"+suffix, func(b *testing.B) {
			ws, pm, spec := k8sPoolWorkspace(b)
			k := c.transport(b, docker.Hardening{})
			k.Stderr = nil
			var tr transport.Transport = k
			if listen {
				tr = listenAll{Transport: k, dir: b.TempDir()}
			}
			ctx := context.Background()
			var ds []time.Duration
			b.ResetTimer()
			for range b.N {
				t0 := time.Now()
				s, err := orchestrator.Open(ctx, orchestrator.Config{Workspace: ws, Transport: tr, Kernel: spec.Kernel, Env: sandboxEnv, PathMap: pm, Ephemeral: true})
				if err != nil {
					b.Fatal(err)
				}
				ds = append(ds, time.Since(t0))
				b.StopTimer()
				s.Close()
				b.StartTimer()
			}
			b.StopTimer()
			percentiles(b, ds)
		})
		b.Run("pool"+suffix, func(b *testing.B) {
			ws, pm, spec := k8sPoolWorkspace(b)
			listenIn := ""
			if listen {
				listenIn = b.TempDir()
			}
			p := k8sPool(b, c, 2, spec, listenIn)
			ctx := context.Background()
			var ds []time.Duration
			b.ResetTimer()
			for range b.N {
				t0 := time.Now()
				s, err := orchestrator.Open(ctx, orchestrator.Config{Workspace: ws, Transport: p, Kernel: spec.Kernel, Env: sandboxEnv, PathMap: pm, Ephemeral: true})
				if err != nil {
					b.Fatal(err)
				}
				ds = append(ds, time.Since(t0))
				b.StopTimer()
				s.Close()
				waitPoolReady(b, p, spec, 2)
				b.StartTimer()
			}
			b.StopTimer()
			percentiles(b, ds)
		})
	}
}
