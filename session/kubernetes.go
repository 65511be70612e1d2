package session

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/paddockhq/paddock/config"
	"github.com/paddockhq/paddock/images"
	"github.com/paddockhq/paddock/transport/docker"
	"github.com/paddockhq/paddock/transport/environ"
	"github.com/paddockhq/paddock/transport/kubernetes"
	"github.com/paddockhq/paddock/workspace"
)

func init() { Register(kubernetesProvider{}) }

type kubernetesProvider struct{}

func (kubernetesProvider) Kind() string { return "kubernetes" }

// Options: the container options a pod applies (not network or pids-limit: a pod's
// network is the cluster's, its process limit the node's).
func (kubernetesProvider) Options() []string {
	return []string{"image", "memory", "user", "writable-root", "cap-add", "new-privileges", "no-tmpfs", "mount", "sync", "pool"}
}

// Open makes a kubernetes transport: pods of the settings' image in the settings' cluster,
// context and namespace, confined as the docker settings say; the workspace a hostPath
// volume at its own path (or the path map's volumes), or with sync a copy in the pod
// handed back at the end. Its pods can be kept warm (kernelTransport.docker.pool, as
// containers are), unless the workspace is synced: a sync is its session's pod's alone.
func (kubernetesProvider) Open(ctx context.Context, r *Request) (*Opened, error) {
	closeClient(r)
	kt := r.Settings.Settings.KernelTransport
	k := kt.Kubernetes
	cfg, cli, ns, err := kubernetes.Connect(k.Kubeconfig, k.Context)
	if err != nil {
		return nil, fmt.Errorf("--transport kubernetes: %w (run `paddock doctor`)", err)
	}
	if k.Namespace != "" {
		ns = k.Namespace
	}
	h, err := hardening(r.Transport, kt.Docker)
	if err != nil {
		return nil, err
	}
	img := k.Image
	if img == "" || slices.Contains(r.Transport.Given, "image") {
		img = kt.Docker.Image
	}
	if img == "" {
		return nil, &OptionError{Msg: "--transport kubernetes needs an image the cluster can run (with /bin/sh and cat): kernelTransport.kubernetes.image, or --image"}
	}
	switch corev1.PullPolicy(k.PullPolicy) {
	case "", corev1.PullAlways, corev1.PullIfNotPresent, corev1.PullNever:
	default:
		return nil, &OptionError{Msg: fmt.Sprintf("kernelTransport.kubernetes.pullPolicy %q: Always, IfNotPresent or Never", k.PullPolicy)}
	}
	t := &kubernetes.Transport{Config: cfg, Client: cli, Stderr: r.Stderr, Settings: kubernetes.Settings{
		Namespace: ns, Image: img, KernelImage: k.KernelImage, PullPolicy: corev1.PullPolicy(k.PullPolicy),
		RuntimeClassName: k.RuntimeClassName, NodeSelector: k.NodeSelector,
		Requests: k.Resources.Requests, Limits: k.Resources.Limits, Claims: k.Claims, Hardening: h,
	}}
	arch := runtime.GOARCH
	if a := k.NodeSelector["kubernetes.io/arch"]; a != "" {
		arch = a
	}
	kernel, err := images.Default.Find(ctx, arch)
	if err != nil {
		return nil, err
	}
	op := &Opened{Transport: t, Kernel: kernel, Ephemeral: true, Pools: true}
	if kt.SSH.Sync || k.Sync || r.Resume != "" {
		op.Pools = false
		s, err := kubernetes.StartSync(r.Workspace)
		if err != nil {
			return nil, err
		}
		t.Sync = s
		op.PathMap, op.Workspace = s.PathMap(), s.Copy()
		op.Close = func(ctx context.Context) (*workspace.Report, error) { return s.Handback(ctx) }
		op.Notices = append(op.Notices, fmt.Sprintf("the workspace is copied into the pod at %s; it is handed back when the session ends", kubernetes.SyncDir))
	} else if op.PathMap, err = pathMap(r, true); err != nil {
		return nil, err
	}
	var diags []string
	op.Env, diags = environ.Sandbox(r.Environ, kt.Env, docker.DefaultEnv, op.PathMap)
	op.Notices = append(op.Notices, diags...)
	return op, nil
}

// kubernetesClient is the cluster, context and namespace the settings name now.
func kubernetesClient(ctx context.Context) (*kubernetes.Transport, error) {
	l, err := config.Load(config.Options{})
	if err != nil {
		return nil, err
	}
	k := l.Settings.KernelTransport.Kubernetes
	cfg, cli, ns, err := kubernetes.Connect(k.Kubeconfig, k.Context)
	if err != nil {
		return nil, err
	}
	if k.Namespace != "" {
		ns = k.Namespace
	}
	return &kubernetes.Transport{Config: cfg, Client: cli, Settings: kubernetes.Settings{Namespace: ns}}, nil
}

