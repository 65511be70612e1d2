package daemon_test

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"golang.org/x/sync/errgroup"

	"github.com/paddockhq/paddock/client"
	"github.com/paddockhq/paddock/daemon"
	"github.com/paddockhq/paddock/daemon/api"
	"github.com/paddockhq/paddock/errdefs"
	"github.com/paddockhq/paddock/internal/await"
	"github.com/paddockhq/paddock/internal/peer"
	"github.com/paddockhq/paddock/orchestrator"
	"github.com/paddockhq/paddock/transport/docker"
)

// The daemon as paddock serve runs it: sessions opened by the library (OpenRequest) with the
// settings of their workspace and of a global settings file.

// startLibrary starts a daemon whose sessions the library opens (OpenRequest), on the given
// global settings, the kernel found as the CLI finds it.
func startLibrary(t *testing.T, settings string) *testDaemon {
	t.Helper()
	t.Setenv("PADDOCK_KERNEL", kernel(t))
	cfg := t.TempDir()
	t.Setenv("XDG_CONFIG_HOME", cfg)
	os.MkdirAll(filepath.Join(cfg, "paddock"), 0o700)
	if err := os.WriteFile(filepath.Join(cfg, "paddock", "settings.yaml"), []byte(settings), 0o600); err != nil {
		t.Fatal(err)
	}
	return startDaemon(t, daemonOptions{open: daemon.OpenRequest})
}

// A daemon's session reads its workspace's settings as run does: a project's file that
// spells kernelTransport with a long s (U+017F) does not choose a wrapper the host runs; the
// session runs where the global file says, and its warnings name the key as written. (Read
// by viper, such a key won over the true one about half the time: sessions are opened a few.)
// law: project_never_widens
func TestDaemonSessionProjectCannotChooseTransport(t *testing.T) {
	d := startLibrary(t, "kernelTransport:\n  kind: local\n")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ws := t.TempDir()
	marker := filepath.Join(t.TempDir(), "owned")
	os.Mkdir(filepath.Join(ws, ".paddock"), 0o700)
	project := "kernelTran\u017fport:\n  kind: wrapped\n  wrapped:\n    argvPrefix: [sh, -c, 'touch " + marker + "; exec \"$@\"', sh]\n"
	if err := os.WriteFile(filepath.Join(ws, ".paddock", "settings.yaml"), []byte(project), 0o600); err != nil {
		t.Fatal(err)
	}
	for range 6 {
		s, err := d.c.Open(ctx, api.OpenRequest{Workspace: ws})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := d.c.Bash(ctx, s.ID, api.BashRequest{Script: "true"}); err != nil {
			t.Fatal(err)
		}
		d.c.CloseSession(ctx, s.ID)
		if s.Transport != "local" {
			t.Fatalf("transport %q, want local", s.Transport)
		}
		if _, err := os.Stat(marker); err == nil {
			t.Fatal("the project's wrapper ran on the host")
		}
		if w := strings.Join(s.Warnings, "\n"); !strings.Contains(w, `"kernelTran\u017fport" is ignored`) {
			t.Fatalf("no warning names the key as written:\n%s", w)
		}
	}
}

// The daemon's sessions take output.artifactBytes and shell.jobTimeout from the global
// settings: a detached yes is killed at its time limit, its artifact at the 1 MiB cap, and
// what jobs wait prints says how it was killed and what the file dropped.
//
// law: job_output_bounded
// law: job_no_silent_loss
func TestJobCapAndTimeoutSettings(t *testing.T) {
	d := startLibrary(t, "kernelTransport: {kind: local}\noutput: {artifactBytes: 1048576}\nshell: {jobTimeout: 2s}\n")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	s, err := d.c.Open(ctx, api.OpenRequest{Workspace: t.TempDir(), BlockingBudget: "100ms"})
	if err != nil {
		t.Fatal(err)
	}
	r, err := d.c.Bash(ctx, s.ID, api.BashRequest{Script: "yes"})
	if err != nil || r.End.Kind != orchestrator.Detached {
		t.Fatalf("%v %+v", err, r.Result)
	}
	j, err := d.c.Wait(ctx, s.ID, r.End.Job, "")
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(j.Artifact)
	if err != nil || fi.Size() != 1<<20 {
		t.Fatalf("the artifact: %v %v", fi, err)
	}
	sv := j.Result.Saved
	if j.Result.End.Code != orchestrator.CodeTimeout || sv == nil || sv.Dropped != sv.Written-1<<20 || sv.Dropped <= 0 {
		t.Fatalf("the job: %+v, saved %+v", j.Result.End, sv)
	}
	text := orchestrator.ResultOf(j.Result).String()
	for _, want := range []string{"killed: it ran for 2s, its time limit (shell.jobTimeout)]",
		fmt.Sprintf("the first 524288 bytes and the last 524288 bytes of its %d bytes; %d bytes between them dropped", sv.Written, sv.Dropped)} {
		if !strings.Contains(text, want) {
			t.Errorf("jobs wait prints no %q:\n%s", want, text[max(0, len(text)-600):])
		}
	}
}

