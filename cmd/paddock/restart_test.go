package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/paddockhq/paddock/client"
	"github.com/paddockhq/paddock/daemon/api"
	"github.com/paddockhq/paddock/images"
	"github.com/paddockhq/paddock/orchestrator"
	"github.com/paddockhq/paddock/transport/docker"
)

// startServe starts paddock serve as its own process and waits until it answers.
func startServe(t *testing.T, bin, sock, state string, env []string) (*exec.Cmd, chan struct{}) {
	t.Helper()
	cmd := exec.Command(bin, "serve", "--socket", sock, "--state", state)
	cmd.Env = env
	logf, err := os.Create(filepath.Join(t.TempDir(), "serve.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); logf.Close(); close(done) }()
	t.Cleanup(func() {
		cmd.Process.Signal(os.Interrupt)
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			cmd.Process.Kill()
			<-done
		}
	})
	c, err := client.New("unix://" + sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		h, err := c.Health(ctx)
		cancel()
		if err == nil && h.PID == cmd.Process.Pid {
			return cmd, done
		}
		select {
		case <-done:
			b, _ := os.ReadFile(logf.Name())
			t.Fatalf("paddock serve ended: %s", b)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("paddock serve does not answer: %v", err)
		}
	}
}

// A daemon killed outright with two container sessions open, one running a job: the next
// daemon finds both by their state files and labels, reattaches to their kernels (which
// listened, and outlived the daemon) and lists them open again; the job's output is
// complete, each byte once, and new steps run in both.
//
// law: job_no_silent_loss
func TestDaemonRestartDocker(t *testing.T) {
	needDocker(t)
	bin := buildPaddock(t)
	k, err := images.Default.Find(context.Background(), runtime.GOARCH)
	if err != nil {
		t.Fatal(err)
	}
	cfgDir := t.TempDir()
	os.MkdirAll(filepath.Join(cfgDir, "paddock"), 0o700)
	os.WriteFile(filepath.Join(cfgDir, "paddock", "settings.yaml"), []byte("kernelTransport:\n  kind: docker\n"), 0o600)
	env := append(os.Environ(), "PADDOCK_KERNEL="+k, "XDG_CONFIG_HOME="+cfgDir)
	dir, err := os.MkdirTemp("/tmp", "pd-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	sock := filepath.Join(dir, "run", "paddock.sock")
	state := filepath.Join(dir, "state")

	first, firstDone := startServe(t, bin, sock, state, env)
	c, err := client.New("unix://" + sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	ws := t.TempDir()
	a, err := c.Open(ctx, api.OpenRequest{Workspace: ws, BlockingBudget: "300ms"})
	if err != nil {
		t.Fatal(err)
	}
	b, err := c.Open(ctx, api.OpenRequest{Workspace: ws})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Bash(ctx, b.ID, api.BashRequest{Script: "cd /tmp"}); err != nil {
		t.Fatal(err)
	}
	const n = 60
	r, err := c.Bash(ctx, a.ID, api.BashRequest{Script: fmt.Sprintf("echo start; for i in $(seq 1 %d); do echo line$i; sleep 0.05; done", n)})
	if err != nil || r.End.Kind != orchestrator.Detached {
		t.Fatalf("%v %+v", err, r.Result)
	}
	cli, err := docker.Connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	containers := map[string][]string{}
	for _, id := range []string{a.ID, b.ID} {
		ids, err := docker.SessionContainers(ctx, cli, id)
		if err != nil || len(ids) != 1 {
			t.Fatalf("session %s: containers %v %v", id, ids, err)
		}
		containers[id] = ids
	}

	time.Sleep(500 * time.Millisecond)
	first.Process.Signal(syscall.SIGKILL)
	<-firstDone
	time.Sleep(500 * time.Millisecond) // the job goes on with no daemon
	startServe(t, bin, sock, state, env)
	c.Close()
	list, err := c.Sessions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]api.Session{}
	for _, s := range list {
		got[s.ID] = s
	}
	for _, id := range []string{a.ID, b.ID} {
		s, ok := got[id]
		if !ok {
			t.Fatalf("session %s was dropped", id)
		}
		if s.State != api.Open || s.Transport != "docker" {
			t.Errorf("session %s: %s (%s)", id, s.State, s.Reason)
		}
		if ids, err := docker.SessionContainers(ctx, cli, id); err != nil || !slices.Equal(ids, containers[id]) {
			t.Errorf("session %s: containers %v, before the restart %v (%v)", id, ids, containers[id], err)
		}
	}
	job, err := c.Wait(ctx, a.ID, r.End.Job, "")
	if err != nil {
		t.Fatal(err)
	}
	res := job.Result
	var want strings.Builder
	want.WriteString("start\n")
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&want, "line%d\n", i)
	}
	if res.End.Kind != orchestrator.Finished || res.End.Status != 0 || len(res.Steps) != 1 {
		t.Fatalf("the job's end: %+v", res.End)
	}
	out := res.Steps[0].Stdout
	if out.Text != want.String() || out.TotalBytes != int64(want.Len()) || out.DroppedBytes != 0 {
		t.Errorf("the job's output: %d bytes, %d dropped: %q", out.TotalBytes, out.DroppedBytes, out.Text)
	}
	if b, err := os.ReadFile(job.Artifact); err != nil || string(b) != want.String() {
		t.Errorf("the job's artifact: %q %v", b, err)
	}
	for _, id := range []string{a.ID, b.ID} {
		if r, err := c.Bash(ctx, id, api.BashRequest{Script: "echo again"}); err != nil || r.Steps[0].Stdout.Text != "again\n" {
			t.Errorf("session %s after the restart: %v %+v", id, err, r)
		}
	}
	for _, id := range []string{a.ID, b.ID} {
		if _, err := c.CloseSession(ctx, id); err != nil {
			t.Errorf("close %s: %v", id, err)
		}
		if ids, err := docker.SessionContainers(ctx, cli, id); err != nil || len(ids) != 0 {
			t.Errorf("session %s: containers left after close %v %v", id, ids, err)
		}
	}
}
