// The kubernetes transport's benchmarks against kubectl, on the project's one-node cluster
// (integration/k8s/up; see kubernetes_test.go for the variables they read).

package integration

import (
	"context"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/paddockhq/paddock/orchestrator"
	"github.com/paddockhq/paddock/transport/docker"
	"github.com/paddockhq/paddock/transport/environ"
	"github.com/paddockhq/paddock/transport/pathmap"
)

// The benchmarks of the kubernetes transport, against kubectl in the same run, on the test
// cluster (integration/k8s/up) and its sandbox image:
//
//	go test ./integration -run '^$' -bench 'Kubernetes' -benchtime 10x
//
// BenchmarkKubernetesSessionReady/paddock opens a session from nothing (pod created and
// running, the kernel streamed in and exec'd, ping answered) and closes it;
// /kubectl-run is `kubectl run --rm -i --restart=Never IMG -- true`, a pod made, run,
// attached to and deleted. BenchmarkKubernetesStep/paddock is a `true` step in an open
// session; /kubectl-exec is `kubectl exec POD -- true` into the same pod. Each reports the
// p50 and p99 besides ns/op.

// kubectl is the cluster's kubectl with its kubeconfig.
func (c cluster) kubectl(args ...string) *exec.Cmd {
	cmd := exec.Command(c.Kubectl, append([]string{"--kubeconfig", os.Getenv("PADDOCK_KUBECONFIG"), "-n", c.Namespace}, args...)...)
	return cmd
}

// k8sBenchEnv is a session's configuration on the cluster: a default pod, ws at /work.
func k8sBenchEnv(b *testing.B, c cluster, kernel, ws string) orchestrator.Config {
	pm, err := pathmap.New(pathmap.Mount{Sandbox: "/work", Host: ws})
	if err != nil {
		b.Fatal(err)
	}
	env, _ := environ.Sandbox(os.Environ(), nil, sandboxEnv, pm)
	tr := c.transport(b, docker.Hardening{})
	tr.Stderr = nil
	return orchestrator.Config{Workspace: ws, Transport: tr, Kernel: kernel, Env: env, PathMap: pm}
}

func benchCluster(b *testing.B) cluster {
	c := k8sCluster(b)
	if c.Kubectl == "" {
		needPeer(b, "PADDOCK_K8S_KUBECTL names no kubectl")
	}
	return c
}

func BenchmarkKubernetesSessionReady(b *testing.B) {
	c := benchCluster(b)
	kernel := kernelBinary(b)
	b.Run("paddock", func(b *testing.B) {
		ws := k8sWorkspace(b)
		env := k8sBenchEnv(b, c, kernel, ws)
		var ds []time.Duration
		b.ResetTimer()
		for range b.N {
			t0 := time.Now()
			s, err := orchestrator.Open(context.Background(), env)
			if err != nil {
				b.Fatal(err)
			}
			ds = append(ds, time.Since(t0))
			if err := s.Close(); err != nil {
				b.Fatal(err)
			}
		}
		b.StopTimer()
		percentiles(b, ds)
	})
	b.Run("kubectl-run", func(b *testing.B) {
		var ds []time.Duration
		b.ResetTimer()
		for i := range b.N {
			t0 := time.Now()
			out, err := c.kubectl("run", "--rm", "-i", "--restart=Never", "--image", c.Image, "--image-pull-policy=Never",
				"--overrides", `{"spec":{"automountServiceAccountToken":false,"terminationGracePeriodSeconds":1}}`,
				"paddock-bench-run-"+strconv.Itoa(i), "--", "true").CombinedOutput()
			if err != nil {
				b.Fatalf("kubectl run: %v: %s", err, out)
			}
			ds = append(ds, time.Since(t0))
		}
		b.StopTimer()
		percentiles(b, ds)
	})
}

func BenchmarkKubernetesStep(b *testing.B) {
	c := benchCluster(b)
	kernel := kernelBinary(b)
	ws := k8sWorkspace(b)
	s, err := orchestrator.Open(context.Background(), k8sBenchEnv(b, c, kernel, ws))
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	pods := sessionPods(b, context.Background(), c)
	if len(pods) != 1 {
		b.Fatalf("pods of this process: %v", pods)
	}
	b.Run("paddock", func(b *testing.B) {
		var ds []time.Duration
		b.ResetTimer()
		for range b.N {
			t0 := time.Now()
			res, err := s.Bash(context.Background(), "true")
			if err != nil || res.End.Status != 0 {
				b.Fatalf("true: %v %v", err, res)
			}
			ds = append(ds, time.Since(t0))
		}
		b.StopTimer()
		percentiles(b, ds)
	})
	b.Run("kubectl-exec", func(b *testing.B) {
		var ds []time.Duration
		b.ResetTimer()
		for range b.N {
			t0 := time.Now()
			if out, err := c.kubectl("exec", pods[0], "--", "true").CombinedOutput(); err != nil {
				b.Fatalf("kubectl exec: %v: %s", err, out)
			}
			ds = append(ds, time.Since(t0))
		}
		b.StopTimer()
		percentiles(b, ds)
	})
}
