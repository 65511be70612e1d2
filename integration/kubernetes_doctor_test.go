package integration

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/yaml"

	"github.com/paddockhq/paddock/session"
)

// paddock doctor on the cluster, in a namespace of its own: a namespace that is not there
// (and the command that makes it); a user who may do nothing there (and the Role it needs,
// which, applied as printed and bound, is enough); a namespace where no NetworkPolicy
// confines the pods' network (and the policy, which, applied as printed, does).
func TestKubernetesDoctor(t *testing.T) {
	c := k8sCluster(t)
	bin := paddockBinary(t)
	ctx := testContext(t)
	ns := randomName("paddock-doctor-")
	admin := os.Getenv("PADDOCK_KUBECONFIG")
	doctor := func(kubeconfig, namespace string) session.Check {
		t.Helper()
		conf := t.TempDir()
		os.MkdirAll(filepath.Join(conf, "paddock"), 0o700)
		settings := "kernelTransport:\n  kind: kubernetes\n  kubernetes:\n    kubeconfig: " + kubeconfig +
			"\n    namespace: " + namespace + "\n    image: " + c.Image + "\n"
		if err := os.WriteFile(filepath.Join(conf, "paddock", "settings.yaml"), []byte(settings), 0o600); err != nil {
			t.Fatal(err)
		}
		out, errOut, code := runPaddock(t, bin, t.TempDir(), []string{"XDG_CONFIG_HOME=" + conf}, "doctor", "--json")
		var checks []session.Check
		if err := json.Unmarshal([]byte(out), &checks); err != nil || code != 0 {
			t.Fatalf("paddock doctor --json: status %d, %v\n%s\n%s", code, err, out, errOut)
		}
		for _, ch := range checks {
			if ch.Name == "kubernetes" {
				return ch
			}
		}
		t.Fatalf("paddock doctor has no kubernetes check: %s", out)
		return session.Check{}
	}
	// applyFix creates what a check's fix prints after its first line.
	applyFix := func(ch session.Check, into any) {
		t.Helper()
		_, doc, ok := strings.Cut(ch.Fix, "\n")
		if !ok {
			t.Fatalf("the fix prints nothing to apply: %q", ch.Fix)
		}
		if err := yaml.UnmarshalStrict([]byte(doc), into); err != nil {
			t.Fatalf("the fix's YAML: %v\n%s", err, doc)
		}
	}

	ch := doctor(admin, ns)
	if ch.OK || !strings.Contains(ch.Detail, "namespace "+ns+" does not exist") || ch.Fix != "kubectl create namespace "+ns {
		t.Errorf("no namespace: %+v", ch)
	}
	if _, err := c.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Client.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}) })

	// A user of the namespace's own, who may do nothing yet: a service account's token.
	if _, err := c.Client.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "agent"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	ttl := int64(3600)
	tok, err := c.Client.CoreV1().ServiceAccounts(ns).CreateToken(ctx, "agent", &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &ttl}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	raw, err := clientcmd.LoadFromFile(admin)
	if err != nil {
		t.Fatal(err)
	}
	cl := raw.Clusters[raw.Contexts[raw.CurrentContext].Cluster]
	user := clientcmdapi.NewConfig()
	user.Clusters["c"] = cl
	user.AuthInfos["agent"] = &clientcmdapi.AuthInfo{Token: tok.Status.Token}
	user.Contexts["agent"] = &clientcmdapi.Context{Cluster: "c", AuthInfo: "agent", Namespace: ns}
	user.CurrentContext = "agent"
	agent := filepath.Join(t.TempDir(), "agent.kubeconfig")
	if err := clientcmd.WriteToFile(*user, agent); err != nil {
		t.Fatal(err)
	}

	ch = doctor(agent, ns)
	if ch.OK || !strings.Contains(ch.Detail, "this user may not create pods") || !strings.Contains(ch.Fix, "kind: Role") {
		t.Fatalf("a user who may do nothing: %+v", ch)
	}
	var role rbacv1.Role
	applyFix(ch, &role)
	if role.Namespace != ns {
		t.Errorf("the Role is for namespace %q", role.Namespace)
	}
	if _, err := c.Client.RbacV1().Roles(ns).Create(ctx, &role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	bind := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "agent"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "agent", Namespace: ns}}}
	if _, err := c.Client.RbacV1().RoleBindings(ns).Create(ctx, bind, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	ch = doctor(agent, ns)
	if !ch.OK || !strings.Contains(ch.Detail, "may make pods") || !strings.Contains(ch.Detail, "network not checked (this user may not list networkpolicies)") {
		t.Errorf("the user with the Role doctor printed: %+v", ch)
	}

	// The cluster's admin sees the pods' network open, and the policy that closes it.
	ch = doctor(admin, ns)
	if ch.OK || !strings.Contains(ch.Detail, "no NetworkPolicy confines the pods' network") || !strings.Contains(ch.Fix, "kind: NetworkPolicy") {
		t.Fatalf("no NetworkPolicy: %+v", ch)
	}
	var np networkingv1.NetworkPolicy
	applyFix(ch, &np)
	if _, err := c.Client.NetworkingV1().NetworkPolicies(ns).Create(ctx, &np, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	ch = doctor(admin, ns)
	if !ch.OK || !strings.Contains(ch.Detail, "a NetworkPolicy confines the pods' network") || ch.Fix != "" {
		t.Errorf("with the NetworkPolicy doctor printed: %+v", ch)
	}
}
