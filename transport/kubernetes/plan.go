package kubernetes

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"path"
	"regexp"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/paddockhq/paddock/transport"
	"github.com/paddockhq/paddock/transport/docker"
)

// This file is the pure part of the transport: from a Spec and the settings it decides the
// pod to create. Nothing here talks to the cluster.

// Where the kernel is in the pod: an emptyDir of its own at KernelDir, which the kernel's
// binary is streamed into (or copied into from a kernel image) before it starts.
const (
	KernelDir  = "/.paddock/bin"
	KernelPath = KernelDir + "/paddock-kernel"
	// Container is the name of the pod's one container, the kernel's.
	Container = "kernel"
	// kernelImagePath is where a kernel image holds the kernel.
	kernelImagePath = "/paddock-kernel"
)

// Labels and annotations Paddock puts on its pods: the Docker containers' labels (the same
// reaper rule judges them), and in annotations what a label's value cannot hold.
const (
	LabelManaged = docker.LabelManaged // "1" on every pod Paddock makes
	LabelSession = docker.LabelSession // the session's id (hashed when no label value can hold it)
	// AnnotationSession is the session's id as given.
	AnnotationSession = "paddock/session"
	// AnnotationListen is the host directory a listening kernel's socket is in.
	AnnotationListen = "paddock/listen"
)

// Settings are what a pod is made of besides its Spec: the cluster side of the settings
// (kernelTransport.kubernetes) and the sandbox's confinement.
type Settings struct {
	// Namespace the pods are made in.
	Namespace string
	// Image is the image the pod runs; it needs /bin/sh and cat for the kernel to be
	// streamed in (not with KernelImage).
	Image string
	// KernelImage, when set, is an image holding the kernel at /paddock-kernel and a cp on
	// its PATH: an init container copies the kernel into the pod instead of the host
	// streaming it (a cluster whose nodes pull from a registry).
	KernelImage string
	// PullPolicy of both images; "" is the cluster's default.
	PullPolicy corev1.PullPolicy
	// RuntimeClassName, when set, runs the pod under that runtime class (gVisor, Kata).
	RuntimeClassName string
	// NodeSelector restricts the nodes the pod is scheduled on.
	NodeSelector map[string]string
	// Requests and Limits are the container's resources (cpu, memory, ephemeral-storage);
	// a memory limit not given is the Hardening's.
	Requests, Limits map[string]string
	// Claims name, by the host path of a path-map mount, the PersistentVolumeClaim that
	// holds it; a mount no claim names is a hostPath volume (a one-node cluster, or nodes
	// that all mount the same shared filesystem there).
	Claims map[string]string
	// Hardening confines the pod as it confines a container; its Network and Pids do not
	// apply (a pod's network is the cluster's, and its process limit the node's).
	Hardening docker.Hardening

	syncCopy string // the host copy of a synced workspace: an emptyDir in the pod
}

// UserError is a sandbox user a pod cannot run as: Kubernetes takes numbers only.
type UserError struct{ User string }

func (e *UserError) Error() string {
	return fmt.Sprintf("kubernetes: user %q: a pod runs as a numeric uid or uid:gid, not a name", e.User)
}

// Code is the stable code of the refusal.
func (e *UserError) Code() string { return "usage" }

