package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"time"

	"github.com/paddockhq/paddock/daemon/api"
	"github.com/paddockhq/paddock/orchestrator"
	"github.com/paddockhq/paddock/session"
	"github.com/paddockhq/paddock/transport"
	"github.com/paddockhq/paddock/workspace"
)

// This file holds the daemon's recovery: at its start, the sessions a daemon that died left
// are taken up again on their kernels (which listened, and outlived it), with their jobs
// where they were; those that cannot be are listed as ended, what they left cleaned up, and
// their isolated workspaces handed back.

// recover lists again the sessions a previous daemon recorded. A session whose kernel
// listens (a container's) and still runs is reopened, its detached jobs going on; any
// other is listed as ended, with the reason, until it is closed.
func (s *Server) recover() {
	type found struct {
		dir   string
		st    stored
		depth int
	}
	var all []found
	parents := map[string]string{}
	poolLeft, _ := os.ReadDir(filepath.Join(s.cfg.StateDir, listenIn))
	dirs, _ := os.ReadDir(filepath.Join(s.cfg.StateDir, "sessions"))
	for _, d := range dirs {
		dir := filepath.Join(s.cfg.StateDir, "sessions", d.Name())
		b, err := os.ReadFile(filepath.Join(dir, stateFile))
		if errors.Is(err, fs.ErrNotExist) {
			// A session whose opening never finished (its state file is written once its
			// kernel answers): nobody was told of it. Its directory goes, and with it the
			// directory its kernel would listen in, so the reaper, which spares a container
			// while that directory is there, removes its container.
			s.log.Warn("a session a previous daemon was opening is removed", "session", d.Name())
			if err := os.RemoveAll(dir); err != nil {
				s.log.Warn("removing an unfinished session", "dir", dir, "err", err)
			}
			continue
		}
		if err != nil {
			continue
		}
		var st stored
		if json.Unmarshal(b, &st) != nil || st.Session.ID != d.Name() {
			s.log.Warn("unreadable session state file", "dir", dir)
			continue
		}
		all = append(all, found{dir: dir, st: st})
		parents[st.Session.ID] = st.Session.Parent
	}
	// Parents first: a child is taken up under its parent.
	for i := range all {
		for p := all[i].st.Session.Parent; p != "" && all[i].depth < len(all); p = parents[p] {
			all[i].depth++
		}
	}
	sort.SliceStable(all, func(a, b int) bool { return all[a].depth < all[b].depth })
	// Clones no record holds are handed back first, before any job taken up runs: a job's
	// script may spawn a child, whose clone in the making must not be taken for one left.
	held := map[string]bool{}
	for _, f := range all {
		if c := f.st.Session.Clone; c != nil && f.st.Session.State == api.Open {
			held[c.Dir] = true
		}
	}
	s.handBackLeft(held)
	for _, f := range all {
		dir, st := f.dir, f.st
		if st.Scripted {
			parent := s.sessions[st.Session.Parent]
			err := errors.New("its parent was not taken up again")
			if parent != nil && parent.s != nil && st.Spawn != nil {
				err = s.reopenScripted(parent, dir, st)
			}
			if err != nil {
				// Its clone is handed back, its container reaped at the daemon's start.
				s.log.Warn("a scripted child of a previous daemon cannot be taken up", "child", st.Session.ID, "err", err)
				info := st.Session
				s.handBackEnded(&info)
				s.dropClean(info.Handback)
				os.RemoveAll(dir)
			}
			continue
		}
		if st.Session.State == api.Open && st.Key != "" {
			var e *entry
			var err error
			switch parent := s.sessions[st.Session.Parent]; {
			case st.Session.Parent == "" && st.Request != nil:
				e, err = s.reopen(dir, st)
			case parent != nil && parent.s != nil && st.Spawn != nil:
				e, err = s.reopenChild(parent, dir, st)
			case parent != nil:
				err = errors.New("its parent was not taken up again")
			default:
				err = errors.New("its parent is gone")
			}
			if err == nil {
				s.sessions[e.info.ID] = e
				s.log.Info("session from a previous daemon reopened", "session", e.info.ID, "jobs", len(st.Jobs))
				continue
			}
			s.log.Warn("session from a previous daemon cannot be reopened", "session", st.Session.ID, "err", err)
			st.Session.Reason = "reattaching its kernel: " + err.Error()
		}
		info := st.Session
		if to, lost := entryLife.Next(entryState(info.State), entryLost); lost {
			info.State = string(to)
			if info.Reason == "" {
				info.Reason = "its kernel ended while no daemon held it (the daemon restarted)"
			}
			if s.cfg.Recover != nil {
				left := session.Left{Session: info.ID, Request: st.Request}
				if st.Key != "" {
					left.Kernel = st.kernel(dir)
				}
				if r := s.cfg.Recover(s.life, info, left); r != "" {
					info.Reason = r + " (" + info.Reason + ")"
				}
			}
			for i := range info.Jobs {
				if !info.Jobs[i].Done {
					info.Jobs[i].Done, info.Jobs[i].Lost = true, true
					info.Jobs[i].Saved = s.settleLost(info.ID, info.Jobs[i])
				}
			}
			s.handBackEnded(&info)
		}
		e := &entry{info: info, dir: dir, hub: newHub(info.ID), children: slices.Clone(info.Children), artifacts: map[string]string{}}
		e.hub.close()
		if err := e.save(); err != nil {
			s.log.Warn("session state file", "session", info.ID, "error", err)
		}
		s.sessions[info.ID] = e
		s.log.Warn("session from a previous daemon listed as ended", "session", info.ID, "reason", info.Reason)
	}
	s.dropListensLeft(poolLeft)
}

