package integration

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/paddockhq/paddock/client"
	"github.com/paddockhq/paddock/daemon/api"
	"github.com/paddockhq/paddock/orchestrator"
	"github.com/paddockhq/paddock/transport"
	"github.com/paddockhq/paddock/transport/containerd"
	"github.com/paddockhq/paddock/transport/docker"
	"github.com/paddockhq/paddock/transport/pathmap"
)

// startServe starts paddock serve as its own process, with flags, and waits until it
// answers. At the test's end it is interrupted: with --drain it closes its sessions then.
func startServe(t *testing.T, bin, sock, state string, env []string, flags ...string) (*exec.Cmd, chan struct{}) {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"serve", "--socket", sock, "--state", state}, flags...)...)
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
		if t.Failed() {
			b, _ := os.ReadFile(logf.Name())
			t.Logf("paddock serve (pid %d) said:\n%s", cmd.Process.Pid, b)
		}
	})
	c, err := client.New("unix://" + sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(20 * time.Millisecond) {
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

// A daemon killed outright with two container sessions open, one in Docker and one in
// containerd, each running a job: the next daemon finds both by their state files and
// labels, reattaches to their kernels (which listened, and outlived the daemon) and lists
// them open again, in the same containers; each job's output is complete, each byte once,
// in its result and its artifact; new steps run in both; closing them leaves no container.
//
// law: job_no_silent_loss
func TestDaemonRestart(t *testing.T) {
	cli := engine(t)
	cd, addr := containerdAt(t)
	bin := paddockBinary(t)
	env := append(os.Environ(), "XDG_CONFIG_HOME="+t.TempDir(), "PADDOCK_CONTAINERD_ADDRESS="+addr)
	dir, err := os.MkdirTemp("/tmp", "pd-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	sock := filepath.Join(dir, "run", "paddock.sock")
	state := filepath.Join(dir, "state")

	first, firstDone := startServe(t, bin, sock, state, env, "--drain")
	c, err := client.New("unix://" + sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	ws := t.TempDir()
	os.Mkdir(filepath.Join(ws, "sub"), 0o755)
	containersOf := func(kind, id string) []string {
		var ids []string
		var err error
		switch kind {
		case "docker":
			ids, err = docker.SessionContainers(ctx, cli, id)
		case "containerd":
			ids, err = containerd.SessionContainers(ctx, cd, id)
		}
		if err != nil {
			t.Fatal(err)
		}
		return ids
	}
	const n = 200 // 10 s of output: the jobs run across the restart
	var want strings.Builder
	want.WriteString("start\n")
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&want, "line%d\n", i)
	}
	type opened struct {
		kind, id, job string
		containers    []string
	}
	var sessions []opened
	for _, kind := range []string{"docker", "containerd"} {
		s, err := c.Open(ctx, api.OpenRequest{Workspace: ws, Transport: kind, BlockingBudget: "300ms"})
		if err != nil {
			t.Fatalf("%s: %v", kind, err)
		}
		// A multi-step script: the job is taken up between steps as well as within one.
		script := fmt.Sprintf("cd sub && export WHERE=%s; echo start; sh -c 'for i in $(seq 1 %d); do echo line$i; sleep 0.05; done'", kind, n)
		r, err := c.Bash(ctx, s.ID, api.BashRequest{Script: script})
		if err != nil || r.End.Kind != orchestrator.Detached {
			t.Fatalf("%s: %v %+v", kind, err, r)
		}
		ids := containersOf(kind, s.ID)
		if len(ids) != 1 {
			t.Fatalf("%s session: containers %v", kind, ids)
		}
		sessions = append(sessions, opened{kind, s.ID, r.End.Job, ids})
	}

	// A job of the Docker session that ended before the kill is still answered for after it.
	early, err := c.Bash(ctx, sessions[0].id, api.BashRequest{Script: "echo early; sleep 0.5"})
	if err != nil || early.End.Kind != orchestrator.Detached {
		t.Fatalf("%v %+v", err, early)
	}
	if _, err := c.Wait(ctx, sessions[0].id, early.End.Job, ""); err != nil {
		t.Fatal(err)
	}
	// A third session, whose container goes while no daemon runs.
	gone, err := c.Open(ctx, api.OpenRequest{Workspace: ws, Transport: "docker"})
	if err != nil {
		t.Fatal(err)
	}

	// An isolated child of the Docker session, and one of the session whose container goes,
	// have each written a file in their clone.
	child, err := c.Spawn(ctx, sessions[0].id, api.SpawnRequest{Name: "kid", Workspace: orchestrator.Isolated})
	if err != nil {
		t.Fatal(err)
	}
	orphan, err := c.Spawn(ctx, gone.ID, api.SpawnRequest{Name: "orphan", Workspace: orchestrator.Isolated})
	if err != nil {
		t.Fatal(err)
	}
	// A child started with a script that runs across the restart.
	scripted, err := c.Spawn(ctx, sessions[0].id, api.SpawnRequest{Name: "scripted", Workspace: orchestrator.Isolated,
		Script: "echo from the scripted child > scripted.txt; sleep 4; echo done"})
	if err != nil {
		t.Fatal(err)
	}
	// And one the gone session's script started: it cannot be taken up.
	goneScripted, err := c.Spawn(ctx, gone.ID, api.SpawnRequest{Name: "gone-scripted", Workspace: orchestrator.Isolated,
		Script: "echo from the gone script > gone-script.txt"})
	if err != nil {
		t.Fatal(err)
	}
	for done := false; !done; time.Sleep(10 * time.Millisecond) { // its script has ended, uncollected
		info, err := c.Session(ctx, gone.ID)
		if err != nil {
			t.Fatal(err)
		}
		for _, sp := range info.Spawned {
			done = done || (sp.ID == goneScripted.ID && sp.Done)
		}
	}
	for id, script := range map[string]string{child.ID: "echo from the child > kid.txt", orphan.ID: "echo from the orphan > orphan.txt"} {
		if r, err := c.Bash(ctx, id, api.BashRequest{Script: script}); err != nil || r.End.Status != 0 {
			t.Fatalf("%v %+v", err, r)
		}
	}

	// Last before the kill, a job that goes quiet: its no-output timeout kills it after
	// the restart.
	quiet, err := c.Open(ctx, api.OpenRequest{Workspace: ws, Transport: "docker", BlockingBudget: "300ms", NoOutputTimeout: "5s"})
	if err != nil {
		t.Fatal(err)
	}
	qr, err := c.Bash(ctx, quiet.ID, api.BashRequest{Script: "echo start; sleep 600"})
	if err != nil || qr.End.Kind != orchestrator.Detached {
		t.Fatalf("%v %+v", err, qr)
	}
	first.Process.Signal(syscall.SIGKILL)
	<-firstDone
	if n, err := docker.RemoveSession(ctx, cli, gone.ID); err != nil || n != 1 {
		t.Fatalf("removing the third session's container: %d %v", n, err)
	}
	time.Sleep(500 * time.Millisecond) // the jobs go on with no daemon
	startServe(t, bin, sock, state, env, "--drain")
	c.Close()
	list, err := c.Sessions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]api.Session{}
	for _, s := range list {
		got[s.ID] = s
	}
	if j, err := c.Wait(ctx, sessions[0].id, early.End.Job, ""); err != nil || !j.Done || j.Result.End.Kind != orchestrator.Finished ||
		j.Result.Steps[0].Stdout.Text != "early\n" {
		t.Errorf("the job that ended before the restart: %v %+v", err, j)
	}
	if jobs := got[sessions[0].id].Jobs; len(jobs) != 2 {
		t.Errorf("the Docker session's jobs after the restart: %+v", jobs)
	}
	if jobs := got[quiet.ID].Jobs; len(jobs) != 1 || jobs[0].Done {
		t.Errorf("the quiet job at the restart: %+v", jobs)
	}
	if j, err := c.Wait(ctx, quiet.ID, qr.End.Job, ""); err != nil || j.Result.End.Kind != orchestrator.Killed {
		t.Errorf("the quiet job after the restart: %v %+v", err, j.Result)
	}
	if _, err := c.CloseSession(ctx, quiet.ID); err != nil {
		t.Error(err)
	}
	// The session whose container went is listed as ended, saying so.
	if g := got[gone.ID]; g.State != api.Ended || !strings.Contains(g.Reason, "its container is gone") {
		t.Errorf("the session whose container went: %s (%s)", g.State, g.Reason)
	}
	if _, err := c.CloseSession(ctx, gone.ID); err != nil {
		t.Error(err)
	}
	// The Docker session's child is taken up too, still isolated: its file is in its clone
	// only, until it is closed and handed back.
	if k := got[child.ID]; k.State != api.Open {
		t.Errorf("the child after the restart: %s (%s)", k.State, k.Reason)
	}
	if _, err := os.Stat(filepath.Join(ws, "kid.txt")); !os.IsNotExist(err) {
		t.Errorf("the child's file is in the workspace before its hand-back: %v", err)
	}
	if r, err := c.Bash(ctx, child.ID, api.BashRequest{Script: "cat kid.txt"}); err != nil || r.Steps[0].Stdout.Text != "from the child\n" {
		t.Errorf("the child after the restart: %v %+v", err, r)
	}
	if k, err := c.CloseSession(ctx, child.ID); err != nil || k.Handback == nil || len(k.Handback.Taken) != 1 {
		t.Errorf("the child's hand-back: %v %+v", err, k.Handback)
	}
	if b, err := os.ReadFile(filepath.Join(ws, "kid.txt")); err != nil || string(b) != "from the child\n" {
		t.Errorf("the child's file: %q %v", b, err)
	}
	// The child of the session whose container went cannot be taken up: it is listed as
	// ended, its workspace handed back, nothing it wrote lost.
	if k := got[orphan.ID]; k.State != api.Ended || k.Handback == nil || len(k.Handback.Taken) != 1 || k.Handback.Taken[0].Path != "orphan.txt" {
		t.Errorf("the orphaned child after the restart: %s (%s) %+v", k.State, k.Reason, k.Handback)
	}
	if b, err := os.ReadFile(filepath.Join(ws, "orphan.txt")); err != nil || string(b) != "from the orphan\n" {
		t.Errorf("the orphaned child's file: %q %v", b, err)
	}
	if b, err := os.ReadFile(filepath.Join(ws, "gone-script.txt")); err != nil || string(b) != "from the gone script\n" {
		t.Errorf("the gone session's scripted child's file: %q %v", b, err)
	}
	// The scripted child is taken up too: collected as if this daemon had started it, its
	// script ended, its file handed back.
	if _, err := os.Stat(filepath.Join(ws, "scripted.txt")); !os.IsNotExist(err) {
		t.Errorf("the scripted child's file is in the workspace before its collection: %v", err)
	}
	if sp := got[sessions[0].id].Spawned; len(sp) != 1 || sp[0].ID != scripted.ID || sp[0].Done {
		t.Errorf("the scripted child at the restart: %+v", sp)
	}
	col, err := c.Collect(ctx, sessions[0].id, scripted.ID, "")
	if err != nil || !col.Done || col.Result == nil || col.Result.End.Kind != orchestrator.Finished || len(col.Result.Steps) != 3 ||
		col.Result.Steps[2].Stdout.Text != "done\n" || col.Handback == nil || len(col.Handback.Taken) != 1 {
		t.Errorf("the scripted child collected after the restart: %v %+v", err, col)
	}
	if b, err := os.ReadFile(filepath.Join(ws, "scripted.txt")); err != nil || string(b) != "from the scripted child\n" {
		t.Errorf("the scripted child's file: %q %v", b, err)
	}
	for _, id := range []string{child.ID, orphan.ID, scripted.ID, goneScripted.ID} {
		if ids := containersOf("docker", id); len(ids) != 0 {
			t.Errorf("child %s: containers left %v", id, ids)
		}
	}
	for _, o := range sessions {
		s, ok := got[o.id]
		if !ok {
			t.Fatalf("%s session %s was dropped", o.kind, o.id)
		}
		if s.State != api.Open || s.Transport != o.kind {
			t.Errorf("%s session: %s %s (%s)", o.kind, s.State, s.Transport, s.Reason)
		}
		if ids := containersOf(o.kind, o.id); !slices.Equal(ids, o.containers) {
			t.Errorf("%s session: containers %v, before the restart %v", o.kind, ids, o.containers)
		}
		if jobs := s.Jobs; len(jobs) == 0 || jobs[0].ID != o.job || jobs[0].Done {
			t.Errorf("%s: the job at the restart: %+v", o.kind, jobs)
		}
		job, err := c.Wait(ctx, o.id, o.job, "")
		if err != nil {
			t.Fatal(err)
		}
		res := job.Result
		if res.End.Kind != orchestrator.Finished || res.End.Status != 0 || len(res.Steps) != 4 {
			t.Fatalf("%s: the job's end: %+v", o.kind, res)
		}
		out := res.Steps[3].Stdout
		if res.Steps[2].Stdout.Text+out.Text != want.String() || out.DroppedBytes != 0 {
			t.Errorf("%s: the job's output: %q %q (%d dropped)", o.kind, res.Steps[2].Stdout.Text, out.Text, out.DroppedBytes)
		}
		if b, err := os.ReadFile(job.Artifact); err != nil || string(b) != want.String() {
			t.Errorf("%s: the job's artifact: %q %v", o.kind, b, err)
		}
		r, err := c.Bash(ctx, o.id, api.BashRequest{Script: "echo again"})
		if err != nil || len(r.Steps) != 1 || r.Steps[0].Stdout.Text != "again\n" {
			t.Errorf("%s session after the restart: %v %+v", o.kind, err, r)
		}
	}
	for _, o := range sessions {
		if _, err := c.CloseSession(ctx, o.id); err != nil {
			t.Errorf("close %s: %v", o.id, err)
		}
		if ids := containersOf(o.kind, o.id); len(ids) != 0 {
			t.Errorf("%s session: containers left after close %v", o.kind, ids)
		}
	}
	// Closed, every session leaves nothing in the state directory: no session's files, no
	// clone (a clean hand-back keeps nothing).
	for _, sub := range []string{"sessions", "handbacks"} {
		if left, _ := os.ReadDir(filepath.Join(state, sub)); len(left) != 0 {
			t.Errorf("%s left in the state directory: %v", sub, left)
		}
	}
}

func TestListenAsContainerUser(t *testing.T) {
	if os.Getuid() != 0 {
		needPeer(t, "giving the listening directory to another uid needs root")
	}
	cli := engine(t)
	img := hostImage(t, cli)
	kernel := kernelBinary(t)
	ctx := testContext(t)
	// An image that knows the name: the host image with a passwd file.
	build := t.TempDir()
	os.WriteFile(filepath.Join(build, "passwd"), []byte("root:x:0:0::/:/bin/sh\nnobody:x:65534:65534::/:/bin/false\n"), 0o644)
	os.WriteFile(filepath.Join(build, "Dockerfile"), []byte("FROM "+img+"\nCOPY passwd /etc/passwd\n"), 0o644)
	named := randomName("paddock-named-user-") + ":1"
	if out, err := exec.Command("docker", "build", "-q", "--label", "paddock.test=integration", "-t", named, build).CombinedOutput(); err != nil {
		t.Fatalf("docker build: %v\n%s", err, out)
	}
	t.Cleanup(func() { exec.Command("docker", "rmi", "-f", named).Run() })
	// A kernel runs as a numeric user, as a name only the image knows, and, with no user
	// named, as the workspace's owner (not root): the first and last can listen.
	for _, tc := range []struct {
		name   string
		user   string
		owner  int
		listen bool
	}{{"65534:65534", "65534:65534", 0, true}, {"nobody", "nobody", 0, false}, {"owner", "", 65534, true}} {
		t.Run(tc.name, func(t *testing.T) {
			ws := t.TempDir()
			os.Chmod(ws, 0o777)
			if tc.owner != 0 {
				if err := os.Chown(ws, tc.owner, tc.owner); err != nil {
					t.Fatal(err)
				}
			}
			pm, err := pathmap.New(pathmap.Mount{Sandbox: "/work", Host: ws})
			if err != nil {
				t.Fatal(err)
			}
			tr := &docker.Transport{Client: cli, Image: named, Mounts: hostMounts(), NoReap: true, Hardening: docker.Hardening{User: tc.user}}
			cfg := orchestrator.Config{Workspace: ws, Transport: tr, Kernel: kernel, Env: sandboxEnv, PathMap: pm,
				Listen: filepath.Join(t.TempDir(), "kernel"), Key: "k"}
			s, err := orchestrator.Open(ctx, cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if r, err := s.Bash(ctx, "id -u"); err != nil || r.Steps[0].Stdout.Text != "65534\n" {
				t.Fatalf("id -u: %v %+v", err, r)
			}
			spec := transport.Spec{Session: s.ID(), Listen: cfg.Listen, Key: cfg.Key}
			k, err := tr.Reattach(ctx, spec)
			if !tc.listen {
				if !errors.Is(err, transport.ErrGone) {
					t.Fatalf("a kernel on its standard streams was reattached: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			cfg.ID = s.ID()
			s2, err := orchestrator.Reopen(ctx, cfg, k, nil)
			if err != nil {
				t.Fatal(err)
			}
			if r, err := s2.Bash(ctx, "echo again"); err != nil || r.Steps[0].Stdout.Text != "again\n" {
				t.Errorf("after the reattach: %v %+v", err, r)
			}
		})
	}
}
