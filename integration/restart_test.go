package integration

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/paddockhq/paddock/client"
	"github.com/paddockhq/paddock/daemon/api"
	"github.com/paddockhq/paddock/internal/await"
	"github.com/paddockhq/paddock/orchestrator"
	"github.com/paddockhq/paddock/transport"
	"github.com/paddockhq/paddock/transport/containerd"
	"github.com/paddockhq/paddock/transport/docker"
	"github.com/paddockhq/paddock/transport/pathmap"
)

// startServe starts paddock serve as its own process, with flags, and waits until it
// answers. At the test's end it is interrupted: with --drain it closes its sessions then.
func startServe(t testing.TB, bin, sock, state string, env []string, flags ...string) (*exec.Cmd, chan struct{}) {
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
	// It answers once its socket accepts (a change in the socket's directory), unless it
	// ended first.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	go func() {
		select {
		case <-done:
			cancel()
		case <-ctx.Done():
		}
	}()
	err = await.Socket(ctx, sock)
	select {
	case <-done:
		b, _ := os.ReadFile(logf.Name())
		t.Fatalf("paddock serve ended: %s", b)
	default:
	}
	if err != nil {
		t.Fatalf("paddock serve does not listen: %v", err)
	}
	h, err := c.Health(ctx)
	if err != nil || h.PID != cmd.Process.Pid {
		t.Fatalf("paddock serve does not answer: %v %+v", err, h)
	}
	return cmd, done
}

// gate is a directory of files that jobs wait for (the test makes them) and make (the test
// waits for them), mounted in every container at its own path, an isolated child's too: the
// restart tests order what the jobs do and what the test does by these files, not by time.
type gate string

// newGate makes a gate directory.
func newGate(t *testing.T) gate {
	t.Helper()
	dir := t.TempDir()
	os.Chmod(dir, 0o777) // the kernel's user writes its marks there
	if err := os.WriteFile(filepath.Join(dir, "gate.py"), []byte(gateProgram), 0o644); err != nil {
		t.Fatal(err)
	}
	return gate(dir)
}

// path is the path of name in the gate, as both sides see it.
func (g gate) path(name string) string { return filepath.Join(string(g), name) }

// waitFor is a shell command that waits until the gate's file name exists.
func (g gate) waitFor(name string) string {
	return fmt.Sprintf("while [ ! -e %s ]; do sleep 0.02; done", g.path(name))
}

// mark is a shell command that makes the gate's file name.
func (g gate) mark(name string) string { return ": > " + g.path(name) }

// open makes the gate's file name, letting what waits for it go on.
func (g gate) open(t *testing.T, name string) {
	t.Helper()
	if err := os.WriteFile(g.path(name), nil, 0o644); err != nil {
		t.Fatal(err)
	}
}

