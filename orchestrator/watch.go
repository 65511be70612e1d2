package orchestrator

import (
	"context"
	"errors"
	"sync/atomic"
	"time"
)

// limits are the session's time limits for its calls.
func (s *Session) limits() Limits {
	return Limits{NoOutput: s.cfg.NoOutputTimeout, Wall: s.cfg.JobTimeout}
}

// asking reports whether a question of the session waits for an answer (a step's, or a file
// access's), or a gatekeeper decides a step.
func (s *Session) asking() bool { return s.questions.Load() > 0 }

// watch kills a call once it has run past the session's limits (Overdue): it looks every
// watchPeriod until done closes or the session ends. last holds when the call last printed,
// in Unix nanoseconds; a question waiting counts as output.
func (s *Session) watch(done <-chan struct{}, start time.Time, last *atomic.Int64, kill func(End)) {
	l := s.limits()
	t := time.NewTicker(watchPeriod(l))
	defer t.Stop()
	for {
		select {
		case <-done:
			return
		case <-s.life.Done():
			return
		case now := <-t.C:
			asking := s.asking()
			if asking {
				last.Store(now.UnixNano())
			}
			if end, ok := Overdue(l, now, start, time.Unix(0, last.Load()), asking); ok {
				s.log.Warn("call killed past its limit", "session", s.id, "code", end.Code, "why", end.Message)
				kill(end)
				return
			}
		}
	}
}

// watchJob watches a job, on the session's lifetime, when the session has limits.
func (s *Session) watchJob(j *Job) {
	if !s.limits().Set() {
		return
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		s.watch(j.done, j.start, &j.last, j.kill)
	}()
}

// errOverdue ends the context of a call that blocks to its end, killed past a limit.
var errOverdue = errors.New("past its limit")

// runWatched runs a call that blocks to its end under the session's limits: past one its
// steps are killed and it ends killed, with the output it had.
func (s *Session) runWatched(ctx context.Context, call Call) (*Result, error) {
	var last atomic.Int64
	start := time.Now()
	last.Store(start.UnixNano())
	live := call.Live
	call.Live = func(step, fd int, data []byte) {
		last.Store(time.Now().UnixNano())
		if live != nil {
			live(step, fd, data)
		}
	}
	r, err := s.newRunner(call)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	done := make(chan struct{})
	var killed atomic.Pointer[End]
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		s.watch(done, start, &last, func(e End) {
			killed.Store(&e)
			cancel(errOverdue)
		})
	}()
	res, err := r.run(ctx)
	close(done)
	<-watched
	if e := killed.Load(); e != nil && err != nil { // else it ended on its own first
		res = r.snapshot()
		for i := range res.Steps {
			res.Steps[i].Running = false
		}
		res.End = *e
		return res, nil
	}
	return res, err
}
