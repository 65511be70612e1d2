package orchestrator

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/paddockhq/paddock/orchestrator/output"
)

// law: call_blocks_at_most_budget, job_ends_once, job_end_is_final
func TestJobDetachesThenEnds(t *testing.T) {
	dir := t.TempDir()
	s := openLocal(t, dir, Config{})
	ctx := context.Background()
	// The step after the budget waits for a file the test makes once the call has
	// returned, so the call cannot have waited for the script's end. On a loaded machine the
	// budget can pass before the first step's output arrives: the budget grows until the
	// output came first (a detached result that never carries it fails at the last).
	var res *Result
	var gate string
	for budget := 100 * time.Millisecond; ; budget *= 4 {
		gate = fmt.Sprintf("go%d", budget.Milliseconds())
		r, err := s.Run(ctx, Call{Script: "echo start; while [ ! -e " + gate + " ]; do sleep 0.01; done; echo end", Budget: budget})
		if err != nil {
			t.Fatal(err)
		}
		if r.End.Kind != Detached || r.End.Job == "" {
			t.Fatalf("end %+v, want detached", r.End)
		}
		if len(r.Steps) > 0 && r.Steps[0].Stdout.Text == "start\n" {
			res = r
			break
		}
		if budget > 20*time.Second {
			t.Fatalf("the detached result lacks the output so far: %s", r)
		}
		os.WriteFile(filepath.Join(dir, gate), nil, 0o600) // that job ends; the next waits for its own file
	}
	os.WriteFile(filepath.Join(dir, gate), nil, 0o600)
	j, err := s.Job(res.End.Job)
	if err != nil {
		t.Fatal(err)
	}
	final, err := j.Wait(ctx)
	if err != nil || final.End.Kind != Exited && final.End.Kind != Finished {
		t.Fatalf("job end %v %+v", err, final)
	}
	if !strings.Contains(final.String(), "end\n") {
		t.Fatalf("final result: %s", final)
	}
	// Ended: the result no longer changes, and a kill changes nothing.
	j.Kill()
	if again := j.Result(); again != final || again.End.Kind == Killed {
		t.Fatalf("the end changed: %+v", again.End)
	}
}

// law: call_settles_with_job
func TestCallSettlesWithItsJob(t *testing.T) {
	s := openLocal(t, t.TempDir(), Config{Budget: 30 * time.Second})
	res, err := s.Bash(context.Background(), "echo quick")
	if err != nil || res.End.Kind != Finished || res.Steps[0].Stdout.Text != "quick\n" {
		t.Fatalf("%v %s", err, res)
	}
	js := s.Jobs()
	if len(js) != 1 {
		t.Fatalf("%d jobs", len(js))
	}
	select {
	case <-js[0].Done():
	default:
		t.Fatal("the call returned before its job ended")
	}
}

// law: job_kill_ends_now
func TestJobKill(t *testing.T) {
	dir := t.TempDir()
	if err := syscall.Mkfifo(filepath.Join(dir, "pid"), 0o600); err != nil {
		t.Fatal(err)
	}
	s := openLocal(t, dir, Config{})
	ctx := context.Background()
	res, err := s.Run(ctx, Call{Script: "echo a; sh -c 'echo $$ > pid; sleep 0.05; sleep 300 & sleep 300'; echo b", Budget: 200 * time.Millisecond})
	if err != nil || res.End.Kind != Detached {
		t.Fatalf("%v %+v", err, res)
	}
	j, _ := s.Job(res.End.Job)
	// Killed once its processes run (the budget may pass before they start on a busy
	// machine): the pid comes through a FIFO, whose read waits for the writer.
	pidc := make(chan []byte, 1)
	go func() {
		b, _ := os.ReadFile(filepath.Join(dir, "pid"))
		pidc <- b
	}()
	var b []byte
	select {
	case b = <-pidc:
	case <-time.After(guard):
		t.Fatal("the job's processes did not start")
	}
	j.Kill()
	select {
	case <-j.Done():
	default:
		t.Fatal("a killed job did not end at once")
	}
	got := j.Result()
	if got.End.Kind != Killed || !strings.Contains(got.String(), "a\n") || strings.Contains(got.String(), "b\n") {
		t.Fatalf("killed result: %s", got)
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	waitGone(t, pid)
	// The script's own end, coming after the kill, changed nothing.
	s.wg.Wait()
	if j.Result().End.Kind != Killed {
		t.Fatalf("end after the kill: %+v", j.Result().End)
	}
}

// law: job_no_silent_loss
func TestJobArtifactKeepsEverything(t *testing.T) {
	dir := t.TempDir()
	s := openLocal(t, dir, Config{Limit: output.Limit{Bytes: 1000, Lines: 10}})
	art := filepath.Join(t.TempDir(), "job.out")
	res, err := s.Run(context.Background(), Call{Script: "seq 1 100000", Artifact: art})
	if err != nil {
		t.Fatal(err)
	}
	o := res.Steps[0].Stdout
	b, err := os.ReadFile(art)
	if err != nil {
		t.Fatal(err)
	}
	if int64(len(b)) != o.TotalBytes || int64(len(o.Text))+o.DroppedBytes != o.TotalBytes || !strings.HasSuffix(string(b), o.Text) {
		t.Fatalf("artifact %d bytes; window %d kept, %d dropped of %d", len(b), len(o.Text), o.DroppedBytes, o.TotalBytes)
	}
	if fi, _ := os.Stat(art); fi.Mode().Perm() != 0o600 {
		t.Fatalf("artifact mode %v", fi.Mode())
	}
}
