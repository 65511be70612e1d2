package kubernetes

import (
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// Which NetworkPolicies govern the egress of every pod Paddock makes: one that selects them
// all by the label they all have, and names egress.
func TestConfines(t *testing.T) {
	egress := []networkingv1.PolicyType{networkingv1.PolicyTypeEgress}
	ingress := []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}
	all := metav1.LabelSelector{}
	managed := metav1.LabelSelector{MatchLabels: map[string]string{LabelManaged: "1"}}
	for _, tc := range []struct {
		name string
		sel  metav1.LabelSelector
		spec networkingv1.NetworkPolicySpec
		want bool
	}{
		{"every pod, egress", all, networkingv1.NetworkPolicySpec{PolicyTypes: egress}, true},
		{"Paddock's pods, egress", managed, networkingv1.NetworkPolicySpec{PolicyTypes: egress}, true},
		{"Paddock's pods by expression", metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
			{Key: LabelManaged, Operator: metav1.LabelSelectorOpIn, Values: []string{"1"}}}}, networkingv1.NetworkPolicySpec{PolicyTypes: egress}, true},
		{"no types, egress rules", managed, networkingv1.NetworkPolicySpec{Egress: []networkingv1.NetworkPolicyEgressRule{{}}}, true},
		{"no types, no rules (ingress only)", managed, networkingv1.NetworkPolicySpec{}, false},
		{"ingress only", all, networkingv1.NetworkPolicySpec{PolicyTypes: ingress}, false},
		{"sessions' pods only (not the pools')", metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
			{Key: LabelSession, Operator: metav1.LabelSelectorOpExists}}}, networkingv1.NetworkPolicySpec{PolicyTypes: egress}, false},
		{"another app's pods", metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}, networkingv1.NetworkPolicySpec{PolicyTypes: egress}, false},
		{"a selector that does not parse", metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
			{Key: LabelManaged, Operator: "Near"}}}, networkingv1.NetworkPolicySpec{PolicyTypes: egress}, false},
	} {
		np := networkingv1.NetworkPolicy{Spec: tc.spec}
		np.Spec.PodSelector = tc.sel
		if got := confines([]networkingv1.NetworkPolicy{np}); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
	if confines(nil) {
		t.Error("no policy confines")
	}
	// The policy doctor prints confines.
	var np networkingv1.NetworkPolicy
	if err := yaml.UnmarshalStrict([]byte(NetworkPolicy("team-a")), &np); err != nil {
		t.Fatal(err)
	}
	if np.Namespace != "team-a" || !confines([]networkingv1.NetworkPolicy{np}) || len(np.Spec.Egress)+len(np.Spec.Ingress) != 0 {
		t.Errorf("the printed policy: %+v", np)
	}
}