// planPod decides the pod of one kernel: its image, the kernel's volume, the path map's
// volumes, the environment and working directory the kernel is exec'd with, and the
// confinement. self labels the pod with its host process, for the reaper; rootImage says
// the image was found to run as root (runAsNonRoot is then left off).
func planPod(spec transport.Spec, s Settings, self map[string]string, name string, rootImage bool) (*corev1.Pod, error) {
	if s.Image == "" {
		return nil, fmt.Errorf("kubernetes: no image named (kernelTransport.kubernetes.image)")
	}
	if spec.PathMap == nil {
		return nil, fmt.Errorf("kubernetes: a pod needs a path map (the identity map is the local transport's)")
	}
	cwd := spec.Cwd
	if cwd == "" || !path.IsAbs(cwd) {
		return nil, &docker.OutsideError{Cwd: cwd}
	}
	if _, ok := spec.PathMap.Mount(cwd); !ok {
		return nil, &docker.OutsideError{Cwd: cwd}
	}
	h := s.Hardening
	sc, psc, err := securityContexts(h, rootImage)
	if err != nil {
		return nil, err
	}
	res, err := resources(s, h)
	if err != nil {
		return nil, err
	}
	tmpSize := h.TmpfsSize
	if tmpSize == 0 {
		tmpSize = docker.DefaultTmpfs
	}
	volumes := []corev1.Volume{{Name: "paddock-kernel", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{
		Medium: corev1.StorageMediumMemory, SizeLimit: resource.NewQuantity(128<<20, resource.BinarySI)}}}}
	mounts := []corev1.VolumeMount{{Name: "paddock-kernel", MountPath: KernelDir}}
	taken := map[string]bool{KernelDir: true}
	for i, m := range spec.PathMap.Mounts() {
		if m.Sandbox == "/" {
			return nil, fmt.Errorf("kubernetes: a mount at the sandbox's root cannot be bound")
		}
		v := corev1.Volume{Name: "paddock-map-" + strconv.Itoa(i)}
		if s.syncCopy != "" && m.Host == s.syncCopy {
			v.EmptyDir = &corev1.EmptyDirVolumeSource{}
		} else if claim := s.Claims[m.Host]; claim != "" {
			v.PersistentVolumeClaim = &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim, ReadOnly: m.ReadOnly}
		} else {
			v.HostPath = &corev1.HostPathVolumeSource{Path: m.Host}
		}
		volumes = append(volumes, v)
		mounts = append(mounts, corev1.VolumeMount{Name: v.Name, MountPath: m.Sandbox, ReadOnly: m.ReadOnly})
		taken[m.Sandbox] = true
	}
	if !h.NoTmpfs && !taken["/tmp"] {
		volumes = append(volumes, corev1.Volume{Name: "paddock-tmp", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{
			Medium: corev1.StorageMediumMemory, SizeLimit: resource.NewQuantity(tmpSize, resource.BinarySI)}}})
		mounts = append(mounts, corev1.VolumeMount{Name: "paddock-tmp", MountPath: "/tmp"})
	}
	command := []string{"/bin/sh", "-c", keepUp}
	if spec.Listen != "" {
		// The kernel listens in an emptyDir of its own, not in the host's directory: a pod's
		// node need not be the host's machine. The host reaches the socket over exec (Join).
		if taken[transport.ListenDir] {
			return nil, fmt.Errorf("kubernetes: a mount at %s is the kernel's own", transport.ListenDir)
		}
		volumes = append(volumes, corev1.Volume{Name: "paddock-run", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{
			Medium: corev1.StorageMediumMemory, SizeLimit: resource.NewQuantity(1<<20, resource.BinarySI)}}})
		mounts = append(mounts, corev1.VolumeMount{Name: "paddock-run", MountPath: transport.ListenDir})
		command = []string{"/bin/sh", "-c", listenCommand(spec)}
	}
	env := make([]corev1.EnvVar, 0, len(spec.Env))
	for _, kv := range spec.Env {
		k, v, _ := strings.Cut(kv, "=")
		env = append(env, corev1.EnvVar{Name: k, Value: v})
	}
	labels, annotations := podLabels(spec, self)
	f := false
	grace := int64(1)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: s.Namespace, Labels: labels, Annotations: annotations},
		Spec: corev1.PodSpec{
			RestartPolicy:                 corev1.RestartPolicyNever,
			AutomountServiceAccountToken:  &f,
			EnableServiceLinks:            &f, // no variables naming the cluster's services
			TerminationGracePeriodSeconds: &grace,
			SecurityContext:               psc,
			NodeSelector:                  s.NodeSelector,
			Volumes:                       volumes,
			Containers: []corev1.Container{{
				Name:            Container,
				Image:           s.Image,
				ImagePullPolicy: s.PullPolicy,
				// The pod's first process only keeps it up: the kernel is exec'd into it with
				// the frames on the exec's standard streams (keepUp), or becomes the kernel
				// listening once the host has put it and its key in (listenCommand).
				Command:         command,
				Env:             env,
				WorkingDir:      workingDir(cwd, h),
				VolumeMounts:    mounts,
				SecurityContext: sc,
				Resources:       res,
			}},
		},
	}
	if s.RuntimeClassName != "" {
		rc := s.RuntimeClassName
		pod.Spec.RuntimeClassName = &rc
	}
	if s.KernelImage != "" {
		initSC := sc.DeepCopy()
		pod.Spec.InitContainers = []corev1.Container{{
			Name:            "paddock-kernel",
			Image:           s.KernelImage,
			ImagePullPolicy: s.PullPolicy,
			// A kernel image holds the kernel and a cp to copy it with (busybox's, say).
			Command:         []string{"cp", kernelImagePath, KernelPath},
			VolumeMounts:    []corev1.VolumeMount{{Name: "paddock-kernel", MountPath: KernelDir}},
			SecurityContext: initSC,
			Resources:       res,
		}}
	}
	return pod, nil
}

