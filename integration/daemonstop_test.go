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

// servedJob is a paddock serve with one docker session running a waitingJob.
type servedJob struct {
	bin, sock, state string
	env              []string
	serve            *exec.Cmd
	served           chan struct{} // closed when serve has ended
	c                *client.Client
	ctx              context.Context
	ws               string
	session, job     string
	containers       []string // the session's, as they were
}

// serveJob starts paddock serve with flags, opens a docker session and starts a waitingJob
// in it, detached.
func serveJob(t *testing.T, flags ...string) *servedJob {
	t.Helper()
	engine(t) // the engine answers, or the test skips (fails when peers are required)
	j := &servedJob{bin: paddockBinary(t), env: append(os.Environ(), "XDG_CONFIG_HOME="+t.TempDir()), ws: t.TempDir()}
	j.sock, j.state = serveDirs(t)
	j.serve, j.served = startServe(t, j.bin, j.sock, j.state, j.env, flags...)
	c, err := client.New("unix://" + j.sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	j.c, j.ctx = c, ctx
	s, err := c.Open(ctx, api.OpenRequest{Workspace: j.ws, Transport: "docker", BlockingBudget: "100ms"})
	if err != nil {
		t.Fatal(err)
	}
	r, err := c.Bash(ctx, s.ID, api.BashRequest{Script: waitingJob})
	if err != nil || r.End.Kind != orchestrator.Detached {
		t.Fatalf("%v %+v", err, r)
	}
	j.session, j.job = s.ID, r.End.Job
	j.containers = j.sessionContainers(t)
	if len(j.containers) != 1 {
		t.Fatalf("the session's containers: %v", j.containers)
	}
	return j
}

// sessionContainers lists the session's containers now.
func (j *servedJob) sessionContainers(t *testing.T) []string {
	t.Helper()
	ids, err := docker.SessionContainers(j.ctx, engine(t), j.session)
	if err != nil {
		t.Fatal(err)
	}
	return ids
}

// A second daemon on a live state directory is refused before it touches anything, naming
// the pid that holds it; the first daemon's session, its container and its job go on.
func TestSecondDaemonRefused(t *testing.T) {
	j := serveJob(t, "--drain")
	for _, other := range []string{filepath.Join(filepath.Dir(j.sock), "other.sock"), j.sock} {
		second := exec.CommandContext(j.ctx, j.bin, "serve", "--socket", other, "--state", j.state)
		second.Env = j.env
		var errOut bytes.Buffer
		second.Stderr = &errOut
		err := second.Run()
		if err == nil || second.ProcessState.ExitCode() == 0 {
			t.Fatalf("a second daemon on %s started: %s", j.state, errOut.String())
		}
		if !strings.Contains(errOut.String(), "pid "+strconv.Itoa(j.serve.Process.Pid)) {
			t.Errorf("the refusal does not name the holder (pid %d): %s", j.serve.Process.Pid, errOut.String())
		}
	}
	// The first daemon still holds its session: its container, its job, a new step.
	if after := j.sessionContainers(t); fmt.Sprint(after) != fmt.Sprint(j.containers) {
		t.Fatalf("the session's containers were %v, are %v", j.containers, after)
	}
	r, err := j.c.Bash(j.ctx, j.session, api.BashRequest{Script: "echo still here; touch go"})
	if err != nil || len(r.Steps) != 2 || r.Steps[0].Stdout.Text != "still here\n" {
		t.Fatalf("a step after the second daemon: %v %+v", err, r)
	}
	checkJob(t, j.ctx, j.c, j.session, j.job)
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
	j := serveJob(t)
	j.serve.Process.Signal(syscall.SIGTERM)
	<-j.served
	if code := j.serve.ProcessState.ExitCode(); code != 0 {
		t.Errorf("paddock serve after SIGTERM: status %d", code)
	}
	if after := j.sessionContainers(t); fmt.Sprint(after) != fmt.Sprint(j.containers) {
		t.Fatalf("the session's containers were %v, after the stop %v", j.containers, after)
	}
	// The job goes on while no daemon runs.
	os.WriteFile(filepath.Join(j.ws, "go"), nil, 0o644)

	startServe(t, j.bin, j.sock, j.state, j.env, "--drain")
	info, err := j.c.Session(j.ctx, j.session)
	if err != nil || info.State != api.Open {
		t.Fatalf("the session after the restart: %v %+v", err, info)
	}
	checkJob(t, j.ctx, j.c, j.session, j.job)
	if r, err := j.c.Bash(j.ctx, j.session, api.BashRequest{Script: "echo again"}); err != nil || len(r.Steps) != 1 || r.Steps[0].Stdout.Text != "again\n" {
		t.Errorf("a step after the restart: %v %+v", err, r)
	}
	if _, err := j.c.CloseSession(j.ctx, j.session); err != nil {
		t.Fatal(err)
	}
	if ids := j.sessionContainers(t); len(ids) != 0 {
		t.Errorf("containers left after close: %v", ids)
	}
}
