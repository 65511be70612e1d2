package daemon_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/paddockhq/paddock/client"
	"github.com/paddockhq/paddock/daemon"
	"github.com/paddockhq/paddock/daemon/api"
	"github.com/paddockhq/paddock/errdefs"
	"github.com/paddockhq/paddock/orchestrator"
	"github.com/paddockhq/paddock/orchestrator/output"
)

// nextKind reads a stream until an event of kind arrives.
func nextKind(t *testing.T, st *client.Stream, kind string) api.Event {
	t.Helper()
	for {
		e, err := st.Next()
		if err != nil {
			t.Fatalf("waiting for a %s event: %v", kind, err)
		}
		if e.Kind == kind {
			return e
		}
	}
}

func stdout(r *api.Result) string {
	var b strings.Builder
	for _, s := range r.Steps {
		b.WriteString(s.Stdout.Text)
	}
	return b.String()
}

// An agent's client runs a step that asks; a second client, on the event stream, answers
// it; an isolated child's changes come back with its hand-back report. Local kernels.
func TestAPIQuestionAnsweredFromSecondClient(t *testing.T) {
	d := startDaemon(t, daemonOptions{})
	ctx := context.Background()
	ws := t.TempDir()
	os.WriteFile(filepath.Join(ws, "kept.txt"), []byte("parent\n"), 0o644)

	s, err := d.c.Open(ctx, api.OpenRequest{Workspace: ws})
	if err != nil {
		t.Fatal(err)
	}
	if s.State != api.Open || s.Workspace != ws {
		t.Fatalf("opened %+v", s)
	}

	// A second client: its own connection, attached as the session's interactive client.
	other, err := client.New("unix://" + d.socket)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	st, err := other.Events(sctx, s.ID, api.StreamInteractive)
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
		r, err := d.c.Bash(ctx, s.ID, api.BashRequest{Script: "echo before; touch asked.txt; echo after"})
		done <- ran{r, err}
	}()
	out := nextKind(t, st, api.EventOutput)
	if out.Output.Data != "before\n" {
		t.Errorf("first output %+v", out.Output)
	}
	q := nextKind(t, st, orchestrator.EventQuestion)
	if q.Question.Command != "touch asked.txt" || q.Question.Session != s.ID {
		t.Errorf("question %+v", q.Question)
	}
	if err := other.Answer(ctx, s.ID, q.Question.ID, api.AnswerRequest{Approve: true, Client: "second"}); err != nil {
		t.Fatal(err)
	}
	settled := nextKind(t, st, orchestrator.EventSettled)
	if settled.Settled.ID != q.Question.ID || settled.Settled.Outcome != orchestrator.Approved || settled.Settled.By != "second" {
		t.Errorf("settled %+v", settled.Settled)
	}
	r := <-done
	if r.err != nil {
		t.Fatal(r.err)
	}
	if r.r.End.Kind != orchestrator.Finished || stdout(r.r.Result) != "before\nafter\n" {
		t.Errorf("result:\n%s", orchestrator.ResultOf(r.r.Result))
	}
	if _, err := os.Stat(filepath.Join(ws, "asked.txt")); err != nil {
		t.Errorf("the approved step did not run: %v", err)
	}
	// A late answer is gone.
	err = d.c.Answer(ctx, s.ID, q.Question.ID, api.AnswerRequest{Approve: false})
	if c, code := errdefs.Of(err); c != errdefs.Gone || code != "shell_approval_gone" {
		t.Errorf("late answer: %v, want shell_approval_gone", err)
	}

	// A denial from the stream stops the script there.
	go func() {
		r, err := d.c.Bash(ctx, s.ID, api.BashRequest{Script: "touch denied.txt; echo never"})
		done <- ran{r, err}
	}()
	q = nextKind(t, st, orchestrator.EventQuestion)
	if err := other.Answer(ctx, s.ID, q.Question.ID, api.AnswerRequest{Approve: false}); err != nil {
		t.Fatal(err)
	}
	r = <-done
	if r.err != nil || r.r.End.Kind != orchestrator.Refused || r.r.End.Code != "denied" || len(r.r.Steps) != 0 {
		t.Errorf("denied: %v %+v", r.err, r.r.Result)
	}

	// Files through the API, confined to the workspace.
	if _, err := d.c.Write(ctx, s.ID, api.FSWriteRequest{Path: filepath.Join(ws, "w.txt"), Content: "written\n"}); err != nil {
		t.Fatal(err)
	}
	rd, err := d.c.Read(ctx, s.ID, filepath.Join(ws, "w.txt"))
	if err != nil || rd.Content != "written\n" {
		t.Errorf("read back %+v %v", rd, err)
	}
	var ce interface{ Code() string }
	if _, err := d.c.Read(ctx, s.ID, filepath.Join(ws, "missing")); !errors.As(err, &ce) || ce.Code() != orchestrator.FSNotFound {
		t.Errorf("read of a missing file: %v", err)
	}

	// A file access the auto set does not grant takes the approval route like a step: a
	// secret, asked on the stream, refused by the answer.
	werr := make(chan error, 1)
	go func() {
		_, err := d.c.Write(ctx, s.ID, api.FSWriteRequest{Path: filepath.Join(ws, ".npmrc"), Content: "//registry/:_authToken=x\n"})
		werr <- err
	}()
	asked := make(chan api.Event, 1)
	go func() { asked <- nextKind(t, st, orchestrator.EventQuestion) }()
	select {
	case err := <-werr:
		t.Fatalf("a secret write was not asked: %v", err)
	case q = <-asked:
	}
	if !strings.Contains(q.Question.Command, "fs.write") || !slices.Contains(q.Question.Effects, "secret") {
		t.Errorf("file access question %+v", q.Question)
	}
	if err := other.Answer(ctx, s.ID, q.Question.ID, api.AnswerRequest{Approve: false}); err != nil {
		t.Fatal(err)
	}
	if err := <-werr; !errors.As(err, &ce) || ce.Code() == "" {
		t.Errorf("a refused secret write: %v", err)
	}
	if _, err := os.Stat(filepath.Join(ws, ".npmrc")); err == nil {
		t.Error("the refused write happened")
	}

	// An isolated child: its question reaches the parent's stream with its name; its
	// changes come back when it is collected.
	child, err := d.c.Spawn(ctx, s.ID, api.SpawnRequest{Name: "helper", Workspace: orchestrator.Isolated})
	if err != nil {
		t.Fatal(err)
	}
	if child.Parent != s.ID || child.Mode != orchestrator.Isolated || child.Workspace == ws || child.Clone == nil {
		t.Fatalf("child %+v", child)
	}
	go func() {
		r, err := d.c.Bash(ctx, child.ID, api.BashRequest{Script: "echo child > new.txt; echo changed > kept.txt; touch child-asked.txt"})
		done <- ran{r, err}
	}()
	q = nextKind(t, st, orchestrator.EventQuestion)
	if q.Question.Subagent != "helper" || q.Question.Session != child.ID {
		t.Errorf("child's question %+v", q.Question)
	}
	if err := other.Answer(ctx, s.ID, q.Question.ID, api.AnswerRequest{Approve: true}); err != nil {
		t.Fatal(err)
	}
	if r = <-done; r.err != nil || r.r.End.Kind != orchestrator.Finished {
		t.Fatalf("child's script: %v %+v", r.err, r.r.Result)
	}
	kids, err := d.c.Children(ctx, s.ID)
	if err != nil || len(kids) != 1 || kids[0].ID != child.ID {
		t.Errorf("children %+v %v", kids, err)
	}
	if _, err := os.Stat(filepath.Join(ws, "new.txt")); err == nil {
		t.Error("the child's file reached the parent before the hand-back")
	}
	closed, err := d.c.CloseSession(ctx, child.ID)
	if err != nil {
		t.Fatal(err)
	}
	if closed.Handback == nil || len(closed.Handback.Taken) != 3 || len(closed.Handback.Conflicts) != 0 {
		t.Fatalf("hand-back %+v", closed.Handback)
	}
	for name, want := range map[string]string{"new.txt": "child\n", "kept.txt": "changed\n"} {
		if b, _ := os.ReadFile(filepath.Join(ws, name)); string(b) != want {
			t.Errorf("%s after the hand-back: %q, want %q", name, b, want)
		}
	}
	if kids, _ := d.c.Children(ctx, s.ID); len(kids) != 0 {
		t.Errorf("children after collecting: %+v", kids)
	}

	m, err := d.c.Metrics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	sample := regexp.MustCompile(`^[a-zA-Z_:][a-zA-Z0-9_:]*(\{[a-zA-Z_][a-zA-Z0-9_]*="[^"]*"\})? (\+Inf|-?[0-9.]+(e[+-]?[0-9]+)?)$`)
	for _, line := range strings.Split(strings.TrimSpace(m), "\n") {
		if !strings.HasPrefix(line, "# HELP ") && !strings.HasPrefix(line, "# TYPE ") && !sample.MatchString(line) {
			t.Errorf("not in the Prometheus text format: %q", line)
		}
	}
	for _, want := range []string{
		"paddock_sessions_open 1\n", "paddock_sessions_opened_total 2\n",
		`paddock_steps_total{verdict="ran"} 6`, `paddock_steps_total{verdict="denied"} 1`,
		"paddock_questions_total 4\n", `paddock_answers_total{outcome="approved"} 2`,
		`paddock_answers_total{outcome="denied"} 2`, "paddock_clone_seconds_count 1\n", "paddock_handback_seconds_count 1\n",
	} {
		if !strings.Contains(m, want) {
			t.Errorf("metrics lack %q:\n%s", want, m)
		}
	}

	if _, err := d.c.CloseSession(ctx, s.ID); err != nil {
		t.Fatal(err)
	}
	// The stream ends with the session.
	nextKind(t, st, api.EventClosed)
	if _, err := st.Next(); err != io.EOF {
		t.Errorf("stream after close: %v", err)
	}
	if _, err := d.c.Session(ctx, s.ID); err == nil {
		t.Error("a closed session is still listed")
	}
}

