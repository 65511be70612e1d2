// Package front is what every front end does to reach a session: open one in this process
// (session.Prepare and orchestrator.Open) or in a daemon (the client), from the same
// options, and hand it on as the MCP server or a fan-out takes it. A front end keeps only
// its own flags, output and exit codes: the CLI's commands and any other program alike.
package front

import (
	"context"
	"errors"
	"io"
	"sync"

	"github.com/paddockhq/paddock/client"
	"github.com/paddockhq/paddock/config"
	"github.com/paddockhq/paddock/daemon/api"
	"github.com/paddockhq/paddock/errdefs"
	"github.com/paddockhq/paddock/fanout"
	"github.com/paddockhq/paddock/internal/place"
	"github.com/paddockhq/paddock/internal/prompt"
	"github.com/paddockhq/paddock/internal/sshfile"
	"github.com/paddockhq/paddock/mcpserver"
	"github.com/paddockhq/paddock/orchestrator"
	"github.com/paddockhq/paddock/session"
	"github.com/paddockhq/paddock/transport/ssh"
	"github.com/paddockhq/paddock/workspace"
)

// Dial is a client of the daemon at host (unix://PATH), else of $PADDOCK_HOST's, else of
// the one on the default socket.
func Dial(host string) (*client.Client, error) {
	h := client.FromEnv(host)
	if h == "" {
		h = "unix://" + place.Socket()
	}
	return client.New(h)
}

// Local is a session opened in this process.
type Local struct {
	Session  *orchestrator.Session
	Settings *config.Loaded // what it was opened with
	close    func() (*workspace.Report, error)
}

// Close closes the session and finishes what was prepared for it (a workspace synced to a
// box comes back: its report), once; a later call returns the first one's result.
func (l *Local) Close() (*workspace.Report, error) { return l.close() }

// Open opens a session in this process; notice gets what the user must be told of it (a
// variable left out, a missing sftp subsystem), and handback what came back of a workspace
// synced to a box when it closes.
func Open(ctx context.Context, o session.Options, notice func(string), handback func(*api.Report)) (*Local, error) {
	if notice == nil {
		notice = func(string) {}
	}
	if handback == nil {
		handback = func(*api.Report) {}
	}
	s, p, err := session.Open(ctx, o)
	if err != nil {
		return nil, err
	}
	for _, n := range p.Notices {
		notice(n)
	}
	return &Local{Session: s, Settings: o.Settings, close: sync.OnceValues(func() (*workspace.Report, error) {
		err := s.Close()
		rep, ferr := p.Finish(context.Background())
		handback(rep.API())
		return rep, errors.Join(err, ferr)
	})}, nil
}

// OpenHosted opens the session req asks for in the daemon at host (see Dial); notice gets
// the daemon's warnings. The client is the caller's to close.
func OpenHosted(ctx context.Context, host string, req api.OpenRequest, notice func(string)) (*client.Client, api.Session, error) {
	c, err := Dial(host)
	if err != nil {
		return nil, api.Session{}, err
	}
	s, err := c.Open(ctx, req)
	if err != nil {
		c.Close()
		return nil, api.Session{}, err
	}
	for _, w := range s.Warnings {
		notice(w)
	}
	return c, s, nil
}

// Where is where a front end's session runs: in the daemon at Host (unix://PATH), or in
// this process when Host is "".
type Where struct {
	Host string
	// Options are the session's options when it runs here; called only then (they read
	// the settings files).
	Options func() (session.Options, error)
	// Request is the daemon's request for the same session; called only with Host.
	Request func() (api.OpenRequest, error)
	// Notice gets what the user must be told as it comes: notices, warnings, a hand-back
	// that failed; nil drops them.
	Notice func(string)
	// Handback gets what came back of a workspace synced to a box, when it comes back; nil
	// drops it (Run returns it too).
	Handback func(*api.Report)
}

// filled is w with a no-op for each callback left nil.
func (w Where) filled() Where {
	if w.Notice == nil {
		w.Notice = func(string) {}
	}
	if w.Handback == nil {
		w.Handback = func(*api.Report) {}
	}
	return w
}

// Open opens the session here (Host aside): see Open.
func (w Where) Open(ctx context.Context) (*Local, error) {
	w = w.filled()
	o, err := w.Options()
	if err != nil {
		return nil, err
	}
	return Open(ctx, o, w.Notice, w.Handback)
}

// Served is a session as the MCP server serves it.
type Served struct {
	Session mcpserver.Session
	// SSH reads ssh://HOST/PATH for the read tool: the hosts of ssh.hosts; nil when none
	// are set or the session is a daemon's (whose settings are its own).
	SSH *sshfile.Reader
	// Close ends what serving it opened: a session opened for it is closed (its
	// workspace handed back, told to Handback); a daemon's named session is left open.
	Close func() error
}

