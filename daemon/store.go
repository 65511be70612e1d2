package daemon

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/paddockhq/paddock/daemon/api"
	"github.com/paddockhq/paddock/orchestrator"
	"github.com/paddockhq/paddock/transport"
)

// This file holds the daemon's store: each session's state file (what a new daemon lists
// again and reopens it by), its detached jobs' steps files, and the directories its kernels
// listen in. Every file is 0600 in a 0700 directory, written whole (a new file renamed over
// the old) or appended a line at a time.

// stateFile is where a session's description is kept, so that a new daemon lists it again.
const stateFile = "session.json"

// stored is a session's state file.
type stored struct {
	Session api.Session `json:"session"`
	// Request (a child: Spawn) and Key reopen a session whose kernel listens (listenDir).
	Request *api.OpenRequest  `json:"request,omitempty"`
	Spawn   *api.SpawnRequest `json:"spawn,omitempty"`
	// Scripted: a child a script started (session.spawn, or a spawn with a script); it
	// is no session of the daemon's, but its parent's to collect.
	Scripted bool   `json:"scripted,omitempty"`
	Key      string `json:"key,omitempty"`
	// Listen and Sandbox, when set, are where the kernel listens and its sandbox's session
	// label, when they are not the session's own (listenDir, its id): a pool's warm kernel
	// the session claimed.
	Listen  string `json:"listen,omitempty"`
	Sandbox string `json:"sandbox,omitempty"`
	// Resume is what the session's opener takes it up by (Where.Resume).
	Resume string               `json:"resume,omitempty"`
	Jobs   map[string]storedJob `json:"jobs,omitempty"`
}

// kernel is where a stored session's kernel listens, for Reattach.
func (st stored) kernel(dir string) transport.Spec {
	at := transport.Spec{Session: st.Session.ID, Listen: filepath.Join(dir, listenDir), Key: st.Key}
	if st.Listen != "" {
		at.Listen = st.Listen
	}
	if st.Sandbox != "" {
		at.Session = st.Sandbox
	}
	return at
}

// storedJob is where a detached job is. The steps it ended are not in the state file,
// which is written whole at every step, but appended once each to the job's steps file;
// Steps counts those the state goes with.
type storedJob struct {
	State orchestrator.JobState `json:"state"`
	Steps int                   `json:"steps"`
}

// stepsFile is a job's steps file in its session's directory: one JSON line per step ended.
func stepsFile(dir, job string) string { return filepath.Join(dir, "job-"+job+".steps") }

// appendSteps appends steps to a job's steps file.
func appendSteps(path string, steps []orchestrator.StepResult) error {
	var b []byte
	for _, st := range steps {
		line, err := json.Marshal(st)
		if err != nil {
			return err
		}
		b = append(append(b, line...), '\n')
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(b)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// readSteps reads the first n steps of a job's steps file, and cuts off what follows them
// (steps written by a daemon that died before its state file said so).
func readSteps(path string, n int) ([]orchestrator.StepResult, error) {
	if n == 0 { // no step had ended: the file may never have been made
		if err := os.Truncate(path, 0); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
		return nil, nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	steps := make([]orchestrator.StepResult, 0, n)
	off := 0
	for len(steps) < n {
		i := bytes.IndexByte(b[off:], '\n')
		if i < 0 {
			return nil, fmt.Errorf("%s: %d steps of %d", path, len(steps), n)
		}
		var st orchestrator.StepResult
		if err := json.Unmarshal(b[off:off+i], &st); err != nil {
			return nil, fmt.Errorf("%s: step %d: %w", path, len(steps), err)
		}
		steps = append(steps, st)
		off += i + 1
	}
	if off < len(b) {
		return steps, os.Truncate(path, int64(off))
	}
	return steps, nil
}

// handbacks is where isolated children's clones are made, in the state directory: outside
// their parents' directories, so that the versions of a conflicted hand-back are kept after
// the parent closes (a clone's directory goes when nothing conflicted).
const handbacks = "handbacks"

// listenDir is where a session's listening kernel has its socket, in its state directory.
const listenDir = "kernel"

// save writes a session's state file (0600 from the moment it exists), replacing it whole;
// once the session is closed it does nothing.
func (e *entry) save() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.gone {
		return nil
	}
	if e.s != nil && e.kernel.Key != "" {
		if at := e.s.Listening(); at.Key != "" {
			e.kernel = at // a kernel that replaced one that ended listens where it started
		}
	}
	st := stored{Session: e.info, Request: e.req, Spawn: e.spawn, Key: e.kernel.Key, Jobs: e.states, Scripted: e.isScripted, Resume: e.resume}
	if e.kernel.Listen != filepath.Join(e.dir, listenDir) {
		st.Listen = e.kernel.Listen
	}
	if e.kernel.Session != e.info.ID {
		st.Sandbox = e.kernel.Session
	}
	b, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return err
	}
	tmp := filepath.Join(e.dir, stateFile+".new")
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(e.dir, stateFile))
}