// law: call_blocks_at_most_budget
// A call past its budget answers detached with the output so far and a job id; the job is
// waited on, its end comes on the stream; another is killed with its process groups.
func TestAPIJobsDetachWaitKill(t *testing.T) {
	d := startDaemon(t, daemonOptions{})
	ctx := context.Background()
	ws := t.TempDir()
	s, err := d.c.Open(ctx, api.OpenRequest{Workspace: ws, BlockingBudget: "300ms"})
	if err != nil {
		t.Fatal(err)
	}
	st, err := d.c.Events(ctx, s.ID, api.StreamWatch)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	// The script goes on after the budget only once the file appears: no race with timing.
	gate := filepath.Join(ws, "go-on")
	t0 := time.Now()
	r, err := d.c.Bash(ctx, s.ID, api.BashRequest{Script: "echo start; while [ ! -e go-on ]; do sleep 0.05; done; echo end"})
	if err != nil {
		t.Fatal(err)
	}
	if r.End.Kind != orchestrator.Detached || r.End.Job == "" || time.Since(t0) > 5*time.Second {
		t.Fatalf("result after %v: %+v", time.Since(t0), r.Result)
	}
	if r.Artifact == "" {
		t.Error("a detached call names no artifact")
	}
	jobs, err := d.c.Jobs(ctx, s.ID)
	if err != nil || len(jobs) != 1 || jobs[0].Done {
		t.Fatalf("jobs %+v %v", jobs, err)
	}
	if j, err := d.c.Wait(ctx, s.ID, r.End.Job, "50ms"); err != nil || j.Done {
		t.Errorf("wait with a timeout on a live job: %+v %v", j, err)
	}
	os.WriteFile(gate, nil, 0o644)
	j, err := d.c.Wait(ctx, s.ID, r.End.Job, "")
	if err != nil || !j.Done || j.Result.End.Kind != orchestrator.Finished || stdout(j.Result) != "start\nend\n" {
		t.Fatalf("waited: %+v %v", j, err)
	}
	end := nextKind(t, st, api.EventJobEnd)
	if end.Job.ID != r.End.Job || end.Job.Result.End.Kind != orchestrator.Finished {
		t.Errorf("job end event %+v", end.Job)
	}
	if b, err := os.ReadFile(r.Artifact); err != nil || string(b) != "start\nend\n" {
		t.Errorf("artifact %q %v", b, err)
	}

	// Kill: the job ends at once as killed, and every process it started is gone,
	// grandchildren included.
	mark := "paddock-kill-" + s.ID
	started := fifo(t, ws, "grandchild")
	r, err = d.c.Bash(ctx, s.ID, api.BashRequest{Script: "sh -c 'bash -c \"echo \\$\\$ > grandchild; exec -a " + mark + " sleep 600\" & wait'"})
	if err != nil || r.End.Kind != orchestrator.Detached {
		t.Fatalf("%+v %v", r.Result, err)
	}
	grandchild, err := strconv.Atoi(strings.TrimSpace(hear(t, started))) // it runs
	if err != nil {
		t.Fatalf("the grandchild's pid: %v", err)
	}
	j, err = d.c.Kill(ctx, s.ID, r.End.Job)
	if err != nil || !j.Done || j.Result.End.Kind != orchestrator.Killed {
		t.Fatalf("killed: %+v %v", j, err)
	}
	gone(t, grandchild, "the killed job's grandchild")
	// The kill signals the job's whole group at once, and returns when the job's own process
	// ended: any other process of it is gone once its own end is through. Each is waited for;
	// one that outlived the kill would sleep past the guard.
	for _, p := range pidsNamed(mark) {
		if pid, err := strconv.Atoi(p); err == nil {
			gone(t, pid, "a process of the killed job, named "+mark)
		}
	}
	if j2, _ := d.c.Kill(ctx, s.ID, r.End.Job); j2.Result.End.Kind != orchestrator.Killed {
		t.Errorf("a second kill changed the end: %+v", j2.Result.End)
	}
	end = nextKind(t, st, api.EventJobEnd)
	if end.Job.Result.End.Kind != orchestrator.Killed {
		t.Errorf("job end event %+v", end.Job.Result.End)
	}
	if _, err := d.c.Kill(ctx, s.ID, "nosuchjob"); err == nil {
		t.Error("killing an unknown job")
	}
}

