//go:build linux

package kernel

import (
	"os"
	"syscall"
	"time"
)

// killAll ends every process the kernel started and every descendant of it, wherever it
// went (its own process group, its own session): TERM, up to the shutdown grace for them
// to end, then KILL until none is left, reaped. As a child subreaper the kernel is the
// ancestor of every orphan of its pipelines, so its descendants in /proc are all of them.
func (s *server) killAll() {
	self := os.Getpid()
	s.signalAll(self, syscall.SIGTERM)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	grace := time.NewTimer(s.opts.ShutdownGrace)
	defer grace.Stop()
wait:
	for s.anyAlive(self) {
		select {
		case <-tick.C:
		case <-grace.C:
			break wait
		}
	}
	give := time.NewTimer(5 * time.Second)
	defer give.Stop()
	for {
		procs, ok := descendants(self)
		if !ok {
			s.signalGroups(syscall.SIGKILL)
			return
		}
		if len(procs) == 0 {
			return
		}
		s.signalAll(self, syscall.SIGKILL)
		select {
		case <-tick.C:
		case <-give.C:
			s.log.Error("descendants still there after KILL", "count", len(procs))
			return
		}
	}
}

// signalAll sends sig to every live descendant, and to each process group the kernel started
// that still holds one. Without /proc it signals the groups it started.
func (s *server) signalAll(self int, sig syscall.Signal) {
	procs, ok := descendants(self)
	if !ok {
		s.signalGroups(sig)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	sent := make(map[int]bool)
	for _, p := range procs {
		if p.zombie {
			continue
		}
		// The group first: one kill reaches members forked since the walk.
		if s.groups[p.pgid] && !sent[p.pgid] {
			sent[p.pgid] = true
			syscall.Kill(-p.pgid, sig)
		}
		syscall.Kill(p.pid, sig)
	}
}

// signalGroups sends sig to each process group the kernel started.
func (s *server) signalGroups(sig syscall.Signal) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for pgid := range s.groups {
		syscall.Kill(-pgid, sig)
	}
}

// anyAlive reports whether a descendant that is not a zombie is left.
func (s *server) anyAlive(self int) bool {
	procs, ok := descendants(self)
	if !ok {
		s.mu.Lock()
		defer s.mu.Unlock()
		for pgid := range s.groups {
			if syscall.Kill(-pgid, 0) == nil {
				return true
			}
		}
		return false
	}
	for _, p := range procs {
		if !p.zombie {
			return true
		}
	}
	return false
}