// persist keeps a detached job's state in the session's state file, for a daemon that
// takes it up after this one died; a session whose kernel does not listen keeps none.
func (s *Server) persist(e *entry, j *orchestrator.Job) {
	e.mu.Lock()
	listens := e.kernel.Key != ""
	e.mu.Unlock()
	if !listens {
		return
	}
	id := j.ID()
	j.Persist(func(st orchestrator.JobState) {
		done := st.Done
		st.Done = nil
		e.mu.Lock()
		if e.states == nil {
			e.states = map[string]storedJob{}
		}
		rec := e.states[id]
		if len(done) > rec.Steps {
			if err := appendSteps(stepsFile(e.dir, id), done[rec.Steps:]); err != nil {
				e.mu.Unlock()
				s.log.Warn("job steps file", "job", id, "error", err)
				return
			}
		}
		e.states[id] = storedJob{State: st, Steps: len(done)}
		e.mu.Unlock()
		if err := e.save(); err != nil {
			s.log.Warn("session state file", "session", id, "error", err)
		}
	})
}

// dropClean removes the directory of a hand-back in which nothing conflicted: it keeps
// nothing.
func (s *Server) dropClean(h *api.Report) {
	if h != nil && len(h.Conflicts) == 0 && strings.HasPrefix(h.Dir, filepath.Join(s.cfg.StateDir, handbacks)+"/") {
		os.RemoveAll(h.Dir)
	}
}

// forget ends a record: its file goes, and nothing is saved any more.
func (s *Server) forget(e *entry) {
	e.mu.Lock()
	e.move(entryRemove)
	at := e.kernel
	e.mu.Unlock()
	os.RemoveAll(e.dir)
	s.dropListen(at.Listen)
}

// listenIn is where pooled sessions' warm kernels listen, in the state directory (Where).
const listenIn = "pool"

func (s *Server) where() Where { return Where{ListenIn: filepath.Join(s.cfg.StateDir, listenIn)} }

// dropListen removes a directory a session's kernel listened in outside the session's own
// directory (a pool's warm kernel's), and the log beside it. Only a directory in listenIn
// is removed, whatever a state file says.
func (s *Server) dropListen(dir string) {
	base := filepath.Join(s.cfg.StateDir, listenIn)
	if filepath.Dir(dir) != base || filepath.Base(dir) == ".." {
		return
	}
	os.RemoveAll(dir)
	os.Remove(dir + ".log")
	os.RemoveAll(transport.EgressBeside(dir))
}

// dropListensLeft removes, once the sessions a previous daemon left were taken up, every
// directory in listenIn no session's kernel listens in: the warm kernels of that daemon's
// pools, whose sandboxes the reaper then removes (it spares a listening kernel's sandbox
// only while its directory is there).
// left are the names in listenIn before any session was taken up: the sessions taken up
// open pools of their own, whose warm kernels listen there too and are not to be removed.
func (s *Server) dropListensLeft(left []os.DirEntry) {
	held := map[string]bool{}
	for _, e := range s.sessions {
		e.mu.Lock()
		held[e.kernel.Listen] = true
		for _, r := range e.scripted {
			r.mu.Lock()
			held[r.kernel.Listen] = true
			r.mu.Unlock()
		}
		e.mu.Unlock()
	}
	base := filepath.Join(s.cfg.StateDir, listenIn)
	for _, d := range left {
		dir := filepath.Join(base, strings.TrimSuffix(strings.TrimSuffix(d.Name(), ".log"), ".egress"))
		if !held[dir] {
			os.RemoveAll(filepath.Join(base, d.Name()))
		}
	}
}