// await waits until the gate's file name exists: something the jobs do has happened.
func (g gate) await(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	for {
		if _, err := os.Stat(g.path(name)); err == nil {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s was never made: %v", name, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// program is a command that runs one program through its steps, across a time with no
// host: the kernel's shell asks the host before each command it runs, so a job whose work
// must go on while no daemon runs does it in one program. Each step is "print FROM TO"
// (the lines lineFROM…lineTO), "tick UNTIL" (tick lines until the gate's file UNTIL
// exists), "mark NAME" or "wait NAME".
func (g gate) program(steps ...string) string {
	return "python3 " + g.path("gate.py") + " " + strings.Join(steps, " ")
}

// gateProgram is the program gate.program runs.
const gateProgram = `import os, sys, time
gate, args, i = os.path.dirname(os.path.abspath(__file__)), sys.argv[1:], 0
while i < len(args):
    op = args[i]
    if op == "print":
        for n in range(int(args[i + 1]), int(args[i + 2]) + 1):
            print("line%d" % n, flush=True)
        i += 3
        continue
    name = os.path.join(gate, args[i + 1])
    if op == "mark":
        open(name, "w").close()
    elif op == "wait":
        while not os.path.exists(name):
            time.sleep(0.02)
    elif op == "tick":
        while not os.path.exists(name):
            print("tick", flush=True)
            time.sleep(0.05)
    i += 2
`

// mounts are a session's mounts with the gate: the workspace at its own path, and the gate.
func (g gate) mounts(ws string) []string { return []string{ws + ":" + ws, string(g) + ":" + string(g)} }

// A daemon killed outright with two container sessions open, one in Docker and one in
// containerd, each running a job: the next daemon finds both by their state files and
// labels, reattaches to their kernels (which listened, and outlived the daemon) and lists
// them open again, in the same containers; each job's output is complete, each byte once,
// in its result and its artifact; new steps run in both; closing them leaves no container.
// Every job waits at a gate the test opens, so what runs across the kill runs across it
// however slow the machine is.
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
	g := newGate(t)
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
	const n = 200 // half before the kill, half while no daemon runs
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
		s, err := c.Open(ctx, api.OpenRequest{Workspace: ws, Transport: kind, BlockingBudget: "300ms", Mounts: g.mounts(ws)})
		if err != nil {
			t.Fatalf("%s: %v", kind, err)
		}
		// A multi-step script, taken up within its last step: a program prints half its
		// lines, says so and waits for the gate go, then prints the rest, says so and waits
		// for the gate end (which the test opens once it has seen the job taken up).
		script := fmt.Sprintf("cd sub && export WHERE=%s; echo start; %s", kind,
			g.program("print", "1", strconv.Itoa(n/2), "mark", "half-"+kind, "wait", "go",
				"print", strconv.Itoa(n/2+1), strconv.Itoa(n), "mark", "done-"+kind, "wait", "end"))
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
	early, err := c.Bash(ctx, sessions[0].id, api.BashRequest{Script: "echo early; " + g.waitFor("early")})
	if err != nil || early.End.Kind != orchestrator.Detached {
		t.Fatalf("%v %+v", err, early)
	}
	g.open(t, "early")
	if _, err := c.Wait(ctx, sessions[0].id, early.End.Job, ""); err != nil {
		t.Fatal(err)
	}
	// A third session, whose container goes while no daemon runs.
	gone, err := c.Open(ctx, api.OpenRequest{Workspace: ws, Transport: "docker", Mounts: g.mounts(ws)})
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
	// A child started with a script that runs across the restart: its second step says it
	// runs, and waits for the gate scripted.
	scripted, err := c.Spawn(ctx, sessions[0].id, api.SpawnRequest{Name: "scripted", Workspace: orchestrator.Isolated,
		Script: fmt.Sprintf("echo from the scripted child > scripted.txt; sh -c '%s; %s'; echo done", g.mark("in-scripted"), g.waitFor("scripted"))})
	if err != nil {
		t.Fatal(err)
	}
	// And one the gone session's script started: it cannot be taken up.
	goneScripted, err := c.Spawn(ctx, gone.ID, api.SpawnRequest{Name: "gone-scripted", Workspace: orchestrator.Isolated,
		Script: "echo from the gone script > gone-script.txt"})
	if err != nil {
		t.Fatal(err)
	}
	// Its script has ended, uncollected, and the daemon's record of the child says so (what
	// the daemon, killed below, leaves the next): the record is written anew at each of the
	// script's steps, its end the last.
	record := filepath.Join(state, "sessions", goneScripted.ID, "session.json")
	ectx, ecancel := context.WithTimeout(ctx, 2*time.Minute)
	defer ecancel()
	if err := await.Dir(ectx, filepath.Dir(record), func() bool {
		b, _ := os.ReadFile(record)
		var st struct {
			Jobs map[string]struct{ State orchestrator.JobState }
		}
		json.Unmarshal(b, &st)
		for _, j := range st.Jobs {
			if j.State.Ended {
				return true
			}
		}
		return false
	}); err != nil {
		t.Fatalf("the gone session's scripted child's script did not end: %v", err)
	}
	for id, script := range map[string]string{child.ID: "echo from the child > kid.txt", orphan.ID: "echo from the orphan > orphan.txt"} {
		if r, err := c.Bash(ctx, id, api.BashRequest{Script: script}); err != nil || r.End.Status != 0 {
			t.Fatalf("%v %+v", err, r)
		}
	}

	// Last before the kill, a job that prints until the gate quiet opens, then goes quiet:
	// its no-output timeout kills it after the restart.
	quiet, err := c.Open(ctx, api.OpenRequest{Workspace: ws, Transport: "docker", BlockingBudget: "300ms", NoOutputTimeout: "5s", Mounts: g.mounts(ws)})
	if err != nil {
		t.Fatal(err)
	}
	qr, err := c.Bash(ctx, quiet.ID, api.BashRequest{Script: "echo start; " + g.program("tick", "quiet", "mark", "quiet-now") + "; sleep 600"})
	if err != nil || qr.End.Kind != orchestrator.Detached {
		t.Fatalf("%v %+v", err, qr)
	}
	// The kill comes once each job is where the test means it to be.
	for _, m := range []string{"half-docker", "half-containerd", "in-scripted"} {
		g.await(t, ctx, m)
	}
	first.Process.Signal(syscall.SIGKILL)
	<-firstDone
	if n, err := docker.RemoveSession(ctx, cli, gone.ID); err != nil || n != 1 {
		t.Fatalf("removing the third session's container: %d %v", n, err)
	}
	// The jobs go on with no daemon: the sessions' jobs print the rest of their output, and
	// the quiet job goes quiet.
	g.open(t, "go")
	g.open(t, "quiet")
	for _, m := range []string{"done-docker", "done-containerd", "quiet-now"} {
		g.await(t, ctx, m)
	}
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
	if j, err := c.Wait(ctx, quiet.ID, qr.End.Job, ""); err != nil || j.Result.End.Kind != orchestrator.Killed || j.Result.End.Code != orchestrator.CodeNoOutput {
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
	g.open(t, "scripted")
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
		g.open(t, "end")
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

// nextQuestion reads a session's stream until a question comes.
func nextQuestion(t *testing.T, st *client.Stream) api.Question {
	t.Helper()
	for {
		e, err := st.Next()
		if err != nil {
			t.Fatalf("the stream ended before a question: %v", err)
		}
		if e.Question != nil {
			return *e.Question
		}
	}
}

// A step that waits for an answer when its daemon is killed is asked again by the next
// daemon once clients can attach, and the question waits for one (the session's blocking
// budget): the client that attaches after the restart is shown it, and its yes runs the step
// and the rest of the job. (Asked again while the new daemon was not yet listening, it was
// refused at once: nobody could be attached.)
func TestRestartAsksAgain(t *testing.T) {
	engine(t)
	bin := paddockBinary(t)
	sock, state := serveDirs(t)
	env := append(os.Environ(), "XDG_CONFIG_HOME="+t.TempDir())
	first, firstDone := startServe(t, bin, sock, state, env, "--drain")
	c, err := client.New("unix://" + sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	ws := t.TempDir()
	s, err := c.Open(ctx, api.OpenRequest{Workspace: ws, Transport: "docker", BlockingBudget: "1m",
		Settings: map[string]string{"shell.autoEffects": "read"}})
	if err != nil {
		t.Fatal(err)
	}
	st, err := c.Events(ctx, s.ID, api.StreamInteractive)
	if err != nil {
		t.Fatal(err)
	}
	r, err := c.Bash(ctx, s.ID, api.BashRequest{Script: "echo a; touch asked; echo b", Budget: "300ms"})
	if err != nil || r.End.Kind != orchestrator.Detached {
		t.Fatalf("%v %+v", err, r.Result)
	}
	if q := nextQuestion(t, st); q.Command != "touch asked" {
		t.Fatalf("the question: %+v", q)
	}
	first.Process.Signal(syscall.SIGKILL)
	<-firstDone
	st.Close()

	startServe(t, bin, sock, state, env, "--drain")
	st, err = c.Events(ctx, s.ID, api.StreamInteractive)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	q := nextQuestion(t, st)
	if q.Command != "touch asked" {
		t.Fatalf("the question asked again: %+v", q)
	}
	if err := c.Answer(ctx, s.ID, q.ID, api.AnswerRequest{Approve: true, Client: "test"}); err != nil {
		t.Fatal(err)
	}
	j, err := c.Wait(ctx, s.ID, r.End.Job, "")
	if err != nil {
		t.Fatal(err)
	}
	if res := j.Result; res.End.Kind != orchestrator.Finished || len(res.Steps) != 3 || res.Steps[2].Stdout.Text != "b\n" {
		t.Fatalf("the job after its answer: %+v", res)
	}
	if _, err := os.Stat(filepath.Join(ws, "asked")); err != nil {
		t.Errorf("the approved step did not run: %v", err)
	}
}
