package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
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
// daemon lists both again, as ended with the reason, removes their containers, and opens
// new sessions that run.
//
// Not shown, because the kernel cannot outlive its host's connection yet: the job's output
// complete and a new step in the old session (see the daemon's recover).
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
	r, err := c.Bash(ctx, a.ID, api.BashRequest{Script: "for i in $(seq 1 100); do echo line$i; sleep 0.1; done"})
	if err != nil || r.End.Kind != orchestrator.Detached {
		t.Fatalf("%v %+v", err, r.Result)
	}
	cli, err := docker.Connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	for _, id := range []string{a.ID, b.ID} {
		if ids, err := docker.SessionContainers(ctx, cli, id); err != nil || len(ids) != 1 {
			t.Fatalf("session %s: containers %v %v", id, ids, err)
		}
	}

	first.Process.Signal(syscall.SIGKILL)
	<-firstDone
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
			t.Errorf("session %s was dropped", id)
			continue
		}
		if s.State != api.Ended || !strings.Contains(s.Reason, "container") || s.Transport != "docker" {
			t.Errorf("session %s: %s (%s)", id, s.State, s.Reason)
		}
		if ids, err := docker.SessionContainers(ctx, cli, id); err != nil || len(ids) != 0 {
			t.Errorf("session %s: containers left %v %v", id, ids, err)
		}
	}
	// The running job is listed as lost; its artifact holds the output it had produced.
	if jobs := got[a.ID].Jobs; len(jobs) != 1 || jobs[0].ID != r.End.Job || !jobs[0].Lost {
		t.Errorf("the killed daemon's job: %+v", jobs)
	} else if b, err := os.ReadFile(jobs[0].Artifact); err != nil || !strings.HasPrefix(string(b), "line1\nline2\n") {
		t.Errorf("the lost job's artifact: %q %v", b, err)
	}
	n, err := c.Open(ctx, api.OpenRequest{Workspace: ws})
	if err != nil {
		t.Fatal(err)
	}
	if r, err := c.Bash(ctx, n.ID, api.BashRequest{Script: "echo again"}); err != nil || r.Steps[0].Stdout.Text != "again\n" {
		t.Errorf("a new session after the restart: %v %+v", err, r.Result)
	}
	for _, id := range []string{a.ID, b.ID, n.ID} {
		if _, err := c.CloseSession(ctx, id); err != nil {
			t.Errorf("close %s: %v", id, err)
		}
	}
}