// handBackLeft hands back every clone under handbacks/ that is not held and was not handed
// back: those a previous daemon's sessions left without a record. A clone whose hand-back
// fails stays, and says why in the log.
func (s *Server) handBackLeft(held map[string]bool) {
	dirs, _ := os.ReadDir(filepath.Join(s.cfg.StateDir, handbacks))
	for _, d := range dirs {
		dir := filepath.Join(s.cfg.StateDir, handbacks, d.Name())
		if held[dir] {
			continue
		}
		if _, err := os.Stat(filepath.Join(dir, "copy")); err != nil {
			continue // handed back; what is left is its conflicts and report
		}
		rep, err := workspace.Handback(s.life, dir)
		if err != nil {
			s.log.Warn("a clone left by a previous daemon cannot be handed back; it is kept", "dir", dir, "err", err)
			continue
		}
		s.log.Warn("a clone left by a previous daemon was handed back", "dir", dir, "parent", rep.Parent,
			"taken", len(rep.Taken), "conflicts", len(rep.Conflicts))
		s.dropClean(rep.API())
	}
}

// handBackEnded hands back the workspace of an isolated child whose kernel ended with a
// previous daemon, as its close would have: nothing it wrote is lost.
func (s *Server) handBackEnded(info *api.Session) {
	if info.Mode != orchestrator.Isolated || info.Clone == nil || info.Handback != nil {
		return
	}
	if _, err := os.Stat(info.Clone.Dir); err != nil {
		return
	}
	rep, err := workspace.Handback(s.life, info.Clone.Dir)
	if err != nil {
		info.Reason += fmt.Sprintf("; its workspace could not be handed back (it is kept in %s): %v", info.Clone.Dir, err)
		return
	}
	info.Handback = rep.API()
	info.Reason += "; its workspace was handed back"
}

