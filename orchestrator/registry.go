package orchestrator

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
