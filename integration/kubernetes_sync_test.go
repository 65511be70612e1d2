package integration

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	containerd "github.com/containerd/containerd/v2/client"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/paddockhq/paddock/config"
	"github.com/paddockhq/paddock/daemon/api"
	"github.com/paddockhq/paddock/front"
	"github.com/paddockhq/paddock/images"
	"github.com/paddockhq/paddock/orchestrator"
	"github.com/paddockhq/paddock/session"
	"github.com/paddockhq/paddock/transport/docker"
	"github.com/paddockhq/paddock/transport/kubernetes"
)

// k8sSettings are settings that put a session on the test cluster, with set's keys added.
func k8sSettings(t *testing.T, c cluster, ws string, set map[string]any) *config.Loaded {
	t.Helper()
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	all := map[string]any{
		"kernelTransport.kind":                  "kubernetes",
		"kernelTransport.kubernetes.kubeconfig": os.Getenv("PADDOCK_KUBECONFIG"),
		"kernelTransport.kubernetes.namespace":  c.Namespace,
		"kernelTransport.kubernetes.image":      c.Image,
		"kernelTransport.kubernetes.pullPolicy": "Never",
	}
	for k, v := range set {
		all[k] = v
	}
	l, err := config.Load(config.Options{Workspace: ws, Set: all, SetBy: "test"})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// A synced workspace on the cluster: the pod works on a copy (the parent is not touched
// while the session runs), and when the session closes its changes come back by the
// copy-on-write merge: files made, changed and removed are taken; a file the parent changed
// too keeps the parent's version, the pod's saved where the report says; the report reaches
// the front end's hand-back; no pod is left.
func TestKubernetesSync(t *testing.T) {
	c := k8sCluster(t)
	kernelBinary(t)
	ctx := testContext(t)
	ws := k8sWorkspace(t)
	for name, data := range map[string]string{"same.txt": "keep\n", "edit.txt": "a\n", "both.txt": "base\n", "gone.txt": "x\n"} {
		if err := os.WriteFile(filepath.Join(ws, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("XDG_CACHE_HOME", t.TempDir()) // where the sync's copy is kept
	l := k8sSettings(t, c, ws, map[string]any{"kernelTransport.kubernetes.sync": true})
	var notices []string
	var handed []*api.Report
	loc, err := front.Open(ctx, session.Options{Workspace: ws, Settings: l},
		func(n string) { notices = append(notices, n) }, func(r *api.Report) { handed = append(handed, r) })
	if err != nil {
		t.Fatal(err)
	}
	closed := false
	t.Cleanup(func() {
		if !closed {
			loc.Close()
		}
	})
	if !strings.Contains(strings.Join(notices, "\n"), kubernetes.SyncDir) {
		t.Errorf("no notice says the workspace is copied into the pod: %q", notices)
	}
	res, err := loc.Session.Bash(ctx, `pwd; cat same.txt; echo b > edit.txt; echo pod > both.txt; echo new > made.txt; rm gone.txt; mkdir sub; echo deep > sub/f; cat /proc/sys/kernel/hostname`)
	if err != nil {
		t.Fatal(err)
	}
	if res.End.Status != 0 || len(res.Steps) != 9 {
		t.Fatalf("the script: %s", res)
	}
	if got := strings.TrimSpace(res.Steps[0].Stdout.Text) + "|" + res.Steps[1].Stdout.Text; got != kubernetes.SyncDir+"|keep\n" {
		t.Errorf("pwd and same.txt in the pod: %q", got)
	}
	pod := strings.TrimSpace(res.Steps[8].Stdout.Text)
	if b, _ := os.ReadFile(filepath.Join(ws, "edit.txt")); string(b) != "a\n" {
		t.Errorf("the parent changed while the session ran: edit.txt %q", b)
	}
	if _, err := os.Stat(filepath.Join(ws, "made.txt")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("made.txt is in the parent before the hand-back: %v", err)
	}
	// The parent's own change to a file the pod changed too.
	if err := os.WriteFile(filepath.Join(ws, "both.txt"), []byte("host\n"), 0o644); err != nil {
		t.Fatal(err)
	}

	rep, err := loc.Close()
	closed = true
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{"same.txt": "keep\n", "edit.txt": "b\n", "made.txt": "new\n", "sub/f": "deep\n", "both.txt": "host\n"} {
		if b, err := os.ReadFile(filepath.Join(ws, name)); err != nil || string(b) != want {
			t.Errorf("%s in the parent after the hand-back: %q %v, want %q", name, b, err, want)
		}
	}
	if _, err := os.Stat(filepath.Join(ws, "gone.txt")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("gone.txt, removed in the pod, is in the parent: %v", err)
	}
	if rep == nil || len(rep.Conflicts) != 1 || rep.Conflicts[0].Path != "both.txt" {
		t.Fatalf("the hand-back's report: %+v", rep)
	}
	if b, err := os.ReadFile(filepath.Join(rep.Dir, rep.Conflicts[0].Saved)); err != nil || string(b) != "pod\n" {
		t.Errorf("the pod's both.txt, where the report says it is saved: %q %v", b, err)
	}
	if len(handed) != 1 || handed[0] == nil || len(handed[0].Conflicts) != 1 {
		t.Errorf("the front end's hand-back got %+v", handed)
	}
	podGone(t, ctx, c, pod)
}

// A synced session whose kernel is killed from inside its pod (a step of the agent's): the
// pod's tree comes back as the kernel ends, and no second pod is started on the host's copy
// (one was, the copy bound into it as a hostPath: on a cluster of many nodes a directory of
// whatever node it ran on, on this one a live bind of the host's copy); the next step fails
// as gone, and closing hands back what the first pod made. No pod is left.
func TestKubernetesSyncKernelKilled(t *testing.T) {
	c := k8sCluster(t)
	kernelBinary(t)
	ctx := testContext(t)
	ws := k8sWorkspace(t)
	cache := t.TempDir()
	t.Setenv("XDG_CACHE_HOME", cache) // where the sync's copy is kept
	loc := openSynced(t, ctx, c, ws)
	res, err := loc.Session.Bash(ctx, `echo one > a.txt; cat /proc/sys/kernel/hostname`)
	if err != nil || res.End.Status != 0 {
		t.Fatalf("%v %s", err, res)
	}
	pod := strings.TrimSpace(res.Steps[1].Stdout.Text)
	loc.Session.Bash(ctx, `sh -c 'kill -9 $PPID'`) // the kernel ends under its own step
	res, err = loc.Session.Bash(ctx, `echo two > b.txt`)
	if err != nil || res.End.Kind != "failed" || !strings.Contains(res.End.Message, pod+" is gone") || len(res.Steps) != 0 {
		t.Errorf("a step after the synced kernel ended: %v %s (%+v)", err, res, res.End)
	}
	// No pod of the namespace binds anything of the host's cache, where the copy is.
	pods, err := c.Client.CoreV1().Pods(c.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		for _, v := range p.Spec.Volumes {
			if v.HostPath != nil && strings.HasPrefix(v.HostPath.Path, cache) {
				t.Errorf("pod %s binds the host's %s", p.Name, v.HostPath.Path)
			}
		}
	}
	rep, err := loc.Close()
	if err != nil {
		t.Fatalf("the hand-back: %v", err)
	}
	if b, err := os.ReadFile(filepath.Join(ws, "a.txt")); err != nil || string(b) != "one\n" {
		t.Errorf("a.txt, made in the pod: %q %v (report %+v)", b, err, rep)
	}
	if _, err := os.Stat(filepath.Join(ws, "b.txt")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("b.txt, of a step that never ran: %v", err)
	}
	podGone(t, ctx, c, pod)
}

// A pod's tree that tar cannot read whole (files its user made unreadable, each a line of
// tar's complaint): the hand-back fails, says so, and keeps the copy sent; what the pod said
// reaches the error by its end alone (the whole of it was kept, as long as the pod made it).
func TestKubernetesSyncUnreadableTree(t *testing.T) {
	c := k8sCluster(t)
	kernelBinary(t)
	ctx := testContext(t)
	ws := k8sWorkspace(t)
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	loc := openSynced(t, ctx, c, ws)
	// 400 files of 200-byte names: tar's complaints, some 100 KB.
	res, err := loc.Session.Bash(ctx, `mkdir d && cd d && n=$(printf '%0200d' 0) && for i in $(seq 400); do echo x > $i$n; done && chmod 000 * && cat /proc/sys/kernel/hostname`)
	if err != nil || res.End.Status != 0 {
		t.Fatalf("%v %s", err, res)
	}
	pod := strings.TrimSpace(res.Steps[len(res.Steps)-1].Stdout.Text)
	_, err = loc.Close()
	if !errors.Is(err, kubernetes.ErrNotFetched) {
		t.Fatalf("the hand-back of an unreadable tree: %v", err)
	}
	if n := len(err.Error()); n > 8<<10 {
		t.Errorf("the hand-back's error is %d bytes: the pod's words are kept whole", n)
	}
	if _, err := os.Stat(filepath.Join(ws, "d")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("d, of a tree that did not come back, is in the parent: %v", err)
	}
	podGone(t, ctx, c, pod)
}

// openSynced opens a session on the cluster with ws synced into its pod, closed at the
// test's end if the test has not closed it (Close is once).
func openSynced(t *testing.T, ctx context.Context, c cluster, ws string) *front.Local {
	t.Helper()
	l := k8sSettings(t, c, ws, map[string]any{"kernelTransport.kubernetes.sync": true})
	loc, err := front.Open(ctx, session.Options{Workspace: ws, Settings: l}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { loc.Close() })
	return loc
}

// kernelImage builds an image holding the kernel at /paddock-kernel and busybox as cp (or,
// with noKernel, cp alone), and imports it into the cluster's containerd; it is removed from
// both at the end.
func kernelImage(t *testing.T, c cluster, noKernel bool) string {
	t.Helper()
	sock := os.Getenv("PADDOCK_K8S_CONTAINERD")
	if sock == "" {
		needPeer(t, "PADDOCK_K8S_CONTAINERD names no socket of the cluster's containerd")
	}
	e := engine(t)
	bb, err := exec.LookPath("busybox")
	if err != nil {
		needPeer(t, "no busybox to copy the kernel with: %v", err)
	}
	dir := t.TempDir()
	df := "FROM scratch\nCOPY cp /bin/cp\nENV PATH=/bin\nUSER 65534:65534\n"
	if err := copyFile(bb, filepath.Join(dir, "cp"), 0o755); err != nil {
		t.Fatal(err)
	}
	if !noKernel {
		if err := copyFile(kernelBinary(t), filepath.Join(dir, "paddock-kernel"), 0o755); err != nil {
			t.Fatal(err)
		}
		df += "COPY paddock-kernel /paddock-kernel\n"
	}
	if err := os.WriteFile(filepath.Join(dir, "Dockerfile"), []byte(df), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx := testContext(t)
	ref := "localhost/paddock-test-kernel:" + randomName("k")
	if _, err := images.Build(ctx, e, images.BuildOptions{Context: dir, Ref: ref}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { images.Remove(context.Background(), e, ref) })
	cc, err := containerd.New(sock)
	if err != nil {
		needPeer(t, "the cluster's containerd at %s: %v", sock, err)
	}
	t.Cleanup(func() { cc.Close() })
	if _, err := images.ContainerdFromDocker(ctx, e, cc, "k8s.io", "overlayfs", ref, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { images.RemoveContainerd(context.Background(), cc, "k8s.io", ref) })
	return ref
}

// With a kernel image the kernel comes from an init container of that image, confined as
// the sandbox's container is, not streamed in: a session runs steps; an image without the
// kernel, or one the cluster does not hold, fails the opening with the pod's reason, and
// leaves no pod.
func TestKubernetesKernelImage(t *testing.T) {
	c := k8sCluster(t)
	ctx := testContext(t)
	noPods(t, ctx, c)
	e := k8sEnv(t, c, kernelBinary(t), docker.Hardening{})
	tr := e.Transport.(*kubernetes.Transport)
	tr.Settings.KernelImage = kernelImage(t, c, false)
	s := open(t, ctx, e, nil, nil, nil)
	res := bash(t, ctx, s, `echo hi > made; cat made; cat /proc/sys/kernel/hostname`)
	if res.End.Status != 0 || len(res.Steps) != 3 || res.Steps[1].Stdout.Text != "hi\n" {
		t.Fatalf("a step: %s", res)
	}
	name := strings.TrimSpace(res.Steps[2].Stdout.Text)
	pod, err := c.Client.CoreV1().Pods(c.Namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(pod.Spec.InitContainers) != 1 || pod.Spec.InitContainers[0].Image != tr.Settings.KernelImage {
		t.Fatalf("the pod's init containers: %+v", pod.Spec.InitContainers)
	}
	ic := pod.Spec.InitContainers[0].SecurityContext
	if ic == nil || ic.Capabilities == nil || len(ic.Capabilities.Drop) != 1 || ic.Capabilities.Drop[0] != "ALL" ||
		ic.AllowPrivilegeEscalation == nil || *ic.AllowPrivilegeEscalation || ic.ReadOnlyRootFilesystem == nil || !*ic.ReadOnlyRootFilesystem {
		t.Errorf("the kernel image's container is not confined as the sandbox's: %+v", ic)
	}
	if st := pod.Status.InitContainerStatuses; len(st) != 1 || st[0].State.Terminated == nil || st[0].State.Terminated.ExitCode != 0 {
		t.Errorf("the kernel image's copy: %+v", st)
	}
	s.Close()
	podGone(t, ctx, c, name)

	for _, tc := range []struct {
		name, ref, want string
	}{
		{"without the kernel", kernelImage(t, c, true), "the kernel image's copy failed"},
		{"not in the cluster", "localhost/paddock-test-kernel:absent", "ErrImageNeverPull"},
	} {
		e := k8sEnv(t, c, kernelBinary(t), docker.Hardening{})
		e.Transport.(*kubernetes.Transport).Settings.KernelImage = tc.ref
		_, err := orchestrator.Open(ctx, orchestrator.Config{Workspace: e.Workspace, Transport: e.Transport, Kernel: e.Kernel,
			PathMap: e.PathMap, Ephemeral: e.Ephemeral})
		var pe *kubernetes.PodError
		if !errors.As(err, &pe) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want a pod error saying %q", tc.name, err, tc.want)
		}
		noPods(t, ctx, c)
	}
}
