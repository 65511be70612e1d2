package main

import (
	"encoding/json"
	"io"
	"regexp"
	"strings"
	"testing"

	"github.com/paddockhq/paddock/daemon/api"
	"github.com/paddockhq/paddock/internal/prompt"
	"github.com/paddockhq/paddock/orchestrator"
)

// What a daemon sends is printed whatever parts it lacks: a lost job with no result, an
// event with none of the part its kind names. None of it panics.
func FuzzDaemonRecords(f *testing.F) {
	for _, seed := range []string{
		`[{"id":"j1","script":"yes","done":true,"lost":true,"artifact":"/x"}]`,
		`[{"id":"j1","done":true},{"id":"j2","done":false,"script":"a\nb"}]`,
		`[{"id":"s","state":"ended","reason":"gone","jobs":[{"id":"j","done":true}]}]`,
		`{"kind":"output"}`, `{"kind":"job_end"}`, `{"kind":"job_end","job":{"id":"j","done":true}}`,
		`{"kind":"job_end","job":{"id":"j","done":true,"result":{"end":{"kind":"killed"}}}}`,
		`{"kind":"question"}`, `{"kind":"settled"}`, `{"kind":"closed"}`,
		`{"kind":"question","question":{"id":"q","command":"rm\u202e -rf","effects":["write"]}}`,
		`{"steps":null}`, `{}`, `null`, `[null]`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var jobs []api.Job
		if json.Unmarshal(b, &jobs) == nil {
			printJobs(io.Discard, jobs)
			for _, j := range jobs {
				printResult(io.Discard, j.Result)
			}
		}
		var ss []api.Session
		if json.Unmarshal(b, &ss) == nil {
			printSessions(io.Discard, ss)
		}
		var e api.Event
		if json.Unmarshal(b, &e) == nil {
			prompt.Show(e, "s", io.Discard, io.Discard)
			if e.Question != nil {
				prompt.Render(*orchestrator.EventOf(e.Kind, e.Question, nil).Question)
			}
		}
		var r api.BashResponse
		if json.Unmarshal(b, &r) == nil {
			printResult(io.Discard, r.Result)
		}
	})
}

// A lost job is listed as lost, not as a panic.
func TestJobListLost(t *testing.T) {
	var b strings.Builder
	printJobs(&b, []api.Job{{ID: "j1", Script: "yes", Done: true, Lost: true}, {ID: "j2", Done: true}, {ID: "j3"}})
	for _, want := range []string{`(?m)^j1 +lost `, `(?m)^j2 +ended `, `(?m)^j3 +running `} {
		if !regexp.MustCompile(want).MatchString(b.String()) {
			t.Errorf("listing lacks %q:\n%s", want, b.String())
		}
	}
}
