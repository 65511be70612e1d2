package daemon

import (
	"context"
	"errors"
	"os"

	"github.com/paddockhq/paddock/session"
)

// Run is a daemon's life on its socket (Config.Socket): it removes the containers of host
// processes that died, listens (Listen's checks), and serves until ctx ends or serving
// fails. Then it stops as a daemon told to stop does: its sessions left for the next daemon
// on its state directory (Leave), or, with Config.Drain, every one closed (Close); the socket
// goes with it. A daemon that cannot listen leaves its sessions for one that can.
func (s *Server) Run(ctx context.Context) error {
	socket := s.cfg.Socket
	if socket == "" {
		s.Leave()
		return errors.New("daemon: no socket")
	}
	s.reap(ctx)
	l, err := Listen(socket, s.log)
	if err != nil {
		s.Leave()
		return err
	}
	s.log.Info("serving", "socket", "unix://"+socket, "state", s.cfg.StateDir, "pid", os.Getpid())
	done := make(chan error, 1)
	go func() { done <- s.Serve(l) }()
	select {
	case <-ctx.Done():
	case err := <-done:
		s.Leave()
		return err
	}
	if s.cfg.Drain {
		s.log.Info("stopping: closing every session (--drain)")
		err = s.Close()
		if serr := <-done; err == nil {
			err = serr
		}
	} else {
		s.log.Info("stopping: the sessions are left for the next daemon on this state directory")
		s.Leave()
		err = <-done
	}
	os.Remove(socket)
	return err
}

// reap removes the containers of host processes that died (a killed daemon's children, say),
// once the sessions the server takes up again were (New): those wait while their state
// directory is there. An engine that does not answer is skipped.
func (s *Server) reap(ctx context.Context) {
	for _, p := range session.Providers() {
		if n, err := p.Reap(ctx); err != nil {
			s.log.Warn("reaper", "engine", p.Kind(), "err", err)
		} else if n > 0 {
			s.log.Info("reaper removed the containers of host processes that died", "engine", p.Kind(), "count", n)
		}
	}
}