// reopen takes up a root session a previous daemon left open, on its kernel, which
// listened and outlived it: the session is configured again from its request, its kernel
// reattached, its detached jobs taken up where they were.
func (s *Server) reopen(dir string, st stored) (*entry, error) {
	ctx, cancel := context.WithTimeout(s.life, 60*time.Second)
	defer cancel()
	// The session's transport is the one it ran on, whatever the settings say now.
	req := *st.Request
	req.Transport = st.Session.Transport
	at := s.where()
	at.Resume = st.Resume
	o, err := s.opened(ctx, req, at)
	if err != nil {
		return nil, err
	}
	release := func() {
		if o.Finish != nil {
			o.Finish(ctx)
		}
	}
	info := st.Session
	cfg := o.Config
	cfg.ID, cfg.StateDir, cfg.Log = info.ID, dir, s.log
	cfg.NoOutputTimeout = o.NoOutputTimeout
	// Its jobs wait until clients can attach, and what they ask again waits for a client as
	// long as a call blocks: the clients of the daemon that died reconnect meanwhile. (Its
	// children are configured from it, and wait the same.)
	cfg.Ready, cfg.AttachGrace = s.ready, cfg.Budget
	cfg.ChildDirs = filepath.Join(s.cfg.StateDir, handbacks)
	cfg.Egress = s.egress(cfg.Egress)
	cfg.Listen, cfg.Key = filepath.Join(dir, listenDir), st.Key
	kp := &keeper{s: s, listen: true}
	cfg.Keeper = kp
	cfg.Replaced = kp.replaced
	e := &entry{cfg: cfg, hub: newHub(info.ID), dir: dir, noOT: o.NoOutputTimeout, finish: o.Finish,
		req: st.Request, resume: st.Resume, kernel: st.kernel(dir), artifacts: map[string]string{}, states: map[string]storedJob{}}
	kp.e.Store(e)
	err = s.takeUp(ctx, e, st, func(k transport.Kernel, jobs []orchestrator.Restore) (*orchestrator.Session, error) {
		return orchestrator.Reopen(ctx, cfg, k, jobs)
	})
	if err != nil {
		release()
		return nil, err
	}
	return e, nil
}

// reopenChild takes up a child a previous daemon spawned under parent, which was reopened.
func (s *Server) reopenChild(parent *entry, dir string, st stored) (*entry, error) {
	ctx, cancel := context.WithTimeout(s.life, 60*time.Second)
	defer cancel()
	info := st.Session
	cc := orchestrator.ChildConfig{Name: info.Name, Workspace: info.Mode, Env: st.Spawn.Env, ID: info.ID,
		Listen: filepath.Join(dir, listenDir), Key: st.Key}
	e := &entry{cfg: parent.cfg, hub: newHub(info.ID), dir: dir, noOT: parent.noOT,
		spawn: st.Spawn, kernel: st.kernel(dir), artifacts: map[string]string{}, states: map[string]storedJob{}}
	err := s.takeUp(ctx, e, st, func(k transport.Kernel, jobs []orchestrator.Restore) (*orchestrator.Session, error) {
		return parent.s.ReopenChild(ctx, cc, workspace.CloneReportOf(info.Clone), k, jobs)
	})
	if err != nil {
		return nil, err
	}
	return e, nil
}

// takeUp reattaches a session's kernel through its transport, has open make the session
// around it with the jobs to take up, and starts watching those jobs.
func (s *Server) takeUp(ctx context.Context, e *entry, st stored, open func(transport.Kernel, []orchestrator.Restore) (*orchestrator.Session, error)) error {
	info := st.Session
	ra, ok := e.cfg.Transport.(transport.Reattacher)
	if !ok {
		return fmt.Errorf("its transport (%s) cannot reattach", info.Transport)
	}
	k, err := ra.Reattach(ctx, e.kernel)
	if err != nil {
		return err
	}
	var restores []orchestrator.Restore
	for i, j := range info.Jobs {
		if j.Done {
			continue
		}
		rec, ok := st.Jobs[j.ID]
		js := rec.State
		var err error
		if ok && !js.Ended {
			js.Done, err = readSteps(stepsFile(e.dir, j.ID), rec.Steps)
		}
		switch {
		case !ok || err != nil:
			info.Jobs[i].Done, info.Jobs[i].Lost = true, true
			if err != nil {
				s.log.Warn("job not taken up again", "job", j.ID, "err", err)
			}
			info.Jobs[i].Saved = s.settleLost(info.ID, j)
		case js.Ended:
			info.Jobs[i].Done, info.Jobs[i].Result = true, js.Result.API()
			if js.Result != nil {
				info.Jobs[i].Saved = js.Result.Saved.API()
			}
		default:
			e.states[j.ID] = rec
			e.artifacts[j.ID] = j.Artifact
			restores = append(restores, orchestrator.Restore{State: js, Live: e.live})
		}
	}
	e.info = info
	e.children = slices.Clone(info.Children)
	e.past = map[string]api.Job{}
	for _, j := range info.Jobs {
		if j.Done {
			e.past[j.ID] = j
		}
	}
	sess, err := open(k, restores)
	if err != nil {
		k.Kill()
		return err
	}
	e.mu.Lock()
	e.s = sess
	e.mu.Unlock()
	s.hubMetrics(e.hub)
	for _, j := range sess.Jobs() {
		s.persist(e, j)
		s.wg.Add(1)
		go s.watchJob(e, j, e.artifacts[j.ID()])
	}
	if err := e.save(); err != nil {
		s.log.Warn("session state file", "session", info.ID, "error", err)
	}
	s.metrics.add(func(m *metrics) { m.open++ })
	return nil
}

