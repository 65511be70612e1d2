package kubernetes

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/paddockhq/paddock/internal/await"
	"github.com/paddockhq/paddock/transport"
)

// A listening kernel's pod: its kernel listens in an emptyDir of its own at
// transport.ListenDir, never in a hostPath of the host's directory (its node need not be
// the host's machine); the directory is in an annotation, for the reaper and Reattach; the
// first process becomes the kernel with the listening arguments before the spec's.
func TestPlanListen(t *testing.T) {
	spec := testSpec(t)
	spec.Listen, spec.Key, spec.Args = "/state/sessions/s-1/kernel", "k3y", []string{"-grace", "1s"}
	p, err := planPod(spec, Settings{Namespace: "ns", Image: "img"}, self, "paddock-s-1-ab", false)
	if err != nil {
		t.Fatal(err)
	}
	var run *corev1.Volume
	for i, v := range p.Spec.Volumes {
		if v.HostPath != nil && v.HostPath.Path == spec.Listen {
			t.Errorf("the host's listening directory is a hostPath: %+v", v)
		}
		for _, m := range p.Spec.Containers[0].VolumeMounts {
			if m.Name == v.Name && m.MountPath == transport.ListenDir {
				run = &p.Spec.Volumes[i]
			}
		}
	}
	if run == nil || run.EmptyDir == nil {
		t.Fatalf("no emptyDir at %s: %+v", transport.ListenDir, p.Spec.Volumes)
	}
	if p.Annotations[AnnotationListen] != spec.Listen {
		t.Errorf("annotations %v", p.Annotations)
	}
	cmd := p.Spec.Containers[0].Command
	want := launchScript(append(append([]string{KernelPath}, transport.ListenArgs(spec)...), "-grace", "1s"), listenKeyPath)
	if len(cmd) != 3 || cmd[2] != want || strings.Contains(cmd[2], spec.Key) {
		t.Errorf("command %q", cmd)
	}
	// Without Listen the first process only keeps the pod up, and nothing is at ListenDir.
	spec.Listen, spec.Key = "", ""
	if p, err = planPod(spec, Settings{Namespace: "ns", Image: "img"}, self, "paddock-s-1-ab", false); err != nil {
		t.Fatal(err)
	}
	if cmd := p.Spec.Containers[0].Command; cmd[2] != keepUp {
		t.Errorf("command %q", cmd)
	}
	for _, m := range p.Spec.Containers[0].VolumeMounts {
		if m.MountPath == transport.ListenDir {
			t.Errorf("a mount at %s without Listen", m.MountPath)
		}
	}
}

// The first process of a listening pod, run by a real shell: it becomes the kernel (exec,
// its arguments whole, quotes and spaces kept) when USR1 comes once the key is in place, or
// at once when the key was there before its trap was set (a USR1 sent before then is lost
// to a container's first process).
func TestLaunchScript(t *testing.T) {
	argv := []string{"/bin/echo", "started", "a b", "it's", "$HOME"}
	for _, early := range []bool{false, true} {
		dir := t.TempDir()
		key := filepath.Join(dir, "key")
		if early {
			os.WriteFile(key, []byte("k"), 0o600)
		}
		cmd := exec.Command("/bin/sh", "-c", launchScript(argv, key))
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		if !early {
			// The one bounded poll, for want of an event: the shell says it catches USR1
			// only in /proc.
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			err := await.Poll(ctx, 5*time.Millisecond, func() bool { return catches(cmd.Process.Pid, syscall.SIGUSR1) })
			cancel()
			if err != nil {
				cmd.Process.Kill()
				t.Fatal("the shell never set its trap")
			}
			os.WriteFile(key, []byte("k"), 0o600)
			cmd.Process.Signal(syscall.SIGUSR1)
		}
		line, err := bufio.NewReader(out).ReadString('\n')
		if err != nil || line != "started a b it's $HOME\n" {
			t.Errorf("early %v: the kernel's line %q %v", early, line, err)
		}
		if err := cmd.Wait(); err != nil {
			t.Errorf("early %v: %v", early, err)
		}
	}
}

// catches says whether process pid catches sig, as /proc/PID/status's SigCgt says.
func catches(pid int, sig syscall.Signal) bool {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "status"))
	if err != nil {
		return false
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "SigCgt:"); ok {
			mask, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			return err == nil && mask&(1<<(uint(sig)-1)) != 0
		}
	}
	return false
}

