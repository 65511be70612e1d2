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
