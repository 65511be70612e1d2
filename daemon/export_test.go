package daemon

// ChildDone is the end of the script of the child a session's script started
// (orchestrator.Session.ChildDone): a test waits on it for a child it leaves uncollected. nil
// when there is no such session or child.
func (s *Server) ChildDone(session, child string) <-chan struct{} {
	e, err := s.get(session)
	if err != nil {
		return nil
	}
	e.mu.Lock()
	o := e.s
	e.mu.Unlock()
	if o == nil {
		return nil
	}
	return o.ChildDone(child)
}
