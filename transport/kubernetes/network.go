package kubernetes

import (
	"context"
	"fmt"
	"slices"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	k8s "k8s.io/client-go/kubernetes"
)

// A pod's network is the cluster's: the host's egress gate (its proxy, allow and deny lists,
// the net question) does not reach into it, and nothing in a pod's own spec can take its
// network away as the Docker sandbox's `--network none` does. A NetworkPolicy can, where
// the cluster's network plugin enforces it; the transport needs no permission on them, so
// `paddock doctor` checks for one and prints it.

// NetworkPolicy is a NetworkPolicy for namespace, as YAML for `kubectl apply -f -`, that
// takes every network from the pods Paddock makes there, in and out (a pod keeps its
// loopback): the Docker sandbox's default.
func NetworkPolicy(namespace string) string {
	return fmt.Sprintf(`apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: paddock-sandboxes, namespace: %s}
spec:
  podSelector:
    matchLabels: {%s: "1"}
  policyTypes: [Ingress, Egress]
`, namespace, LabelManaged)
}

// Confined reports whether a NetworkPolicy of namespace governs the egress of every pod
// Paddock makes there: one that selects them all (by the labels every such pod has) and
// names egress among its policy types. What it allows is the cluster's admin's to say.
func Confined(ctx context.Context, c k8s.Interface, namespace string) (bool, error) {
	list, err := c.NetworkingV1().NetworkPolicies(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return false, fmt.Errorf("kubernetes: list the NetworkPolicies: %w", err)
	}
	return confines(list.Items), nil
}

// confines reports whether one of policies governs the egress of every pod Paddock makes.
func confines(policies []networkingv1.NetworkPolicy) bool {
	// Only the labels every pod Paddock makes has: the managed mark. A policy that selects
	// on more (a session's, a pool's, a host's) leaves some of them out.
	pod := labels.Set{LabelManaged: "1"}
	for _, np := range policies {
		sel, err := metav1.LabelSelectorAsSelector(&np.Spec.PodSelector)
		if err != nil || !sel.Matches(pod) {
			continue
		}
		// With no types named, the API server's default: egress when there are egress rules.
		if slices.Contains(np.Spec.PolicyTypes, networkingv1.PolicyTypeEgress) || len(np.Spec.PolicyTypes) == 0 && len(np.Spec.Egress) > 0 {
			return true
		}
	}
	return false
}
