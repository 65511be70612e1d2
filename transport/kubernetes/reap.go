package kubernetes

import (
	"context"
	"errors"
	"fmt"
	"maps"

	authv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8s "k8s.io/client-go/kubernetes"

	"github.com/paddockhq/paddock/transport/docker"
)

// Reap deletes the pods in namespace of host processes of this machine that died (the
// Docker containers' rule, docker.Leftover), and returns how many it deleted. A pod of
// another machine's host is never one: its owner cannot be judged from here.
func Reap(ctx context.Context, c k8s.Interface, namespace string) (int, error) {
	list, err := c.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: LabelManaged + "=1"})
	if err != nil {
		return 0, fmt.Errorf("kubernetes: list Paddock's pods: %w", err)
	}
	o := docker.Self()
	n := 0
	var errs []error
	zero := int64(0)
	for _, p := range list.Items {
		labels := maps.Clone(p.Labels)
		if d := p.Annotations[AnnotationListen]; d != "" {
			labels[docker.LabelListen] = d
		}
		if !docker.Leftover(labels, o) {
			continue
		}
		err := c.CoreV1().Pods(namespace).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
		if err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("delete %s: %w", p.Name, err))
			continue
		}
		n++
	}
	return n, errors.Join(errs...)
}

// SessionPods returns the names of the pods in namespace that carry session's label.
func SessionPods(ctx context.Context, c k8s.Interface, namespace, session string) ([]string, error) {
	list, err := c.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: LabelSession + "=" + SessionLabel(session)})
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(list.Items))
	for _, p := range list.Items {
		if p.Annotations[AnnotationSession] == session {
			names = append(names, p.Name)
		}
	}
	return names, nil
}

// RemoveSession deletes every pod of a session, and returns how many it deleted.
func RemoveSession(ctx context.Context, c k8s.Interface, namespace, session string) (int, error) {
	names, err := SessionPods(ctx, c, namespace, session)
	if err != nil {
		return 0, err
	}
	n := 0
	var errs []error
	zero := int64(0)
	for _, name := range names {
		err := c.CoreV1().Pods(namespace).Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
		if err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, err)
			continue
		}
		n++
	}
	return n, errors.Join(errs...)
}

// RemoveListening deletes the pod whose kernel listens for the host directory listen (a
// session's, or a pool's warm kernel a session claimed), and returns how many it deleted.
func RemoveListening(ctx context.Context, c k8s.Interface, namespace, listen string) (int, error) {
	if listen == "" {
		return 0, nil
	}
	p, err := listeningPod(ctx, c, namespace, listen)
	if err != nil || p == nil {
		return 0, err
	}
	zero := int64(0)
	if err := c.CoreV1().Pods(namespace).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil && !apierrors.IsNotFound(err) {
		return 0, err
	}
	return 1, nil
}

// Permission is one thing the transport does in its namespace.
type Permission struct {
	Resource, Subresource, Verb string
}

// Permissions are what the transport needs in its namespace: pods made, watched, listed
// (the reaper), relabelled (a warm pod a session claims) and deleted, and exec'd into. The
// exec's WebSocket is a GET that the API server authorizes as create, as it does the SPDY
// POST.
var Permissions = []Permission{
	{"pods", "", "create"}, {"pods", "", "get"}, {"pods", "", "list"}, {"pods", "", "watch"}, {"pods", "", "delete"}, {"pods", "", "patch"},
	{"pods", "exec", "create"}, {"pods", "exec", "get"},
}

// Role is the Role the transport needs in namespace, as YAML for `kubectl apply -f -`.
func Role(namespace string) string {
	return fmt.Sprintf(`apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: paddock-sandboxes, namespace: %s}
rules:
- apiGroups: [""]
  resources: [pods]
  verbs: [create, get, list, watch, delete, patch]
- apiGroups: [""]
  resources: [pods/exec]
  verbs: [create, get]
`, namespace)
}

// Missing returns the permissions the client's user lacks in namespace, as the API server's
// SelfSubjectAccessReview answers.
func Missing(ctx context.Context, c k8s.Interface, namespace string) ([]Permission, error) {
	var missing []Permission
	for _, p := range Permissions {
		r, err := c.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authv1.SelfSubjectAccessReview{Spec: authv1.SelfSubjectAccessReviewSpec{
			ResourceAttributes: &authv1.ResourceAttributes{Namespace: namespace, Verb: p.Verb, Resource: p.Resource, Subresource: p.Subresource},
		}}, metav1.CreateOptions{})
		if err != nil {
			return nil, fmt.Errorf("kubernetes: ask the API server what this user may do: %w", err)
		}
		if !r.Status.Allowed {
			missing = append(missing, p)
		}
	}
	return missing, nil
}

func (p Permission) String() string {
	r := p.Resource
	if p.Subresource != "" {
		r += "/" + p.Subresource
	}
	return p.Verb + " " + r
}