func (kubernetesProvider) Recover(ctx context.Context, l Left) string {
	ctx, cancel := context.WithTimeout(ctx, reapTimeout)
	defer cancel()
	t, err := kubernetesClient(ctx)
	if err != nil {
		return fmt.Sprintf("its pod cannot be checked: %v", oneLine(err))
	}
	// A pool's warm pod a session claimed carries the session's labels once relabelled; the
	// one its kernel listens in is found by its directory either way.
	return recovered("kubernetes",
		func() ([]string, error) { return kubernetes.SessionPods(ctx, t.Client, t.Namespace, l.Session) },
		func() (int, error) {
			n, err := kubernetes.RemoveSession(ctx, t.Client, t.Namespace, l.Session)
			m, lerr := kubernetes.RemoveListening(ctx, t.Client, t.Namespace, l.Kernel.Listen)
			return n + m, errors.Join(err, lerr)
		})
}

func (kubernetesProvider) Reap(ctx context.Context) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, reapTimeout)
	defer cancel()
	t, err := kubernetesClient(ctx)
	if err != nil {
		return 0, nil // no cluster: nothing of it to reap
	}
	return kubernetes.Reap(ctx, t.Client, t.Namespace)
}

// Check reports whether the cluster the settings name answers, whether its namespace is
// there, and whether this user may do what the transport does there (the API server's
// SelfSubjectAccessReview); when not, the Role it needs.
func (kubernetesProvider) Check(ctx context.Context) Check {
	c := Check{Name: "kubernetes"}
	l, err := config.Load(config.Options{})
	if err != nil {
		c.Detail = "the settings do not load: " + oneLine(err)
		return c
	}
	k := l.Settings.KernelTransport.Kubernetes
	if l.Settings.KernelTransport.Kind != "kubernetes" && k.Image == "" && k.Kubeconfig == "" && k.Context == "" {
		return Check{} // not configured: nothing to check
	}
	return checkKubernetes(ctx, k)
}

func checkKubernetes(ctx context.Context, k config.Kubernetes) Check {
	c := Check{Name: "kubernetes"}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	_, cli, ns, err := kubernetes.Connect(k.Kubeconfig, k.Context)
	if err != nil {
		c.Detail = "no cluster configured: " + oneLine(err)
		c.Fix = "point kernelTransport.kubernetes.kubeconfig (or KUBECONFIG) at the cluster's kubeconfig"
		return c
	}
	if k.Namespace != "" {
		ns = k.Namespace
	}
	v, err := cli.Discovery().ServerVersion()
	if err != nil {
		c.Detail = "the cluster does not answer: " + oneLine(err)
		c.Fix = "check the kubeconfig's server and credentials (kubectl version)"
		return c
	}
	c.Detail = fmt.Sprintf("cluster %s", v.GitVersion)
	if _, err := cli.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{}); apierrors.IsNotFound(err) {
		c.Detail += fmt.Sprintf("; namespace %s does not exist", ns)
		c.Fix = "kubectl create namespace " + ns
		return c
	} else if err == nil {
		c.Detail += "; namespace " + ns
	} else {
		c.Detail += "; namespace " + ns + " (not readable by this user)"
	}
	missing, err := kubernetes.Missing(ctx, cli, ns)
	if err != nil {
		c.Detail += "; permissions not checked: " + oneLine(err)
		return c
	}
	if len(missing) > 0 {
		var m []string
		for _, p := range missing {
			m = append(m, p.String())
		}
		c.Detail += "; this user may not " + strings.Join(m, ", ")
		c.Fix = "bind this Role to the user (kubectl apply -f -, then a RoleBinding):\n" + kubernetes.Role(ns)
		return c
	}
	c.Detail += "; this user may make pods and exec into them there"
	// A pod's network is the cluster's, out of the egress gate's reach: a NetworkPolicy
	// is what confines it. Reading them is no permission of the transport's.
	switch confined, err := kubernetes.Confined(ctx, cli, ns); {
	case apierrors.IsForbidden(err):
		c.Detail += "; the pods' network not checked (this user may not list networkpolicies)"
	case err != nil:
		c.Detail += "; the pods' network not checked: " + oneLine(err)
	case !confined:
		c.Detail += "; no NetworkPolicy confines the pods' network: a sandbox reaches what the pod network reaches " +
			"(other pods, the API server, a cloud's metadata service), and Paddock's egress rules do not apply in a pod"
		c.Fix = "apply this NetworkPolicy (kubectl apply -f -; the cluster's network plugin must enforce it), " +
			"or one that lets the sandboxes reach only what they need:\n" + kubernetes.NetworkPolicy(ns)
		return c
	default:
		c.Detail += "; a NetworkPolicy confines the pods' network"
	}
	c.OK = true
	return c
}
