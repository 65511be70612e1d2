package integration

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/paddockhq/paddock/transport"
	"github.com/paddockhq/paddock/transport/docker"
	"github.com/paddockhq/paddock/transport/pathmap"
)

// A program in a listening pod runs as the pod's user, who owns the kernel's binary that a
// reattaching host runs as `paddock-kernel join`: it can put a program of its own in its
// place, which hears every byte the host sends. The host attaches all the same (the relay
// passes the bytes on), but sends no key: the program hears a nonce and proofs over nonces,
// nothing it could attach with.
func TestKubernetesSwappedJoinHearsNoKey(t *testing.T) {
	const key = "the-hosts-secret-key"
	c := k8sCluster(t)
	ctx := testContext(t)
	ws := k8sWorkspace(t)
	pm, err := pathmap.New(pathmap.Mount{Sandbox: "/work", Host: ws})
	if err != nil {
		t.Fatal(err)
	}
	spec := transport.Spec{Session: "s-swapped-join", Kernel: kernelBinary(t), Cwd: "/work", PathMap: pm,
		Listen: filepath.Join(t.TempDir(), "l"), Key: key}
	k, err := c.transport(t, docker.Hardening{}).Start(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	defer k.Kill()
	pod := k.(interface{ Pod() string }).Pod()
	inPod := func(script string) string {
		cmd := exec.CommandContext(ctx, c.Kubectl, "-n", c.Namespace, "exec", pod, "--", "/bin/sh", "-c", script)
		cmd.Env = append(os.Environ(), "KUBECONFIG="+os.Getenv("PADDOCK_KUBECONFIG"))
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s: %s %v", script, out, err)
		}
		return string(out)
	}
	// As the pod's user, which every program of the sandbox runs as: the join replaced by a
	// program that keeps what it hears, then runs the real one.
	inPod(`d=/.paddock/bin; cp $d/paddock-kernel $d/real && printf '#!/bin/sh\ntee /tmp/heard | /.paddock/bin/real join "$2"\n' > $d/j && chmod 755 $d/j && mv $d/j $d/paddock-kernel`)
	k2, err := c.transport(t, docker.Hardening{}).Reattach(ctx, spec)
	if err != nil {
		t.Fatalf("reattach through the relay: %v", err)
	}
	defer k2.Kill()
	heard := inPod(`cat /tmp/heard`)
	if !strings.Contains(heard, `"attach"`) {
		t.Fatalf("the swapped join heard no attach (the swap did not take): %q", heard)
	}
	if strings.Contains(heard, key) {
		t.Fatalf("the swapped join heard the key: %q", heard)
	}
}