// MCP is the session an MCP server serves: with Host, the daemon's session id, or a new
// one opened there when id is ""; else one opened here.
func (w Where) MCP(ctx context.Context, id string) (*Served, error) {
	w = w.filled()
	if w.Host == "" {
		if id != "" {
			return nil, errdefs.New(errdefs.InvalidArgument, "usage", "--session names a daemon's session: give --host unix://PATH too")
		}
		l, err := w.Open(ctx)
		if err != nil {
			return nil, err
		}
		sv := &Served{Session: mcpserver.Local(l.Session)}
		var pool *ssh.Pool
		if hosts := l.Settings.Settings.SSH.Hosts; len(hosts) > 0 {
			pool = &ssh.Pool{}
			sv.SSH = &sshfile.Reader{Hosts: hosts, Pool: pool}
		}
		sv.Close = sync.OnceValue(func() error {
			if pool != nil {
				defer pool.Close()
			}
			_, err := l.Close()
			return err
		})
		return sv, nil
	}
	if id != "" {
		c, err := Dial(w.Host)
		if err != nil {
			return nil, err
		}
		s, err := c.Session(ctx, id)
		if err != nil {
			c.Close()
			return nil, err
		}
		return &Served{Session: mcpserver.Remote(c, s.ID, s.Cwd), Close: func() error { c.Close(); return nil }}, nil
	}
	req, err := w.Request()
	if err != nil {
		return nil, err
	}
	c, s, err := OpenHosted(ctx, w.Host, req, w.Notice)
	if err != nil {
		return nil, err
	}
	return &Served{Session: mcpserver.Remote(c, s.ID, s.Cwd), Close: sync.OnceValue(func() error {
		defer c.Close()
		ended, err := c.CloseSession(context.Background(), s.ID)
		if err != nil {
			return err
		}
		w.Handback(ended.Handback)
		for _, warn := range ended.Warnings {
			w.Notice("warning: " + warn)
		}
		if e := ended.HandbackError; e != "" { // the box's work is in a local copy only, as Run says
			return errors.New(e)
		}
		return nil
	})}, nil
}

// Spawner is where a fan-out's children run: in a session of the daemon (fanout.Hosted),
// else in this process (fanout.Open) with their clones, conflicts and reports in stateDir
// ("" makes one beside the workspace).
func (w Where) Spawner(ctx context.Context, stateDir string) (fanout.Spawner, error) {
	w = w.filled()
	if w.Host == "" {
		o, err := w.Options()
		if err != nil {
			return nil, err
		}
		return fanout.Open(ctx, o, stateDir, w.Notice, func(rep *workspace.Report, err error) {
			w.Handback(rep.API()) // the root's workspace, synced to a box
			if err != nil {
				w.Notice(err.Error())
			}
		})
	}
	if stateDir != "" {
		return nil, errdefs.New(errdefs.InvalidArgument, "usage", "--state-dir cannot be used with a daemon: its children's clones are in its state directory")
	}
	req, err := w.Request()
	if err != nil {
		return nil, err
	}
	c, root, err := OpenHosted(ctx, w.Host, req, w.Notice)
	if err != nil {
		return nil, err
	}
	return fanout.Hosted(c, root), nil
}

// Settings are the settings a session would have, each with its source: here, or with
// Host the daemon's (its environment, its global file).
func (w Where) Settings(ctx context.Context) ([]api.Setting, error) {
	w = w.filled()
	if w.Host == "" {
		o, err := w.Options()
		if err != nil {
			return nil, err
		}
		return session.Effective(o.Settings), nil
	}
	req, err := w.Request()
	if err != nil {
		return nil, err
	}
	c, err := Dial(w.Host)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	got, err := c.Settings(ctx, req)
	for _, warn := range got.Warnings {
		w.Notice("warning: " + warn)
	}
	return got.Settings, err
}

// Script is a script to run in a session opened for it and closed after, as `paddock run`
// runs one.
type Script struct {
	Script string
	// Output, when set, gets each step's output as it comes: fd 1 or 2, and the bytes.
	Output func(fd int, data []byte)
	// In and Out, when set, are a terminal the session's questions are asked on; unset,
	// a question is refused as unanswered.
	In  io.Reader
	Out io.Writer
}

// Run runs sc in a session opened where w says, and closes it: the script's result and
// what came back of a workspace synced to a box (nil when none was; told to w.Handback
// too). A failure of the hand-back (the box's work kept in a local copy only) is the
// error, with the result all the same.
func (w Where) Run(ctx context.Context, sc Script) (*api.Result, *api.Report, error) {
	w = w.filled()
	tctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if w.Host == "" {
		l, err := w.Open(ctx)
		if err != nil {
			return nil, nil, err
		}
		defer l.Close()
		s := l.Session
		if sc.In != nil {
			t := prompt.New(sc.In, sc.Out, s.Answer)
			defer s.Attach(t)()
			go t.Run(tctx)
		}
		call := orchestrator.Call{Script: sc.Script}
		if sc.Output != nil {
			call.Live = func(_, fd int, data []byte) { sc.Output(fd, data) }
		}
		res, err := s.Run(ctx, call)
		if err != nil {
			// The session is closed all the same, and what its closing says (a hand-back
			// that failed: the box's work in a local copy only) is not lost.
			_, cerr := l.Close()
			return nil, nil, errors.Join(err, cerr)
		}
		rep, err := l.Close()
		return res.API(), rep.API(), err
	}
	req, err := w.Request()
	if err != nil {
		return nil, nil, err
	}
	c, err := Dial(w.Host)
	if err != nil {
		return nil, nil, err
	}
	defer c.Close()
	o := client.RunOptions{Open: req, Script: sc.Script, Opened: func(s api.Session) {
		for _, warn := range s.Warnings {
			w.Notice(warn)
		}
	}}
	if sc.Output != nil {
		o.Output = func(fd int, data string) { sc.Output(fd, []byte(data)) }
	}
	if sc.In != nil {
		prompt.AskFor(tctx, c, &o, sc.In, sc.Out)
	}
	ran, err := c.Run(ctx, o)
	if err != nil {
		return nil, nil, err
	}
	w.Handback(ran.Closed.Handback)
	for _, warn := range ran.Closed.Warnings {
		w.Notice("warning: " + warn)
	}
	if e := ran.Closed.HandbackError; e != "" { // the box's work is in a local copy only
		err = errors.New(e)
	}
	return ran.Bash.Result, ran.Closed.Handback, err
}
