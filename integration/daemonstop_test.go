package integration

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/paddockhq/paddock/client"
	"github.com/paddockhq/paddock/daemon/api"
	"github.com/paddockhq/paddock/orchestrator"
	"github.com/paddockhq/paddock/transport/docker"
)

// serveDirs are a daemon's socket and state directory, in a short path (a unix socket's
// path is bounded).
func serveDirs(t *testing.T) (sock, state string) {
	t.Helper()
	dir, err := os.MkdirTemp("/tmp", "pd-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return filepath.Join(dir, "run", "paddock.sock"), filepath.Join(dir, "state")
}

// waitingJob is a script whose output is known and which goes on until the file go exists
// in its working directory: a job that runs across whatever the test does meanwhile.
const waitingJob = "echo start; while [ ! -e go ]; do sleep 0.02; done; seq 1 1000; echo end"

func waitingJobOutput() string {
	var b strings.Builder
	b.WriteString("start\n")
	for i := 1; i <= 1000; i++ {
		fmt.Fprintf(&b, "%d\n", i)
	}
	b.WriteString("end\n")
	return b.String()
}

// A second daemon on a live state directory is refused before it touches anything, naming
// the pid that holds it; the first daemon's session, its container and its job go on.
func TestSecondDaemonRefused(t *testing.T) {
	cli := engine(t)
	bin := paddockBinary(t)
	sock, state := serveDirs(t)
	env := append(os.Environ(), "XDG_CONFIG_HOME="+t.TempDir())
	first, _ := startServe(t, bin, sock, state, env, "--drain")
	c, err := client.New("unix://" + sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	ws := t.TempDir()
	s, err := c.Open(ctx, api.OpenRequest{Workspace: ws, Transport: "docker", BlockingBudget: "100ms"})
	if err != nil {
		t.Fatal(err)
	}
	r, err := c.Bash(ctx, s.ID, api.BashRequest{Script: waitingJob})
	if err != nil || r.End.Kind != orchestrator.Detached {
		t.Fatalf("%v %+v", err, r)
	}
	before, _ := docker.SessionContainers(ctx, cli, s.ID)

	for _, other := range []string{filepath.Join(filepath.Dir(sock), "other.sock"), sock} {
		second := exec.CommandContext(ctx, bin, "serve", "--socket", other, "--state", state)
		second.Env = env
		var errOut bytes.Buffer
		second.Stderr = &errOut
		err := second.Run()
		if err == nil || second.ProcessState.ExitCode() == 0 {
			t.Fatalf("a second daemon on %s started: %s", state, errOut.String())
		}
		if !strings.Contains(errOut.String(), "pid "+strconv.Itoa(first.Process.Pid)) {
			t.Errorf("the refusal does not name the holder (pid %d): %s", first.Process.Pid, errOut.String())
		}
	}

	// The first daemon still holds its session: its container, its job, a new step.
	if after, _ := docker.SessionContainers(ctx, cli, s.ID); len(before) != 1 || fmt.Sprint(after) != fmt.Sprint(before) {
		t.Fatalf("the session's containers were %v, are %v", before, after)
	}
	r2, err := c.Bash(ctx, s.ID, api.BashRequest{Script: "echo still here; touch go"})
	if err != nil || len(r2.Steps) != 2 || r2.Steps[0].Stdout.Text != "still here\n" {
		t.Fatalf("a step after the second daemon: %v %+v", err, r2)
	}
	checkJob(t, ctx, c, s.ID, r.End.Job)
}

// checkJob waits for a waitingJob and checks its output is whole and once, in its result
// and in its artifact.
func checkJob(t *testing.T, ctx context.Context, c *client.Client, session, id string) {
	t.Helper()
	job, err := c.Wait(ctx, session, id, "")
	if err != nil {
		t.Fatal(err)
	}
	res := job.Result
	if res == nil {
		t.Fatalf("the job has no result: %+v", job)
	}
	if res.End.Kind != orchestrator.Finished || res.End.Status != 0 {
		t.Fatalf("the job's end: %+v", res.End)
	}
	var out strings.Builder
	for _, st := range res.Steps {
		out.WriteString(st.Stdout.Text)
		if st.Stdout.DroppedBytes != 0 {
			t.Errorf("step %d dropped %d bytes", st.Index, st.Stdout.DroppedBytes)
		}
	}
	if want := waitingJobOutput(); out.String() != want {
		t.Errorf("the job's output (%d bytes) is not whole and once (%d bytes)", out.Len(), len(want))
	}
	if b, err := os.ReadFile(job.Artifact); err != nil || string(b) != waitingJobOutput() {
		t.Errorf("the job's artifact: %d bytes, %v", len(b), err)
	}
}

// A daemon told to stop (SIGTERM) leaves its container session and its running job for
// the next one, as a killed daemon does: the next daemon lists the session open in the
// same container, and the job's output, which went on across the stop, is whole and once.
func TestSigtermKeepsSessions(t *testing.T) {
	cli := engine(t)
	bin := paddockBinary(t)
	sock, state := serveDirs(t)
	env := append(os.Environ(), "XDG_CONFIG_HOME="+t.TempDir())
	first, firstDone := startServe(t, bin, sock, state, env)
	c, err := client.New("unix://" + sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	ws := t.TempDir()
	s, err := c.Open(ctx, api.OpenRequest{Workspace: ws, Transport: "docker", BlockingBudget: "100ms"})
	if err != nil {
		t.Fatal(err)
	}
	r, err := c.Bash(ctx, s.ID, api.BashRequest{Script: waitingJob})
	if err != nil || r.End.Kind != orchestrator.Detached {
		t.Fatalf("%v %+v", err, r)
	}
	before, _ := docker.SessionContainers(ctx, cli, s.ID)

	first.Process.Signal(syscall.SIGTERM)
	<-firstDone
	if code := first.ProcessState.ExitCode(); code != 0 {
		t.Errorf("paddock serve after SIGTERM: status %d", code)
	}
	if after, _ := docker.SessionContainers(ctx, cli, s.ID); len(before) != 1 || fmt.Sprint(after) != fmt.Sprint(before) {
		t.Fatalf("the session's containers were %v, after the stop %v", before, after)
	}
	// The job goes on while no daemon runs.
	os.WriteFile(filepath.Join(ws, "go"), nil, 0o644)

	startServe(t, bin, sock, state, env, "--drain")
	info, err := c.Session(ctx, s.ID)
	if err != nil || info.State != api.Open {
		t.Fatalf("the session after the restart: %v %+v", err, info)
	}
	checkJob(t, ctx, c, s.ID, r.End.Job)
	if r, err := c.Bash(ctx, s.ID, api.BashRequest{Script: "echo again"}); err != nil || len(r.Steps) != 1 || r.Steps[0].Stdout.Text != "again\n" {
		t.Errorf("a step after the restart: %v %+v", err, r)
	}
	if _, err := c.CloseSession(ctx, s.ID); err != nil {
		t.Fatal(err)
	}
	if ids, _ := docker.SessionContainers(ctx, cli, s.ID); len(ids) != 0 {
		t.Errorf("containers left after close: %v", ids)
	}
}
