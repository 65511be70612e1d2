package workspace

import "github.com/paddockhq/paddock/daemon/api"

// The API's forms of a hand-back's and a clone's reports (package api owns them, so that
// the Go client does not link the engine): the same fields, the same JSON.

// API is the report in the API's form; nil for nil.
func (r *Report) API() *api.Report {
	if r == nil {
		return nil
	}
	out := &api.Report{Parent: r.Parent, Dir: r.Dir, Counts: api.Counts(r.Counts)}
	if r.Taken != nil {
		out.Taken = make([]api.Change, len(r.Taken))
		for i, c := range r.Taken {
			out.Taken[i] = api.Change(c)
		}
	}
	if r.Merged != nil {
		out.Merged = make([]api.Change, len(r.Merged))
		for i, c := range r.Merged {
			out.Merged[i] = api.Change(c)
		}
	}
	if r.Conflicts != nil {
		out.Conflicts = make([]api.ConflictedPath, len(r.Conflicts))
		for i, c := range r.Conflicts {
			out.Conflicts[i] = api.ConflictedPath(c)
		}
	}
	return out
}

// API is the report in the API's form; nil for nil.
func (c *CloneReport) API() *api.CloneReport {
	if c == nil {
		return nil
	}
	r := api.CloneReport(*c)
	return &r
}

// CloneReportOf is a clone's report the API carried, as the workspace's; nil for nil.
func CloneReportOf(c *api.CloneReport) *CloneReport {
	if c == nil {
		return nil
	}
	r := CloneReport(*c)
	return &r
}