// reopenScripted takes up a child a script of parent started under a previous daemon.
func (s *Server) reopenScripted(parent *entry, dir string, st stored) error {
	ctx, cancel := context.WithTimeout(s.life, 60*time.Second)
	defer cancel()
	info := st.Session
	ra, ok := parent.cfg.Transport.(transport.Reattacher)
	if !ok || len(info.Jobs) != 1 {
		return fmt.Errorf("a scripted child of %s cannot be taken up", parent.info.ID)
	}
	k, err := ra.Reattach(ctx, st.kernel(dir))
	if err != nil {
		return err
	}
	id := info.Jobs[0].ID
	rec := st.Jobs[id]
	js := rec.State
	if !js.Ended {
		if js.Done, err = readSteps(stepsFile(dir, id), rec.Steps); err != nil {
			k.Kill()
			return err
		}
	}
	if js.ID == "" {
		// The daemon died as the script started, before its place was saved: whether its
		// first step ran is not known, so it is not run again.
		js = orchestrator.JobState{ID: id, Script: info.Jobs[0].Script, Ended: true, Result: &orchestrator.Result{
			End: orchestrator.End{Kind: orchestrator.Failed, Status: 1, Job: id, Message: "the daemon stopped as the script started; it was not run again"}}}
	}
	cc := orchestrator.ChildConfig{Name: info.Name, Workspace: info.Mode, Env: st.Spawn.Env, ID: info.ID,
		Listen: filepath.Join(dir, listenDir), Key: st.Key}
	_, j, err := parent.s.ReopenRun(ctx, cc, workspace.CloneReportOf(info.Clone), k, orchestrator.Restore{State: js})
	if err != nil {
		k.Kill()
		return err
	}
	e := &entry{dir: dir, kernel: st.kernel(dir), isScripted: true, spawn: st.Spawn, info: info,
		states: map[string]storedJob{id: rec}}
	parent.mu.Lock()
	if parent.scripted == nil {
		parent.scripted = map[string]*entry{}
	}
	parent.scripted[info.ID] = e
	parent.mu.Unlock()
	s.persist(e, j)
	return nil
}

// settleLost puts in order the artifact of a job lost with a previous daemon (its output
// went past its cap, and that daemon died before it turned the file).
func (s *Server) settleLost(session string, j api.Job) *api.ArtifactReport {
	if j.Artifact == "" {
		return nil
	}
	rep, err := orchestrator.SettleArtifact(j.Artifact)
	switch {
	case err != nil && !errors.Is(err, fs.ErrNotExist):
		s.log.Warn("a lost job's artifact cannot be put in order", "session", session, "job", j.ID, "err", err)
	case err == nil && rep.Dropped > 0:
		s.log.Info("a lost job's artifact was put in order", "session", session, "job", j.ID,
			"written", rep.Written, "kept", rep.Kept, "dropped", rep.Dropped)
	}
	return rep.API()
}
