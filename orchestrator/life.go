package orchestrator

import "github.com/paddockhq/paddock/internal/lifecycle"

// The lives of a session and of a job: their states, and the one table each moves by
// (lifecycle). A session or a job changes its state only through move, under its lock.

// sessionState is where a session is in its life.
type sessionState string

const (
	sessionOpening sessionState = "opening" // its kernel is starting; nothing is shared yet
	sessionLive    sessionState = "live"    // it takes requests (a kernel that ended is replaced)
	sessionClosing sessionState = "closing" // Close runs: its jobs, children and kernel end
	sessionClosed  sessionState = "closed"  // ended, its workspace handed back
)

// sessionEvent is what moves a session.
type sessionEvent string

const (
	sessionStarted   sessionEvent = "started"    // its first kernel answered
	sessionFailed    sessionEvent = "failed"     // its first kernel did not
	sessionClose     sessionEvent = "close"      // Close was called
	sessionWoundDown sessionEvent = "wound_down" // everything it started has ended
)

var sessionLife = lifecycle.Machine[sessionState, sessionEvent]{
	Name:  "session",
	Start: sessionOpening,
	Moves: map[sessionState]map[sessionEvent]sessionState{
		sessionOpening: {sessionStarted: sessionLive, sessionFailed: sessionClosed},
		sessionLive:    {sessionClose: sessionClosing},
		sessionClosing: {sessionWoundDown: sessionClosed},
	},
}

// move moves the session on ev; ok is false (and nothing changes) when its table holds no
// such move from where it is. The caller holds mu, or the session is not yet shared.
func (s *Session) move(ev sessionEvent) bool {
	to, ok := sessionLife.Next(s.state, ev)
	if ok {
		s.state = to
	}
	return ok
}

// jobState is where a job is in its life.
type jobState string

const (
	jobRunning  jobState = "running"  // its script runs; the call that started it waits
	jobDetached jobState = "detached" // its script runs past the call's budget
	jobEnded    jobState = "ended"    // its script ended (done, failed, refused, timed out)
	jobKilled   jobState = "killed"   // killed, with the output it had
)

// jobEvent is what moves a job.
type jobEvent string

const (
	jobDetach jobEvent = "detach" // the call's budget passed
	jobFinish jobEvent = "finish" // the script's own end
	jobKill   jobEvent = "kill"   // Kill, or the kernel's no-output timeout
)

var jobLife = lifecycle.Machine[jobState, jobEvent]{
	Name:  "job",
	Start: jobRunning,
	Moves: map[jobState]map[jobEvent]jobState{
		jobRunning:  {jobDetach: jobDetached, jobFinish: jobEnded, jobKill: jobKilled},
		jobDetached: {jobFinish: jobEnded, jobKill: jobKilled},
	},
}

// move moves the job on ev; ok is false (and nothing changes) when its table holds no such
// move from where it is: a job that ended takes no other end. The caller holds mu.
func (j *Job) move(ev jobEvent) bool {
	to, ok := jobLife.Next(j.life, ev)
	if ok {
		j.life = to
	}
	return ok
}

// ended reports whether the job has ended; the caller holds mu.
func (j *Job) ended() bool { return jobLife.Final(j.life) }