// keepUp is the first process of a pod whose kernel is exec'd: it only keeps the pod up,
// and ends at TERM.
const keepUp = "trap 'exit 0' TERM; while :; do sleep 86400 & wait $!; done"

// listenKeyPath is where the host puts a listening kernel's key (the kernel removes it once
// read): written beside it and renamed, so that the file is whole once it is there.
const listenKeyPath = transport.ListenDir + "/" + transport.ListenKey

// listenCommand is the first process of a pod whose kernel listens: it waits, as keepUp
// does, until the host has streamed the kernel in and written its key, then becomes the
// kernel (exec), the container's first process as in a Docker sandbox: the pod ends with
// it. The host says when with USR1 (Transport.launch), after the key is in place; a signal
// that came before the trap was set is lost (the first process ignores what it has no
// handler for), so the key is looked for once the trap is set.
func listenCommand(spec transport.Spec) string {
	return launchScript(append(append([]string{KernelPath}, transport.ListenArgs(spec)...), spec.Args...), listenKeyPath)
}

// launchScript is listenCommand's script for the kernel argv and the key at keyPath.
func launchScript(argv []string, keyPath string) string {
	q := make([]string, len(argv))
	for i, a := range argv {
		q[i] = shellQuote(a)
	}
	kernel := strings.Join(q, " ")
	return fmt.Sprintf("trap 'kill $! 2>/dev/null; exec %s' USR1; trap 'exit 0' TERM; [ -e %s ] && exec %s; while :; do sleep 86400 & wait $!; done",
		strings.ReplaceAll(kernel, "'", `'\''`), shellQuote(keyPath), kernel)
}

// shellQuote quotes s for a POSIX shell.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./=:,") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// workingDir is docker's rule: under the /tmp emptyDir the kernel starts at /.
func workingDir(cwd string, h docker.Hardening) string {
	if !h.NoTmpfs && (cwd == "/tmp" || strings.HasPrefix(cwd, "/tmp/")) {
		return "/"
	}
	return cwd
}

// securityContexts are the container's and the pod's security contexts: every capability
// dropped but those kept, no privilege escalation, seccomp RuntimeDefault, a read-only root,
// not privileged; runAsNonRoot unless the user is root or the image was found to run as
// root.
func securityContexts(h docker.Hardening, rootImage bool) (*corev1.SecurityContext, *corev1.PodSecurityContext, error) {
	f, t := false, true
	sc := &corev1.SecurityContext{
		Privileged:               &f,
		AllowPrivilegeEscalation: &f,
		ReadOnlyRootFilesystem:   &t,
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		SeccompProfile:           &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
	if h.NewPrivileges {
		sc.AllowPrivilegeEscalation = nil
	}
	if h.WritableRoot {
		sc.ReadOnlyRootFilesystem = &f
	}
	for _, c := range h.CapAdd {
		c = strings.ToUpper(strings.TrimPrefix(strings.ToUpper(c), "CAP_"))
		sc.Capabilities.Add = append(sc.Capabilities.Add, corev1.Capability(c))
	}
	psc := &corev1.PodSecurityContext{SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}}
	nonRoot := !rootImage
	if h.User != "" {
		us, gs, hasGID := strings.Cut(h.User, ":")
		uid, err := strconv.ParseInt(us, 10, 64)
		if err != nil || uid < 0 {
			return nil, nil, &UserError{User: h.User}
		}
		psc.RunAsUser = &uid
		if hasGID {
			gid, err := strconv.ParseInt(gs, 10, 64)
			if err != nil || gid < 0 {
				return nil, nil, &UserError{User: h.User}
			}
			psc.RunAsGroup = &gid
		}
		nonRoot = uid != 0
	}
	if nonRoot {
		psc.RunAsNonRoot = &t
	}
	return sc, psc, nil
}