// pidsNamed lists the processes whose command line starts with name.
func pidsNamed(name string) []string {
	var out []string
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && strings.HasPrefix(string(b), name) {
			out = append(out, e.Name())
		}
	}
	return out
}

// A call that prints nothing for the no-output timeout is killed, detached or not; one that
// keeps printing is not.
func TestAPINoOutputTimeout(t *testing.T) {
	d := startDaemon(t, daemonOptions{})
	ctx := context.Background()
	ws := t.TempDir()
	// The talking job prints every 50ms; the bound is far past that, so that a loaded
	// machine's pauses do not make it quiet.
	s, err := d.c.Open(ctx, api.OpenRequest{Workspace: ws, BlockingBudget: "100ms", NoOutputTimeout: "3s"})
	if err != nil {
		t.Fatal(err)
	}
	quiet, err := d.c.Bash(ctx, s.ID, api.BashRequest{Script: "sleep 60"})
	if err != nil || quiet.End.Kind != orchestrator.Detached {
		t.Fatalf("%+v %v", quiet.Result, err)
	}
	talk, err := d.c.Bash(ctx, s.ID, api.BashRequest{Script: "for i in $(seq 1 80); do echo $i; sleep 0.05; done"})
	if err != nil || talk.End.Kind != orchestrator.Detached {
		t.Fatalf("%+v %v", talk.Result, err)
	}
	j, err := d.c.Wait(ctx, s.ID, quiet.End.Job, "30s")
	if err != nil || !j.Done || j.Result.End.Kind != orchestrator.Killed {
		t.Fatalf("the quiet job: %+v %v", j, err)
	}
	j, err = d.c.Wait(ctx, s.ID, talk.End.Job, "30s")
	if err != nil || !j.Done || j.Result.End.Kind != orchestrator.Finished {
		t.Fatalf("the talking job: %+v %v", j.Result, err)
	}
	// The timeout counts from a call's first moment: a blocking call that goes quiet is
	// killed before its budget passes.
	t0 := time.Now()
	r, err := d.c.Bash(ctx, s.ID, api.BashRequest{Script: "echo one; sleep 60", Budget: "60s"})
	if err != nil || r.End.Kind != orchestrator.Killed || stdout(r.Result) != "one\n" || time.Since(t0) > 30*time.Second {
		t.Fatalf("a quiet blocking call after %v: %v %+v", time.Since(t0), err, r.Result)
	}
}

