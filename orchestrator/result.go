package orchestrator

import (
	"fmt"
	"strings"

	"github.com/paddockhq/paddock/orchestrator/output"
	"github.com/paddockhq/paddock/policy"
)

// How a script ended.
const (
	Finished = "finished" // every step it reached ran; the status is the last one's
	Exited   = "exited"   // exit ended it
	Refused  = "refused"  // a step was refused; it and the steps after it did not run
	Detached = "detached" // the call's budget passed; the script goes on as job Job
	Killed   = "killed"   // the job was killed
	Failed   = "failed"   // the script could not go on (the kernel ended, a fault)
)

// Result is what a call of the bash tool did.
type Result struct {
	Grammar string       `json:"grammar"` // steps or exec
	Steps   []StepResult `json:"steps"`   // every step that ran, in order
	End     End          `json:"end"`
	// Saved, for a job whose output went to a file (its artifact), says what the file holds
	// of it.
	Saved *ArtifactReport `json:"saved,omitempty"`
}

// StepResult is one step that ran.
type StepResult struct {
	Index   int             `json:"index"`
	Command string          `json:"command"`
	Effects policy.Effects  `json:"effects,omitempty"`
	Status  int             `json:"status"`
	Signal  string          `json:"signal,omitempty"`
	Stdout  output.Snapshot `json:"stdout"`
	Stderr  output.Snapshot `json:"stderr"`
	Running bool            `json:"running,omitempty"` // a detached result's step still running
}

// End is how a script ended.
type End struct {
	Kind    string         `json:"kind"`   // finished, exited, refused
	Status  int            `json:"status"` // the script's exit status
	Step    int            `json:"step"`   // refused: the refused step's index
	Command string         `json:"command,omitempty"`
	Code    string         `json:"code,omitempty"` // refused: denied, unanswered, gateway_refused, …
	Job     string         `json:"job,omitempty"`  // detached: the job going on
	Message string         `json:"message,omitempty"`
	Effects policy.Effects `json:"effects,omitempty"`
}

// String renders the result as the agent reads it: each step's command, output and status,
// then how the script ended. It is the one renderer of a result.
func (r *Result) String() string {
	var b strings.Builder
	for _, s := range r.Steps {
		fmt.Fprintf(&b, "$ %s\n", s.Command)
		for _, o := range []output.Snapshot{s.Stdout, s.Stderr} {
			if o.Notice != "" {
				fmt.Fprintf(&b, "%s\n", o.Notice)
			}
			b.WriteString(o.Text)
			if o.Text != "" && !strings.HasSuffix(o.Text, "\n") {
				b.WriteByte('\n')
			}
		}
		if s.Signal != "" {
			fmt.Fprintf(&b, "[killed by SIG%s]\n", s.Signal)
		} else if s.Status != 0 {
			fmt.Fprintf(&b, "[exit status %d]\n", s.Status)
		}
	}
	if a := r.Saved.String(); a != "" {
		b.WriteString(a)
		b.WriteByte('\n')
	}
	b.WriteString(r.End.String())
	b.WriteByte('\n')
	return b.String()
}

// String says how the script ended, in one line.
func (e End) String() string {
	switch e.Kind {
	case Detached:
		return fmt.Sprintf("[detached: still running as job %s]", e.Job)
	case Killed:
		what := "job " + e.Job
		if e.Job == "" {
			what = "the script"
		}
		if e.Message != "" {
			return fmt.Sprintf("[%s killed: %s]", what, e.Message)
		}
		return fmt.Sprintf("[%s killed]", what)
	case Failed:
		return fmt.Sprintf("[failed: %s]", e.Message)
	case Exited:
		return fmt.Sprintf("[exited with status %d]", e.Status)
	case Refused:
		return "[" + RefusalText(fmt.Sprintf("step %d", e.Step+1), e.Command, e.Code, e.Message) + fmt.Sprintf("; step %d and the steps after it did not run]", e.Step+1)
	}
	return fmt.Sprintf("[finished with status %d]", e.Status)
}

// RefusalText is what the model is told of a step or file access that did not run: what,
// why (the code), and what to do next. Every refusal the model reads is written here.
func RefusalText(what, command, code, message string) string {
	s := fmt.Sprintf("refused %s (%s): %s", what, command, code)
	if message == "" {
		message = refusalGuidance(code)
	}
	if message != "" {
		s += ": " + message
	}
	return s
}