// resources are the container's requests and limits: the settings', the memory limit the
// Hardening's when they give none (DefaultMemory for 0, none for -1).
func resources(s Settings, h docker.Hardening) (corev1.ResourceRequirements, error) {
	var r corev1.ResourceRequirements
	parse := func(kind string, in map[string]string) (corev1.ResourceList, error) {
		if len(in) == 0 {
			return nil, nil
		}
		out := corev1.ResourceList{}
		for k, v := range in {
			q, err := resource.ParseQuantity(v)
			if err != nil {
				return nil, fmt.Errorf("kubernetes: resources %s %s %q: %w", kind, k, v, err)
			}
			out[corev1.ResourceName(k)] = q
		}
		return out, nil
	}
	var err error
	if r.Requests, err = parse("requests", s.Requests); err != nil {
		return r, err
	}
	if r.Limits, err = parse("limits", s.Limits); err != nil {
		return r, err
	}
	if _, ok := r.Limits[corev1.ResourceMemory]; !ok && h.Memory >= 0 {
		m := h.Memory
		if m == 0 {
			m = docker.DefaultMemory
		}
		if r.Limits == nil {
			r.Limits = corev1.ResourceList{}
		}
		r.Limits[corev1.ResourceMemory] = *resource.NewQuantity(m, resource.BinarySI)
	}
	return r, nil
}

// podLabels are a pod's labels and annotations: Paddock's, the host process's, the spec's.
// A value no label can hold (a path, an id too long) goes in an annotation; the session's
// label then holds a hash of it.
func podLabels(spec transport.Spec, self map[string]string) (map[string]string, map[string]string) {
	labels := map[string]string{LabelManaged: "1"}
	annotations := map[string]string{}
	put := func(k, v string) {
		if len(validation.IsQualifiedName(k)) == 0 && len(validation.IsValidLabelValue(v)) == 0 {
			labels[k] = v
		} else {
			annotations[annotationKey(k)] = v
		}
	}
	for k, v := range self {
		put(k, v)
	}
	keys := make([]string, 0, len(spec.Labels))
	for k := range spec.Labels {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if k != LabelSession {
			put(k, spec.Labels[k])
		}
	}
	if spec.Session != "" {
		labels[LabelSession] = SessionLabel(spec.Session)
		annotations[AnnotationSession] = spec.Session
	}
	if spec.Listen != "" {
		annotations[AnnotationListen] = spec.Listen
	}
	return labels, annotations
}

// annotationKey is a key an annotation can take: "paddock/NAME" for Paddock's dotted keys.
func annotationKey(k string) string {
	if len(validation.IsQualifiedName(k)) == 0 {
		return k
	}
	return "paddock/" + badKey.ReplaceAllString(k, "-")
}

var badKey = regexp.MustCompile(`[^A-Za-z0-9._-]+`)

// SessionLabel is the value of a session's label: its id when a label's value can hold it,
// else a hash of it.
func SessionLabel(session string) string {
	if len(validation.IsValidLabelValue(session)) == 0 {
		return session
	}
	sum := sha256.Sum256([]byte(session))
	return "h-" + hex.EncodeToString(sum[:20])
}

// podName is a pod's name: paddock-, the session's id made a DNS label, and a random suffix.
func podName(session, suffix string) string {
	s := strings.Trim(nonName.ReplaceAllString(strings.ToLower(session), "-"), "-")
	if len(s) > 40 {
		s = strings.Trim(s[:40], "-")
	}
	if s == "" {
		return "paddock-" + suffix
	}
	return "paddock-" + s + "-" + suffix
}

var nonName = regexp.MustCompile(`[^a-z0-9-]+`)