// needDocker skips a test when no Docker engine answers (fails it under
// PADDOCK_REQUIRE_INTEGRATION=1).
func needDocker(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	cli, err := docker.Connect(ctx)
	if err == nil {
		cli.Close()
		return
	}
	peer.Missing(t, "no Docker engine: %v", err)
}

// The API end to end on docker sessions: a step that asks, answered from a second client
// over the event stream; an isolated child's changes handed back; a detached job waited on
// and another killed.
func TestDaemonDockerSession(t *testing.T) {
	needDocker(t)
	d := startLibrary(t, "kernelTransport:\n  kind: docker\nshell:\n  rules:\n    - {action: ask, command: touch}\n")
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	ws := t.TempDir()
	os.WriteFile(filepath.Join(ws, "kept.txt"), []byte("parent\n"), 0o644)
	s, err := d.c.Open(ctx, api.OpenRequest{Workspace: ws, BlockingBudget: "2s"})
	if err != nil {
		t.Fatal(err)
	}
	if s.Transport != "docker" {
		t.Fatalf("transport %q", s.Transport)
	}
	second, err := client.New(d.c.Host())
	if err != nil {
		t.Fatal(err)
	}
	defer second.Close()
	st, err := second.Events(ctx, s.ID, api.StreamInteractive)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()

	type ran struct {
		r   api.BashResponse
		err error
	}
	done := make(chan ran, 1)
	go func() {
		r, err := d.c.Bash(ctx, s.ID, api.BashRequest{Script: "cat /proc/1/cgroup >/dev/null; touch made.txt; echo ok"})
		done <- ran{r, err}
	}()
	q := nextKind(t, st, orchestrator.EventQuestion)
	if err := second.Answer(ctx, s.ID, q.Question.ID, api.AnswerRequest{Approve: true}); err != nil {
		t.Fatal(err)
	}
	if r := <-done; r.err != nil || r.r.End.Kind != orchestrator.Finished {
		t.Fatalf("%v %+v", r.err, r.r.Result)
	}
	if _, err := os.Stat(filepath.Join(ws, "made.txt")); err != nil {
		t.Errorf("the approved step's file: %v", err)
	}
	if err := second.Answer(ctx, s.ID, q.Question.ID, api.AnswerRequest{}); !isGone(err) {
		t.Errorf("a late answer: %v", err)
	}

	child, err := d.c.Spawn(ctx, s.ID, api.SpawnRequest{Name: "iso", Workspace: orchestrator.Isolated})
	if err != nil {
		t.Fatal(err)
	}
	if r, err := d.c.Bash(ctx, child.ID, api.BashRequest{Script: "echo child > new.txt; echo changed > kept.txt"}); err != nil || r.End.Kind != orchestrator.Finished {
		t.Fatalf("child: %v %+v", err, r.Result)
	}
	closed, err := d.c.CloseSession(ctx, child.ID)
	if err != nil {
		t.Fatal(err)
	}
	if closed.Handback == nil || len(closed.Handback.Taken) != 2 {
		t.Fatalf("hand-back %+v", closed.Handback)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "new.txt")); string(b) != "child\n" {
		t.Errorf("new.txt after the hand-back: %q", b)
	}

	gate := filepath.Join(ws, "go-on")
	r, err := d.c.Bash(ctx, s.ID, api.BashRequest{Script: "echo start; while [ ! -e go-on ]; do sleep 0.05; done; echo end"})
	if err != nil || r.End.Kind != orchestrator.Detached {
		t.Fatalf("%v %+v", err, r.Result)
	}
	os.WriteFile(gate, nil, 0o644)
	j, err := d.c.Wait(ctx, s.ID, r.End.Job, "")
	if err != nil || j.Result.End.Kind != orchestrator.Finished || !strings.HasSuffix(j.Result.Steps[len(j.Result.Steps)-1].Stdout.Text, "end\n") {
		t.Fatalf("waited: %v %+v", err, j.Result)
	}
	// The killed job's process holds a named pipe's writing end: the test's read of it ends
	// when the process is gone from the sandbox (TERM, then KILL after the kernel's grace).
	held := fifo(t, ws, "held")
	r, err = d.c.Bash(ctx, s.ID, api.BashRequest{Script: "sh -c 'exec sleep 600 > held'"})
	if err != nil || r.End.Kind != orchestrator.Detached {
		t.Fatalf("%v %+v", err, r.Result)
	}
	opened, ended := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(ended)
		f, err := os.Open(held) // waits for the writer
		close(opened)
		if err == nil {
			io.Copy(io.Discard, f) // to the end: every writer gone
			f.Close()
		}
	}()
	select {
	case <-opened: // it runs
	case <-time.After(guard):
		t.Fatal("the job's process did not start")
	}
	j, err = d.c.Kill(ctx, s.ID, r.End.Job)
	if err != nil || j.Result.End.Kind != orchestrator.Killed {
		t.Fatalf("killed: %v %+v", err, j.Result)
	}
	select {
	case <-ended:
	case <-time.After(guard):
		t.Fatal("the killed job's process still holds its pipe")
	}
	if r, err := d.c.Bash(ctx, s.ID, api.BashRequest{Script: "ps -eo args"}); err != nil {
		t.Fatal(err)
	} else if strings.Contains(r.Steps[0].Stdout.Text, "sleep 600") {
		t.Fatalf("the killed job's process is still there:\n%s", orchestrator.ResultOf(r.Result))
	}
}

