package main

import (
	"encoding/json"
	"testing"

	"github.com/paddockhq/paddock/orchestrator"
)

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
