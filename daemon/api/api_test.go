package api

import "testing"

// A job's state is running until it is done, then lost, or its end's kind, or ended when no
// result was recorded.
func TestJobState(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		job  Job
		want string
	}{
		{Job{}, "running"},
		{Job{Lost: true}, "running"},
		{Job{Done: true, Lost: true, Result: &Result{End: End{Kind: "killed"}}}, "lost"},
		{Job{Done: true}, "ended"},
		{Job{Done: true, Result: &Result{End: End{Kind: "finished"}}}, "finished"},
	} {
		if got := c.job.State(); got != c.want {
			t.Errorf("%+v: %q, want %q", c.job, got, c.want)
		}
	}
}
