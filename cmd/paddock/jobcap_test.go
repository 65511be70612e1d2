package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/paddockhq/paddock/daemon/api"
	"github.com/paddockhq/paddock/orchestrator"
)

// The daemon's sessions take output.artifactBytes and shell.jobTimeout from the global
// settings: a detached yes is killed at its time limit, its artifact at the 1 MiB cap, and
// what jobs wait prints says how it was killed and what the file dropped.
//
// law: job_output_bounded
// law: job_no_silent_loss
func TestJobCapAndTimeoutSettings(t *testing.T) {
	c := serveTest(t, "kernelTransport: {kind: local}\noutput: {artifactBytes: 1048576}\nshell: {jobTimeout: 2s}\n")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	s, err := c.Open(ctx, api.OpenRequest{Workspace: t.TempDir(), BlockingBudget: "100ms"})
	if err != nil {
		t.Fatal(err)
	}
	r, err := c.Bash(ctx, s.ID, api.BashRequest{Script: "yes"})
	if err != nil || r.End.Kind != orchestrator.Detached {
		t.Fatalf("%v %+v", err, r.Result)
	}
	j, err := c.Wait(ctx, s.ID, r.End.Job, "")
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
	text := resultText(j.Result)
	for _, want := range []string{"killed: it ran for 2s, its time limit (shell.jobTimeout)]",
		fmt.Sprintf("the first 524288 bytes and the last 524288 bytes of its %d bytes; %d bytes between them dropped", sv.Written, sv.Dropped)} {
		if !strings.Contains(text, want) {
			t.Errorf("jobs wait prints no %q:\n%s", want, text[max(0, len(text)-600):])
		}
	}
}

// paddock run without a daemon keeps shell.jobTimeout too (--job-timeout): a script past it
// is killed, the run says so and exits as a killed step does.
func TestRunJobTimeout(t *testing.T) {
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	dir := t.TempDir()
	out, _, code := paddock(t, dir, "run", "--transport", "local", "--job-timeout", "500ms", "--json", "--", "echo start; sleep 60")
	var res orchestrator.Result
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if code != 137 || res.End.Kind != orchestrator.Killed || res.End.Code != orchestrator.CodeTimeout || res.Steps[0].Stdout.Text != "start\n" {
		t.Fatalf("exit %d, %+v", code, res)
	}
}