// law: job_no_silent_loss
// A job's output is bounded by the truncation setting, kept + dropped = every byte, and the
// artifact file (0600) holds the whole output.
func TestAPIJobOutputBounded(t *testing.T) {
	d := startDaemon(t, daemonOptions{limit: output.Limit{Bytes: 1000, Lines: 50, Mode: output.Tail}})
	ctx := context.Background()
	s, err := d.c.Open(ctx, api.OpenRequest{Workspace: t.TempDir(), BlockingBudget: "50ms"})
	if err != nil {
		t.Fatal(err)
	}
	r, err := d.c.Bash(ctx, s.ID, api.BashRequest{Script: "sleep 0.2; seq 1 20000"})
	if err != nil || r.End.Kind != orchestrator.Detached {
		t.Fatalf("%+v %v", r.Result, err)
	}
	j, err := d.c.Wait(ctx, s.ID, r.End.Job, "")
	if err != nil {
		t.Fatal(err)
	}
	last := j.Result.Steps[len(j.Result.Steps)-1].Stdout
	whole, err := os.ReadFile(j.Artifact)
	if err != nil {
		t.Fatal(err)
	}
	if int64(len(last.Text))+last.DroppedBytes != last.TotalBytes || last.TotalBytes != int64(len(whole)) || len(last.Text) > 1000 {
		t.Errorf("kept %d + dropped %d, total %d, artifact %d", len(last.Text), last.DroppedBytes, last.TotalBytes, len(whole))
	}
	if !strings.HasSuffix(string(whole), "19999\n20000\n") || !strings.HasPrefix(string(whole), "1\n2\n") {
		t.Errorf("artifact is not the whole output")
	}
	if fi, _ := os.Stat(j.Artifact); fi.Mode().Perm() != 0o600 {
		t.Errorf("artifact mode %v", fi.Mode())
	}
}