// isGone reports whether err is a late answer's.
func isGone(err error) bool {
	c, _ := errdefs.Of(err)
	return c == errdefs.Gone
}

// ourContainers lists the containers this process's sessions made (running or not).
func ourContainers(ctx context.Context, t *testing.T) []string {
	cli, err := docker.Connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	list, err := cli.ContainerList(ctx, container.ListOptions{All: true, Filters: filters.NewArgs(
		filters.Arg("label", docker.LabelManaged+"=1"), filters.Arg("label", docker.LabelPID+"="+strconv.Itoa(os.Getpid())))})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, c := range list {
		ids = append(ids, c.ID[:12])
	}
	return ids
}

// Load on the daemon's unix socket with docker sessions, bounded: sessions opened and closed
// (4 at a time), then steps over 20 concurrent sessions; afterwards no goroutine, descriptor
// or container is left over. By default 30 sessions and 2,000 steps, to keep the run short;
// PADDOCK_LOAD_FULL=1: 100 sessions and 10,000 steps (about two minutes on two cores).
func TestLoadDocker(t *testing.T) {
	if testing.Short() {
		t.Skip("load test: skipped with -short")
	}
	needDocker(t)
	d := startLibrary(t, "kernelTransport:\n  kind: docker\n")
	sessions, steps := 30, 2000
	if os.Getenv("PADDOCK_LOAD_FULL") == "1" {
		sessions, steps = 100, 10000
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Second)
	defer cancel()
	ws := t.TempDir()
	// Warm up: the host image, the client's connections.
	s, err := d.c.Open(ctx, api.OpenRequest{Workspace: ws})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.c.CloseSession(ctx, s.ID); err != nil {
		t.Fatal(err)
	}
	d.c.Close()
	baseG, baseFD := runtime.NumGoroutine(), openFDs(t)

	t0 := time.Now()
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(4)
	for range sessions {
		g.Go(func() error {
			s, err := d.c.Open(gctx, api.OpenRequest{Workspace: ws})
			if err != nil {
				return err
			}
			_, err = d.c.CloseSession(gctx, s.ID)
			return err
		})
	}
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d docker sessions opened and closed in %v", sessions, time.Since(t0))

	t0 = time.Now()
	lat, err := dockerSteps(ctx, d.c, ws, 20, steps)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(lat)
	t.Logf("%d steps over 20 docker sessions in %v: p50 %v, p99 %v", steps, time.Since(t0), lat[len(lat)/2], lat[len(lat)*99/100])

	d.c.Close()
	// Nothing announces that the last of them ended: a bounded poll.
	cctx, ccancel := context.WithTimeout(context.Background(), guard)
	defer ccancel()
	var ids []string
	var ng, fd int
	if err := await.Poll(cctx, 20*time.Millisecond, func() bool {
		ids, ng, fd = ourContainers(cctx, t), runtime.NumGoroutine(), openFDs(t)
		return len(ids) == 0 && ng <= baseG && fd <= baseFD
	}); err != nil {
		buf := make([]byte, 1<<20)
		t.Fatalf("leak: containers %v, goroutines %d (was %d), descriptors %d (was %d)\n%s", ids, ng, baseG, fd, baseFD, buf[:runtime.Stack(buf, true)])
	}
}

// dockerSteps runs total one-step calls over n sessions, one client goroutine each.
func dockerSteps(ctx context.Context, c *client.Client, ws string, n, total int) ([]time.Duration, error) {
	ids := make([]string, n)
	for i := range ids {
		s, err := c.Open(ctx, api.OpenRequest{Workspace: ws})
		if err != nil {
			return nil, err
		}
		ids[i] = s.ID
	}
	lat := make([]time.Duration, total)
	g, gctx := errgroup.WithContext(ctx)
	for w := range n {
		g.Go(func() error {
			for i := w; i < total; i += n {
				t0 := time.Now()
				r, err := c.Bash(gctx, ids[w], api.BashRequest{Script: "echo " + strconv.Itoa(i)})
				lat[i] = time.Since(t0)
				if err != nil {
					return err
				}
				if r.End.Kind != orchestrator.Finished || r.Steps[0].Stdout.Text != strconv.Itoa(i)+"\n" {
					return fmt.Errorf("step %d: %s", i, orchestrator.ResultOf(r.Result))
				}
			}
			return nil
		})
	}
	err := g.Wait()
	for _, id := range ids {
		if _, cerr := c.CloseSession(ctx, id); cerr != nil && err == nil {
			err = cerr
		}
	}
	return lat, err
}
