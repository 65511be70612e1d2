package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/paddockhq/paddock/client"
	"github.com/paddockhq/paddock/daemon/api"
	"github.com/paddockhq/paddock/orchestrator"
	"github.com/paddockhq/paddock/pool"
	"github.com/paddockhq/paddock/transport"
	"github.com/paddockhq/paddock/transport/docker"
	"github.com/paddockhq/paddock/transport/kubernetes"
)

// k8sDaemonEnv is the environment of a paddock serve whose sessions run on the test
// cluster: its global settings name the cluster, the namespace and the sandbox image, and
// pass PADDOCK_MARK to the pods.
func k8sDaemonEnv(t *testing.T, c cluster, mark string) []string {
	t.Helper()
	cfg := t.TempDir()
	settings := map[string]any{"kernelTransport": map[string]any{
		"kind": "kubernetes",
		"env":  []string{"PADDOCK_MARK"},
		"kubernetes": map[string]any{"kubeconfig": os.Getenv("PADDOCK_KUBECONFIG"), "namespace": c.Namespace,
			"image": c.Image, "pullPolicy": "Never"},
	}}
	b, _ := json.Marshal(settings)
	if err := os.MkdirAll(filepath.Join(cfg, "paddock"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(cfg, "paddock", "settings.json"), b, 0o600); err != nil {
		t.Fatal(err)
	}
	return append(os.Environ(), "XDG_CONFIG_HOME="+cfg, "PADDOCK_MARK="+mark)
}

// podGone waits until the pod name is gone (a pod deleted at once is gone within the API
// server's answer; one deleted with a grace goes once its kernel ended).
func podGone(t *testing.T, ctx context.Context, c cluster, name string) {
	t.Helper()
	untilNoPods(t, ctx, c, func(o *metav1.ListOptions) { o.FieldSelector = "metadata.name=" + name }, nil)
}

// A daemon killed outright with two kubernetes sessions open, one on a pod of its own and
// one on a pool's warm pod, each running a job: their pods go on (each kernel listens in its
// pod, and the pod's annotation names the session's directory, which the daemon's state
// keeps), the next daemon finds them, attaches again through a new join and lists the
// sessions open in the same pods, with their working directory and environment; the jobs
// end with every line; new steps run; closing leaves no pod, the first pool's warm pod that
// no session claimed included.
func TestKubernetesDaemonRestart(t *testing.T) {
	c := k8sCluster(t)
	bin := paddockBinary(t)
	env := k8sDaemonEnv(t, c, "from-the-daemon")
	dir, err := os.MkdirTemp("/tmp", "pd-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	sock := filepath.Join(dir, "run", "paddock.sock")
	state := filepath.Join(dir, "state")
	first, firstDone := startServe(t, bin, sock, state, env)
	cl, err := client.New("unix://" + sock)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	ws := k8sWorkspace(t)

	type opened struct {
		name, id, job, pod, pool string
	}
	var sessions []opened
	for _, name := range []string{"own", "pooled"} {
		req := api.OpenRequest{Workspace: ws, Transport: "kubernetes", BlockingBudget: "300ms"}
		if name == "pooled" {
			req.Settings = map[string]string{"kernelTransport.docker.pool": "1"}
		}
		s, err := cl.Open(ctx, req)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		r, err := cl.Bash(ctx, s.ID, api.BashRequest{Script: "echo " + name + " > /tmp/mark; cat /proc/sys/kernel/hostname"})
		if err != nil || r.End.Status != 0 || len(r.Steps) != 2 {
			t.Fatalf("%s: %v %+v", name, err, r)
		}
		pod := strings.TrimSpace(r.Steps[1].Stdout.Text)
		// A job across the kill: it says it started, waits for the test's gate, then ends.
		gate := filepath.Join(ws, "gate-"+name)
		r, err = cl.Bash(ctx, s.ID, api.BashRequest{Script: fmt.Sprintf(`sh -c 'echo start; while [ ! -e %s ]; do sleep 0.05; done; echo end'`, gate)})
		if err != nil || r.End.Kind != orchestrator.Detached {
			t.Fatalf("%s: %v %+v", name, err, r)
		}
		p, err := c.Client.CoreV1().Pods(c.Namespace).Get(ctx, pod, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("%s: the session's pod %s: %v", name, pod, err)
		}
		if name == "pooled" && p.Labels[pool.Label] == "" {
			t.Fatalf("the pooled session's pod %s is not a pool's: %v", pod, p.Labels)
		}
		sessions = append(sessions, opened{name, s.ID, r.End.Job, pod, p.Labels[pool.Label]})
	}
	oldPool := sessions[1].pool
	first.Process.Signal(syscall.SIGKILL)
	<-firstDone
	for _, o := range sessions {
		p, err := c.Client.CoreV1().Pods(c.Namespace).Get(ctx, o.pod, metav1.GetOptions{})
		if err != nil || p.DeletionTimestamp != nil || p.Status.Phase != corev1.PodRunning {
			t.Fatalf("%s: the pod %s after the daemon's kill: %v", o.name, o.pod, err)
		}
	}

	startServe(t, bin, sock, state, env, "--drain")
	cl.Close()
	for _, o := range sessions {
		info, err := cl.Session(ctx, o.id)
		if err != nil || info.State != api.Open || info.Transport != "kubernetes" {
			t.Fatalf("%s: the session after the restart: %v %s %s (%s)", o.name, err, info.State, info.Transport, info.Reason)
		}
		r, err := cl.Bash(ctx, o.id, api.BashRequest{Script: `pwd; echo $PADDOCK_MARK; cat /tmp/mark; cat /proc/sys/kernel/hostname`})
		if err != nil || len(r.Steps) != 4 {
			t.Fatalf("%s: a step after the restart: %v %+v", o.name, err, r)
		}
		var got []string
		for _, st := range r.Steps {
			got = append(got, strings.TrimSpace(st.Stdout.Text))
		}
		if want := []string{ws, "from-the-daemon", o.name, o.pod}; strings.Join(got, "|") != strings.Join(want, "|") {
			t.Errorf("%s: after the restart the session says %q, want %q (its directory, its environment, its pod)", o.name, got, want)
		}
		if err := os.WriteFile(filepath.Join(ws, "gate-"+o.name), nil, 0o644); err != nil {
			t.Fatal(err)
		}
		job, err := cl.Wait(ctx, o.id, o.job, "")
		if err != nil {
			t.Fatal(err)
		}
		if res := job.Result; res == nil || res.End.Kind != orchestrator.Finished || len(res.Steps) != 1 || res.Steps[0].Stdout.Text != "start\nend\n" {
			t.Errorf("%s: the job taken up ended %+v", o.name, job.Result)
		}
		if _, err := cl.CloseSession(ctx, o.id); err != nil {
			t.Errorf("%s: close: %v", o.name, err)
		}
		podGone(t, ctx, c, o.pod)
	}
	// The first daemon's warm pod that no session claimed went with its pool: its directory
	// was dropped at the restart, and the reaper deleted it.
	untilNoPods(t, ctx, c, func(o *metav1.ListOptions) { o.LabelSelector = pool.Label + "=" + oldPool },
		func(p *corev1.Pod) bool { return p.DeletionTimestamp == nil })
}

// listenAll starts every kernel listening in a directory of its own under dir, as a
// daemon's sessions do.
type listenAll struct {
	*kubernetes.Transport
	dir string
}

func (l listenAll) Start(ctx context.Context, spec transport.Spec) (transport.Kernel, error) {
	spec.Listen, spec.Key = filepath.Join(l.dir, randomName("k-")), randomName("key-")
	return l.Transport.Start(ctx, spec)
}

// The conformance suite on kernels that listen in their pods, reached through a join exec:
// the frames of a listening kernel go through the same contract. A listening kernel keeps
// the key in its memory alone, so it makes itself undumpable, and its /proc/PID/cwd is
// closed to the sandbox's programs (its container's working directory is the spec's: the
// plan's unit tests hold it).
func TestConformanceKubernetesListening(t *testing.T) {
	c := k8sCluster(t)
	kernel := kernelBinary(t)
	RunConformance(t, func(t *testing.T) Env {
		e := k8sEnv(t, c, kernel, docker.Hardening{User: "0:0"})
		e.Transport = listenAll{Transport: e.Transport.(*kubernetes.Transport), dir: t.TempDir()}
		e.Listens, e.HidesProcCwd = true, true
		return e
	})
}

// A listening kernel's pod deleted while a step runs: the deletion's TERM reaches the kernel
// itself (the pod's first process), which ends the step as a TERM ends it, reports that,
// and exits, as a Docker sandbox's listening kernel does when its container is stopped. The
// session's next step runs on a new pod; closing it leaves nothing, pod or goroutine (the
// pods' watches and the joins' exec streams included).
func TestKubernetesListeningPodDeletedMidStep(t *testing.T) {
	c := k8sCluster(t)
	noPods(t, context.Background(), c)
	before := runtime.NumGoroutine()
	ctx := testContext(t)
	e := k8sEnv(t, c, kernelBinary(t), docker.Hardening{})
	tr := listenAll{Transport: e.Transport.(*kubernetes.Transport), dir: t.TempDir()}
	s, err := orchestrator.Open(ctx, orchestrator.Config{Workspace: e.Workspace, Transport: tr, Kernel: e.Kernel,
		Env: e.Environ(os.Environ(), nil), PathMap: e.PathMap})
	if err != nil {
		t.Fatal(err)
	}
	pods := sessionPods(t, ctx, c)
	if len(pods) != 1 {
		t.Fatalf("pods of the session: %v", pods)
	}
	var once sync.Once
	res, err := s.Run(ctx, orchestrator.Call{
		Script: `echo started; sleep 1000`,
		Live: func(_, fd int, data []byte) {
			if strings.Contains(string(data), "started") {
				once.Do(func() {
					if err := c.Client.CoreV1().Pods(c.Namespace).Delete(ctx, pods[0], metav1.DeleteOptions{}); err != nil {
						t.Errorf("the pod was not deleted: %v", err)
					}
				})
			}
		},
	})
	if err != nil || len(res.Steps) != 2 || res.Steps[1].Status != 128+int(syscall.SIGTERM) {
		t.Errorf("the step ended with %v %s, want it ended by the TERM", err, res)
	}
	podGone(t, ctx, c, pods[0])
	if out := stdout(bash(t, ctx, s, `cat /proc/sys/kernel/hostname`)); strings.TrimSpace(out) == pods[0] || out == "" {
		t.Errorf("the next step ran in %q, want a new pod", out)
	}
	s.Close()
	noPods(t, ctx, c)
	settled(t, before+2)
}