// A relabelling patch sets the labels a pod's making would: the session's label (a hash
// when the id cannot be a label's value) and its id in an annotation; a value no label
// holds in an annotation.
func TestRelabelPatch(t *testing.T) {
	long := strings.Repeat("s", 70)
	b, err := relabelPatch(map[string]string{LabelSession: long, "paddock.pool": "p1", "team": "a b"})
	if err != nil {
		t.Fatal(err)
	}
	var p struct {
		Metadata struct{ Labels, Annotations map[string]string }
	}
	if err := json.Unmarshal(b, &p); err != nil {
		t.Fatal(err)
	}
	l, a := p.Metadata.Labels, p.Metadata.Annotations
	if l[LabelSession] != SessionLabel(long) || a[AnnotationSession] != long || l["paddock.pool"] != "p1" || a[annotationKey("team")] != "a b" {
		t.Errorf("labels %v annotations %v", l, a)
	}
	if _, ok := l["team"]; ok {
		t.Errorf("a value no label holds is a label: %v", l)
	}
}

// A listening kernel's pod has ended when its container has (an exit 0 is no error), or
// when the pod failed or succeeded; a running or pending one has not.
func TestPodEnded(t *testing.T) {
	status := func(phase corev1.PodPhase, state corev1.ContainerState) *corev1.Pod {
		return &corev1.Pod{Status: corev1.PodStatus{Phase: phase, ContainerStatuses: []corev1.ContainerStatus{{Name: Container, State: state}}}}
	}
	for _, c := range []struct {
		pod       *corev1.Pod
		ended, ok bool
	}{
		{status(corev1.PodRunning, corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}), false, true},
		{status(corev1.PodPending, corev1.ContainerState{}), false, true},
		{status(corev1.PodRunning, corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0}}), true, true},
		{status(corev1.PodSucceeded, corev1.ContainerState{}), true, true},
		{status(corev1.PodRunning, corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 137}}), true, false},
		{status(corev1.PodFailed, corev1.ContainerState{}), true, false},
	} {
		ended, err := podEnded(c.pod)
		if ended != c.ended || (err == nil) != c.ok {
			t.Errorf("%+v: ended %v %v", c.pod.Status, ended, err)
		}
		var gone *PodGoneError
		if c.pod.Status.Phase == corev1.PodFailed && !errors.As(err, &gone) {
			t.Errorf("a failed pod: %v, not a PodGoneError", err)
		}
	}
}

// An exec's connection closes as the exec should end: its input ends (the join then exits,
// the kernel having ended the connection), Read fails at once, and an exec that does not
// end is cut once closeGrace has passed; a deadline that passes cuts it at once.
func TestExecConnClose(t *testing.T) {
	newConn := func() (*execConn, *io.PipeReader, *io.PipeWriter, context.Context) {
		ctx, cancel := context.WithCancel(context.Background())
		inR, inW := io.Pipe()
		outR, outW := io.Pipe()
		return &execConn{pod: "p", in: inW, out: outR, outW: outW, cancel: cancel, ended: make(chan struct{})}, inR, outW, ctx
	}
	// An exec that ends once its input has: nothing is cut.
	c, inR, outW, ctx := newConn()
	go func() {
		io.Copy(io.Discard, inR) // the input's end
		outW.Write([]byte("late\n"))
		outW.Close()
		close(c.ended)
	}()
	c.Close()
	if n, err := c.Read(make([]byte, 8)); n != 0 || !errors.Is(err, net.ErrClosed) {
		t.Errorf("Read after Close: %d %v", n, err)
	}
	<-c.ended
	if ctx.Err() != nil {
		t.Errorf("an exec that ended as it should was cut")
	}
	// An exec that does not end is cut.
	c, _, _, ctx = newConn()
	c.Close()
	select {
	case <-ctx.Done():
	case <-time.After(time.Minute):
		t.Fatal("an exec that did not end was never cut")
	}
	// A deadline passed cuts the connection: a Read waiting fails.
	c, _, _, ctx = newConn()
	c.SetDeadline(time.Now().Add(10 * time.Millisecond))
	if _, err := c.Read(make([]byte, 8)); !errors.Is(err, os.ErrDeadlineExceeded) || ctx.Err() == nil {
		t.Errorf("Read past the deadline: %v (cut: %v)", err, ctx.Err())
	}
}
