package kubernetes

import (
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/paddockhq/paddock/transport"
	"github.com/paddockhq/paddock/transport/docker"
	"github.com/paddockhq/paddock/transport/pathmap"
)

func testSpec(t *testing.T) transport.Spec {
	t.Helper()
	pm, err := pathmap.New(pathmap.Mount{Host: "/srv/ws", Sandbox: "/work"}, pathmap.Mount{Host: "/srv/ref", Sandbox: "/ref", ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	return transport.Spec{Session: "s-1", Kernel: "/k", Cwd: "/work", PathMap: pm, Env: []string{"A=1", "B=x=y"},
		Labels: map[string]string{"paddock.session": "s-1", "team": "a b"}}
}

var self = map[string]string{docker.LabelMachine: "m1", docker.LabelBoot: "3f2a-11", docker.LabelPID: "42", docker.LabelStart: "99"}

// A default pod is confined: every capability dropped, no privilege escalation, not
// privileged, seccomp RuntimeDefault, a read-only root with an emptyDir /tmp, non-root, no
// service account token, no service links, no host namespace, a memory limit.
func TestPlanHardenedByDefault(t *testing.T) {
	p, err := planPod(testSpec(t), Settings{Namespace: "ns", Image: "img"}, self, "paddock-s-1-ab", false)
	if err != nil {
		t.Fatal(err)
	}
	s := p.Spec
	c := s.Containers[0]
	sc := c.SecurityContext
	if len(sc.Capabilities.Drop) != 1 || sc.Capabilities.Drop[0] != "ALL" || len(sc.Capabilities.Add) != 0 {
		t.Errorf("capabilities %+v", sc.Capabilities)
	}
	if *sc.AllowPrivilegeEscalation || *sc.Privileged || !*sc.ReadOnlyRootFilesystem {
		t.Errorf("escalation %v, privileged %v, read-only root %v", *sc.AllowPrivilegeEscalation, *sc.Privileged, *sc.ReadOnlyRootFilesystem)
	}
	if sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault || s.SecurityContext.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("seccomp %+v", sc.SeccompProfile)
	}
	if s.SecurityContext.RunAsNonRoot == nil || !*s.SecurityContext.RunAsNonRoot {
		t.Errorf("runAsNonRoot not set")
	}
	if *s.AutomountServiceAccountToken || *s.EnableServiceLinks || s.HostNetwork || s.HostPID || s.HostIPC {
		t.Errorf("token %v, service links %v, host namespaces %v %v %v", *s.AutomountServiceAccountToken, *s.EnableServiceLinks, s.HostNetwork, s.HostPID, s.HostIPC)
	}
	if m := c.Resources.Limits[corev1.ResourceMemory]; m.Value() != docker.DefaultMemory {
		t.Errorf("memory limit %v", m.String())
	}
	mounts := map[string]corev1.VolumeMount{}
	for _, m := range c.VolumeMounts {
		mounts[m.MountPath] = m
	}
	for _, want := range []string{KernelDir, "/tmp", "/work", "/ref"} {
		if _, ok := mounts[want]; !ok {
			t.Errorf("no mount at %s: %+v", want, c.VolumeMounts)
		}
	}
	if !mounts["/ref"].ReadOnly || mounts["/work"].ReadOnly {
		t.Errorf("read-only mounts %+v", c.VolumeMounts)
	}
	if c.WorkingDir != "/work" || len(c.Env) != 2 || c.Env[1].Name != "B" || c.Env[1].Value != "x=y" {
		t.Errorf("working dir %q, env %+v", c.WorkingDir, c.Env)
	}
	if s.RestartPolicy != corev1.RestartPolicyNever {
		t.Errorf("restart policy %s", s.RestartPolicy)
	}
}

// The labels are the containers' and valid as labels; what a label cannot hold goes in an
// annotation.
func TestPlanLabels(t *testing.T) {
	p, err := planPod(testSpec(t), Settings{Namespace: "ns", Image: "img"}, self, "paddock-s-1-ab", false)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range p.Labels {
		if len(validation.IsQualifiedName(k)) != 0 || len(validation.IsValidLabelValue(v)) != 0 {
			t.Errorf("invalid label %q=%q", k, v)
		}
	}
	for k, v := range map[string]string{LabelManaged: "1", LabelSession: "s-1", docker.LabelPID: "42", docker.LabelMachine: "m1"} {
		if p.Labels[k] != v {
			t.Errorf("label %s = %q, want %q", k, p.Labels[k], v)
		}
	}
	if p.Annotations["team"] != "a b" || p.Annotations[AnnotationSession] != "s-1" {
		t.Errorf("annotations %v", p.Annotations)
	}
	long := strings.Repeat("x", 80) + "/y"
	if l := SessionLabel(long); len(validation.IsValidLabelValue(l)) != 0 || l == SessionLabel(long+"z") {
		t.Errorf("session label %q", l)
	}
	for _, s := range []string{"", "A_b.c", strings.Repeat("é", 50)} {
		if n := podName(s, "0a1b2c3d"); len(validation.IsDNS1123Label(n)) != 0 {
			t.Errorf("pod name %q of %q", n, s)
		}
	}
}

// Each default gives way when asked: a capability, privileges, a writable root, a user,
// no memory limit; a claim, a runtime class, a node selector, a kernel image.
func TestPlanSettings(t *testing.T) {
	s := Settings{Namespace: "ns", Image: "img", KernelImage: "kimg", RuntimeClassName: "gvisor",
		NodeSelector: map[string]string{"pool": "sandboxes"}, Claims: map[string]string{"/srv/ws": "ws-claim"},
		Requests:  map[string]string{"cpu": "250m"},
		Hardening: docker.Hardening{CapAdd: []string{"cap_chown"}, NewPrivileges: true, WritableRoot: true, User: "1000:1001", Memory: -1, NoTmpfs: true}}
	p, err := planPod(testSpec(t), s, self, "n", false)
	if err != nil {
		t.Fatal(err)
	}
	c := p.Spec.Containers[0]
	if c.SecurityContext.Capabilities.Add[0] != "CHOWN" || c.SecurityContext.AllowPrivilegeEscalation != nil || *c.SecurityContext.ReadOnlyRootFilesystem {
		t.Errorf("security context %+v", c.SecurityContext)
	}
	if psc := p.Spec.SecurityContext; *psc.RunAsUser != 1000 || *psc.RunAsGroup != 1001 || !*psc.RunAsNonRoot {
		t.Errorf("pod security context %+v", psc)
	}
	if _, ok := c.Resources.Limits[corev1.ResourceMemory]; ok {
		t.Errorf("memory limited: %+v", c.Resources)
	}
	if q := c.Resources.Requests[corev1.ResourceCPU]; q.MilliValue() != 250 {
		t.Errorf("cpu request %v", q.String())
	}
	for _, m := range c.VolumeMounts {
		if m.MountPath == "/tmp" {
			t.Errorf("a /tmp emptyDir with NoTmpfs")
		}
	}
	var claimed bool
	for _, v := range p.Spec.Volumes {
		if v.PersistentVolumeClaim != nil && v.PersistentVolumeClaim.ClaimName == "ws-claim" {
			claimed = true
		}
		if v.HostPath != nil && v.HostPath.Path == "/srv/ws" {
			t.Errorf("the claimed mount is a hostPath too")
		}
	}
	if !claimed || *p.Spec.RuntimeClassName != "gvisor" || p.Spec.NodeSelector["pool"] != "sandboxes" {
		t.Errorf("claim %v, runtime class, node selector %+v", claimed, p.Spec)
	}
	if len(p.Spec.InitContainers) != 1 || p.Spec.InitContainers[0].Image != "kimg" {
		t.Errorf("kernel image's init container %+v", p.Spec.InitContainers)
	}
	// Root asked for, or the image found to run as root: no runAsNonRoot.
	s.Hardening.User = "0"
	if p, _ := planPod(testSpec(t), s, self, "n", false); p.Spec.SecurityContext.RunAsNonRoot != nil {
		t.Errorf("runAsNonRoot with user 0")
	}
	if p, _ := planPod(testSpec(t), Settings{Image: "img"}, self, "n", true); p.Spec.SecurityContext.RunAsNonRoot != nil {
		t.Errorf("runAsNonRoot for a root image")
	}
}

// What cannot be planned is refused: a name for a user, a cwd outside every mount, no image,
// a bad quantity.
func TestPlanRefusals(t *testing.T) {
	var ue *UserError
	if _, err := planPod(testSpec(t), Settings{Image: "img", Hardening: docker.Hardening{User: "nobody"}}, self, "n", false); !errors.As(err, &ue) {
		t.Errorf("a user name: %v", err)
	}
	spec := testSpec(t)
	spec.Cwd = "/elsewhere"
	var oe *docker.OutsideError
	if _, err := planPod(spec, Settings{Image: "img"}, self, "n", false); !errors.As(err, &oe) || oe.Code() != "outside" {
		t.Errorf("a cwd outside: %v", err)
	}
	if _, err := planPod(testSpec(t), Settings{}, self, "n", false); err == nil {
		t.Errorf("no image planned")
	}
	if _, err := planPod(testSpec(t), Settings{Image: "img", Limits: map[string]string{"cpu": "lots"}}, self, "n", false); err == nil {
		t.Errorf("a bad quantity planned")
	}
}
