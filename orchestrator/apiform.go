package orchestrator

import (
	"github.com/paddockhq/paddock/daemon/api"
	"github.com/paddockhq/paddock/orchestrator/output"
	"github.com/paddockhq/paddock/policy"
)

// The API's forms of the orchestrator's records (package api owns them, so that the Go
// client does not link the engine), and back: the same fields, the same JSON.

// API is the result in the API's form; nil for nil.
func (r *Result) API() *api.Result {
	if r == nil {
		return nil
	}
	out := &api.Result{Grammar: r.Grammar, End: r.End.API(), Saved: r.Saved.API()}
	if r.Steps != nil {
		out.Steps = make([]api.StepResult, len(r.Steps))
	}
	for i, s := range r.Steps {
		out.Steps[i] = api.StepResult{Index: s.Index, Command: s.Command, Effects: names(s.Effects), Status: s.Status,
			Signal: s.Signal, Stdout: api.Snapshot(s.Stdout), Stderr: api.Snapshot(s.Stderr), Running: s.Running}
	}
	return out
}

// API is the end in the API's form.
func (e End) API() api.End {
	return api.End{Kind: e.Kind, Status: e.Status, Step: e.Step, Command: e.Command, Code: e.Code, Job: e.Job,
		Message: e.Message, Effects: names(e.Effects)}
}

// ResultOf is a result the API carried, as the orchestrator's (to render it as the agent
// reads it); an effect name it does not know is left out. nil for nil.
func ResultOf(r *api.Result) *Result {
	if r == nil {
		return nil
	}
	out := &Result{Grammar: r.Grammar, End: EndOf(r.End), Saved: ArtifactReportOf(r.Saved)}
	if r.Steps != nil {
		out.Steps = make([]StepResult, len(r.Steps))
	}
	for i, s := range r.Steps {
		out.Steps[i] = StepResult{Index: s.Index, Command: s.Command, Effects: effectsOf(s.Effects), Status: s.Status,
			Signal: s.Signal, Stdout: output.Snapshot(s.Stdout), Stderr: output.Snapshot(s.Stderr), Running: s.Running}
	}
	return out
}

// EndOf is an end the API carried, as the orchestrator's.
func EndOf(e api.End) End {
	return End{Kind: e.Kind, Status: e.Status, Step: e.Step, Command: e.Command, Code: e.Code, Job: e.Job,
		Message: e.Message, Effects: effectsOf(e.Effects)}
}

// API is the report in the API's form; nil for nil.
func (a *ArtifactReport) API() *api.ArtifactReport {
	if a == nil {
		return nil
	}
	r := api.ArtifactReport(*a)
	return &r
}

// ArtifactReportOf is a report the API carried, as the orchestrator's; nil for nil.
func ArtifactReportOf(a *api.ArtifactReport) *ArtifactReport {
	if a == nil {
		return nil
	}
	r := ArtifactReport(*a)
	return &r
}

// API is the question in the API's form.
func (q *Question) API() *api.Question {
	if q == nil {
		return nil
	}
	return &api.Question{ID: q.ID, Session: q.Session, Subagent: q.Subagent, Step: q.Step, Command: q.Command, Connect: q.Connect,
		Effects: q.Effects.Strings()}
}

// API is the settlement in the API's form.
func (s *Settlement) API() *api.Settlement {
	if s == nil {
		return nil
	}
	a := api.Settlement(*s)
	return &a
}

// SpawnedAPI are spawned children in the API's form.
func SpawnedAPI(cs []SpawnedChild) []api.SpawnedChild {
	if cs == nil {
		return nil
	}
	out := make([]api.SpawnedChild, len(cs))
	for i, c := range cs {
		out[i] = api.SpawnedChild(c)
	}
	return out
}

// names are the effects' names, nil for none (an empty set is left out, as its JSON is).
func names(e policy.Effects) []string {
	if e == 0 {
		return nil
	}
	return e.Strings()
}

func effectsOf(names []string) policy.Effects {
	var e policy.Effects
	for _, n := range names {
		if x, ok := policy.ParseEffect(n); ok {
			e |= x
		}
	}
	return e
}

// API is the collection in the API's form.
func (c Collected) API() api.Collected {
	return api.Collected{Child: c.Child, Name: c.Name, Done: c.Done, Result: c.Result.API(), Handback: c.Handback.API(), Error: c.Error}
}

// EventOf is an event of the API's stream, a question's or a settlement's, as the
// orchestrator's.
func EventOf(kind string, q *api.Question, s *api.Settlement) Event {
	e := Event{Kind: kind}
	if q != nil {
		e.Question = &Question{ID: q.ID, Session: q.Session, Subagent: q.Subagent, Step: q.Step, Command: q.Command, Effects: effectsOf(q.Effects), Connect: q.Connect}
	}
	if s != nil {
		st := Settlement(*s)
		e.Settled = &st
	}
	return e
}
