package orchestrator

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
)

// ForgetJobs drops the ended jobs for which keep is false from the session's list, so that a
// long-lived session (a daemon's) does not hold every call it ever ran. A live job is never
// dropped.
func (s *Session) ForgetJobs(keep func(id string) bool) {
	s.jobs.mu.Lock()
	defer s.jobs.mu.Unlock()
	for id, j := range s.jobs.all {
		select {
		case <-j.done:
			if !keep(id) {
				delete(s.jobs.all, id)
			}
		default:
		}
	}
}

// StartJob starts a call of the bash tool as a job at once, on the session's lifetime, and
// returns it: its caller decides how long to wait (Job.Done) before answering detached with
// the result so far (Job.Result), as Run does with a budget. A daemon uses it to watch a
// call's silence from its first moment.
func (s *Session) StartJob(call Call) (*Job, error) { return s.startJob(call) }

// Serve serves one host request of type typ as the session serves its kernel's (fs.read,
// fs.write, session.spawn, … and Config.Handlers over them), with the same paths, policy and
// approval route: a daemon's API uses it for the file accesses its clients ask for.
func (s *Session) Serve(ctx context.Context, typ string, body json.RawMessage) (any, error) {
	f := s.handlers()[typ]
	if f == nil {
		return nil, &NotFoundError{What: "host request type", ID: typ}
	}
	return f(ctx, HostRequest{ID: "api", Type: typ, Body: body})
}

// SpawnedChild is a child a session started with a script (SpawnRun, or session.spawn from
// its sandbox); Done: its script has ended.
type SpawnedChild struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	Done bool   `json:"done"`
}

// ChildDone returns a channel closed when the script of the child id (SpawnRun) ends; nil
// when the session started no such child.
func (s *Session) ChildDone(id string) <-chan struct{} {
	s.kids.mu.Lock()
	defer s.kids.mu.Unlock()
	if cr := s.kids.all[id]; cr != nil {
		return cr.job.Done()
	}
	return nil
}

// SpawnedChildren lists the children the session started with scripts, collected or not.
func (s *Session) SpawnedChildren() []SpawnedChild {
	s.kids.mu.Lock()
	defer s.kids.mu.Unlock()
	out := make([]SpawnedChild, 0, len(s.kids.all))
	for id, cr := range s.kids.all {
		c := SpawnedChild{ID: id, Name: cr.s.name}
		select {
		case <-cr.job.Done():
			c.Done = true
		default:
		}
		out = append(out, c)
	}
	slices.SortFunc(out, func(a, b SpawnedChild) int { return strings.Compare(a.ID, b.ID) })
	return out
}