// A detached job running yes, in a session whose artifacts are capped at 1 MiB and whose
// calls have a time limit: the limit kills it, saying so; its artifact holds the cap, the
// output's first and last half-MiB, and its result (as the job and the session's listing
// report it, and its text) counts what the file dropped.
//
// law: job_output_bounded
// law: job_no_silent_loss
func TestAPIYesJobCapped(t *testing.T) {
	const capBytes = 1 << 20
	d := startDaemon(t, daemonOptions{more: func(c *orchestrator.Config) {
		c.ArtifactBytes, c.JobTimeout = capBytes, 2*time.Second
	}})
	ctx := context.Background()
	s, err := d.c.Open(ctx, api.OpenRequest{Workspace: t.TempDir(), BlockingBudget: "100ms"})
	if err != nil {
		t.Fatal(err)
	}
	r, err := d.c.Bash(ctx, s.ID, api.BashRequest{Script: "yes"})
	if err != nil || r.End.Kind != orchestrator.Detached {
		t.Fatalf("%+v %v", r.Result, err)
	}
	j, err := d.c.Wait(ctx, s.ID, r.End.Job, "")
	if err != nil {
		t.Fatal(err)
	}
	res := j.Result
	if res.End.Kind != orchestrator.Killed || res.End.Code != orchestrator.CodeTimeout {
		t.Fatalf("the end: %+v", res.End)
	}
	b, err := os.ReadFile(j.Artifact)
	if err != nil {
		t.Fatal(err)
	}
	sv := res.Saved
	if len(b) != capBytes || sv == nil || sv.Kept != capBytes || sv.Written != res.Steps[0].Stdout.TotalBytes ||
		sv.Dropped != sv.Written-capBytes || sv.Dropped <= 0 {
		t.Fatalf("the artifact: %d bytes; the report %+v", len(b), sv)
	}
	if !strings.Contains(orchestrator.ResultOf(res).String(), fmt.Sprintf("%d bytes between them dropped", sv.Dropped)) {
		t.Errorf("the result's text does not count what was dropped:\n%s", orchestrator.ResultOf(res))
	}
	jobs, err := d.c.Jobs(ctx, s.ID)
	if err != nil || len(jobs) != 1 || jobs[0].Result == nil || jobs[0].Result.Saved == nil || *jobs[0].Result.Saved != *sv ||
		jobs[0].Saved == nil || *jobs[0].Saved != *sv {
		t.Errorf("the session's jobs: %+v %v", jobs, err)
	}
}

