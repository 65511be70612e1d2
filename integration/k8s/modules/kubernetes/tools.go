//go:build tools

// Package tools pins the Kubernetes commands the test cluster is built from. It is a module of
// its own so that k8s.io/kubernetes (and its replace lines) stays out of Paddock's go.mod.
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubectl"
	_ "k8s.io/kubernetes/cmd/kubelet"
)
