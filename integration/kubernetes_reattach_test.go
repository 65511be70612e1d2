package integration

import (
	"context"
	"errors"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/paddockhq/paddock/transport"
	"github.com/paddockhq/paddock/transport/docker"
	"github.com/paddockhq/paddock/transport/kubernetes"
)

// Two pods that say they listen for the same host directory (a pod anyone who may make
// pods in the namespace can make): a host reattaching, or recovering, there touches
// neither, rather than attach to, or delete, whichever the list gave first.
func TestKubernetesReattachAmbiguous(t *testing.T) {
	c := k8sCluster(t)
	ctx := context.Background()
	listen := t.TempDir()
	pods := c.Client.CoreV1().Pods(c.Namespace)
	var names []string
	for range 2 {
		p, err := pods.Create(ctx, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{GenerateName: "paddock-ambiguous-",
				Labels:      map[string]string{kubernetes.LabelManaged: "1"},
				Annotations: map[string]string{kubernetes.AnnotationListen: listen}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: kubernetes.Container,
				Image: "paddock-no-such-image:0", ImagePullPolicy: corev1.PullNever}}},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, p.Name)
		t.Cleanup(func() {
			zero := int64(0)
			pods.Delete(context.Background(), p.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
		})
	}
	tr := c.transport(t, docker.Hardening{})
	_, err := tr.Reattach(ctx, transport.Spec{Session: "s-ambiguous", Listen: listen, Key: "k"})
	if err == nil || errors.Is(err, transport.ErrGone) {
		t.Errorf("reattach with two pods listening for %s: %v, want a refusal", listen, err)
	}
	if n, err := kubernetes.RemoveListening(ctx, c.Client, c.Namespace, listen); n != 0 || err == nil {
		t.Errorf("recovery with two pods listening there: %d removed, %v, want none and a refusal", n, err)
	}
	for _, name := range names {
		if p, err := pods.Get(ctx, name, metav1.GetOptions{}); err != nil || p.DeletionTimestamp != nil {
			t.Errorf("pod %s: %v, deleted", name, err)
		}
	}
}