// The OpenAPI document names exactly the routes the daemon serves, and is what it serves.
func TestOpenAPIMatchesRoutes(t *testing.T) {
	var doc struct {
		OpenAPI string                                `json:"openapi"`
		Paths   map[string]map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(daemon.OpenAPI, &doc); err != nil {
		t.Fatal(err)
	}
	documented := map[string]bool{}
	for p, ops := range doc.Paths {
		for m := range ops {
			documented[strings.ToUpper(m)+" "+p] = true
		}
	}
	served := map[string]bool{}
	for _, r := range api.Routes {
		served[r.Method+" "+r.Pattern] = true
		if !documented[r.Method+" "+r.Pattern] {
			t.Errorf("served, not documented: %s %s", r.Method, r.Pattern)
		}
	}
	for k := range documented {
		if !served[k] {
			t.Errorf("documented, not served: %s", k)
		}
	}
	d := startDaemon(t, daemonOptions{})
	// Every route answers something other than the catch-all's unknown route.
	for _, r := range api.Routes {
		if r.Pattern == "/v1/sessions/{id}/events" {
			continue // a stream; the other tests read it
		}
		path := strings.NewReplacer("{id}", "nosuch", "{job}", "nosuch", "{question}", "nosuch", "{child}", "nosuch").Replace(r.Pattern)
		code, body := rawRequest(t, d.socket, r.Method, path)
		if code == 404 && strings.Contains(body, "no route") {
			t.Errorf("%s %s: not routed", r.Method, r.Pattern)
		}
		if r.Pattern == "/openapi.json" && body != string(daemon.OpenAPI) {
			t.Error("/openapi.json is not the committed document")
		}
	}
}

// law: cwd_none_refused
// law: cwd_gone_refused
// law: cwd_file_refused
// law: cwd_dir_opens
// law: cwd_is_explicit
// A session opens only in the working directory its request names: none, a gone one or a
// file is refused with its code; nothing substitutes the daemon's own directory.
func TestAPIOpenNeedsWorkingDirectory(t *testing.T) {
	d := startDaemon(t, daemonOptions{})
	ctx := context.Background()
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	os.WriteFile(file, nil, 0o600)
	for _, tc := range []struct {
		ws, code string
	}{
		{"", "cwd_none"},
		{filepath.Join(dir, "gone"), "cwd_gone"},
		{file, "cwd_not_dir"},
		{"relative", "bad_request"}, // never resolved against the daemon's own directory
	} {
		_, err := d.c.Open(ctx, api.OpenRequest{Workspace: tc.ws})
		var ce *client.Error
		if !errors.As(err, &ce) || ce.Code() != tc.code || ce.Status != 400 {
			t.Errorf("workspace %q: %v, want %s", tc.ws, err, tc.code)
		}
	}
	if list, _ := d.c.Sessions(ctx); len(list) != 0 {
		t.Errorf("refused opens left sessions: %+v", list)
	}
	s, err := d.c.Open(ctx, api.OpenRequest{Workspace: dir})
	if err != nil {
		t.Fatal(err)
	}
	r, err := d.c.Bash(ctx, s.ID, api.BashRequest{Script: "pwd"})
	if err != nil || r.Steps[0].Stdout.Text != dir+"\n" {
		t.Errorf("pwd: %v %+v", err, r.Result)
	}
}

// While a question waits, the job's step waits with it: the no-output timeout does not kill
// a job whose step is asking; once answered, the job goes on to its end.
func TestAPIJobWaitsForItsQuestion(t *testing.T) {
	d := startDaemon(t, daemonOptions{})
	ctx := context.Background()
	ws := t.TempDir()
	s, err := d.c.Open(ctx, api.OpenRequest{Workspace: ws, BlockingBudget: "100ms", NoOutputTimeout: "300ms"})
	if err != nil {
		t.Fatal(err)
	}
	st, err := d.c.Events(ctx, s.ID, api.StreamInteractive)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	r, err := d.c.Bash(ctx, s.ID, api.BashRequest{Script: "touch asked.txt; echo done"})
	if err != nil || r.End.Kind != orchestrator.Detached {
		t.Fatalf("%v %+v", err, r.Result)
	}
	q := nextKind(t, st, orchestrator.EventQuestion)
	// Well past the no-output timeout, the job is still there, waiting.
	j, err := d.c.Wait(ctx, s.ID, r.End.Job, "1s")
	if err != nil || j.Done {
		t.Fatalf("the asking job ended: %v %+v", err, j.Result)
	}
	if err := d.c.Answer(ctx, s.ID, q.Question.ID, api.AnswerRequest{Approve: true}); err != nil {
		t.Fatal(err)
	}
	j, err = d.c.Wait(ctx, s.ID, r.End.Job, "30s")
	if err != nil || !j.Done || j.Result.End.Kind != orchestrator.Finished || stdout(j.Result) != "done\n" {
		t.Fatalf("after the answer: %v %+v", err, j.Result)
	}

	// A child's job whose question went up to the parent's stream waits the same way.
	child, err := d.c.Spawn(ctx, s.ID, api.SpawnRequest{Name: "kid"})
	if err != nil {
		t.Fatal(err)
	}
	r, err = d.c.Bash(ctx, child.ID, api.BashRequest{Script: "touch kid.txt; echo kid"})
	if err != nil || r.End.Kind != orchestrator.Detached {
		t.Fatalf("%v %+v", err, r.Result)
	}
	q = nextKind(t, st, orchestrator.EventQuestion)
	if q.Question.Session != child.ID {
		t.Fatalf("question %+v", q.Question)
	}
	if j, err := d.c.Wait(ctx, child.ID, r.End.Job, "1s"); err != nil || j.Done {
		t.Fatalf("the child's asking job ended: %v %+v", err, j.Result)
	}
	if err := d.c.Answer(ctx, s.ID, q.Question.ID, api.AnswerRequest{Approve: true}); err != nil {
		t.Fatal(err)
	}
	j, err = d.c.Wait(ctx, child.ID, r.End.Job, "30s")
	if err != nil || !j.Done || j.Result.End.Kind != orchestrator.Finished || stdout(j.Result) != "kid\n" {
		t.Fatalf("the child's job after the answer: %v %+v", err, j.Result)
	}
}

// The document's schemas name exactly the JSON fields of the API's types.
func TestOpenAPISchemasMatchTypes(t *testing.T) {
	var doc struct {
		Components struct {
			Schemas map[string]struct {
				Properties map[string]json.RawMessage `json:"properties"`
			} `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(daemon.OpenAPI, &doc); err != nil {
		t.Fatal(err)
	}
	for name, v := range map[string]any{
		"OpenRequest": api.OpenRequest{}, "Session": api.Session{}, "BashRequest": api.BashRequest{},
		"Job": api.Job{}, "SpawnRequest": api.SpawnRequest{}, "AnswerRequest": api.AnswerRequest{},
		"Event": api.Event{}, "Connection": api.Connection{}, "Error": api.Error{}, "Health": api.Health{}, "Setting": api.Setting{}, "Settings": api.Settings{},
		"Result": api.Result{}, "StepResult": api.StepResult{}, "End": api.End{},
		"ArtifactReport": api.ArtifactReport{},
		"Question":       api.Question{}, "Settlement": api.Settlement{},
		"Collected": api.Collected{}, "SpawnedChild": api.SpawnedChild{},
		"FSReadRequest": api.FSReadRequest{}, "FSWriteRequest": api.FSWriteRequest{}, "FSReply": api.FSReply{},
		"FSPathRequest": api.FSPathRequest{}, "FSEntry": api.FSEntry{}, "FSListReply": api.FSListReply{}, "FSGlobRequest": api.FSGlobRequest{},
		"FSGlobReply": api.FSGlobReply{}, "FSGrepRequest": api.FSGrepRequest{}, "FSGrepLine": api.FSGrepLine{}, "FSGrepCount": api.FSGrepCount{},
		"FSGrepReply": api.FSGrepReply{}, "FSEdit": api.FSEdit{}, "FSEditRequest": api.FSEditRequest{}, "FSEditReply": api.FSEditReply{},
	} {
		schema, ok := doc.Components.Schemas[name]
		if !ok {
			t.Errorf("no schema %s", name)
			continue
		}
		fields := map[string]bool{}
		rt := reflect.TypeOf(v)
		for i := range rt.NumField() {
			tag, _, _ := strings.Cut(rt.Field(i).Tag.Get("json"), ",")
			if tag != "" && tag != "-" {
				fields[tag] = true
			}
		}
		for f := range fields {
			if _, ok := schema.Properties[f]; !ok {
				t.Errorf("%s: field %s is not in the document", name, f)
			}
		}
		for p := range schema.Properties {
			if !fields[p] {
				t.Errorf("%s: the document's %s is no field", name, p)
			}
		}
	}
}

// A child started with a script runs as a job; the session lists it; collecting it waits
// for its end, closes it and hands its isolated workspace back, once.
func TestAPISpawnWithScriptCollect(t *testing.T) {
	d := startDaemon(t, daemonOptions{})
	ctx := context.Background()
	ws := t.TempDir()
	s, err := d.c.Open(ctx, api.OpenRequest{Workspace: ws})
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(ws, "go-on"), nil, 0o644)
	child, err := d.c.Spawn(ctx, s.ID, api.SpawnRequest{Name: "worker", Workspace: orchestrator.Isolated,
		Script: "while [ ! -e release ]; do sleep 0.05; done; echo made > made.txt; echo worked"})
	if err != nil {
		t.Fatal(err)
	}
	info, err := d.c.Session(ctx, s.ID)
	if err != nil || len(info.Spawned) != 1 || info.Spawned[0].ID != child.ID || info.Spawned[0].Name != "worker" || info.Spawned[0].Done {
		t.Fatalf("spawned %+v %v", info.Spawned, err)
	}
	rep, err := d.c.Collect(ctx, s.ID, child.ID, "100ms")
	if err != nil || rep.Done {
		t.Fatalf("a collect that times out: %+v %v", rep, err)
	}
	// The child works in its own copy: release it there.
	var copyDir string
	filepath.WalkDir(d.state, func(p string, e fs.DirEntry, err error) error {
		if err == nil && e.Name() == "go-on" && strings.Contains(p, "copy") {
			copyDir = filepath.Dir(p)
		}
		return nil
	})
	if copyDir == "" {
		t.Fatal("no copy of the workspace")
	}
	os.WriteFile(filepath.Join(copyDir, "release"), nil, 0o644)
	rep, err = d.c.Collect(ctx, s.ID, child.ID, "")
	if err != nil || !rep.Done || rep.Result == nil || stdout(rep.Result) != "worked\n" || rep.Handback == nil {
		t.Fatalf("collected %+v %v", rep, err)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "made.txt")); string(b) != "made\n" {
		t.Errorf("made.txt after the hand-back: %q", b)
	}
	again, err := d.c.Collect(ctx, s.ID, child.ID, "")
	if err != nil || again.Child != rep.Child || !again.Done {
		t.Errorf("collected again: %+v %v", again, err)
	}
	if _, err := d.c.Collect(ctx, s.ID, "nosuch", ""); err == nil {
		t.Error("collecting an unknown child")
	}
}
