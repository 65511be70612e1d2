package orchestrator

import (
	"maps"
	"sync"

	"mvdan.cc/sh/v3/expand"

	"github.com/paddockhq/paddock/script"
)

// Shell is a shell that calls continue one after another, as an agent's shell tool expects:
// the working directory, the variables and the exports one call's steps leave hold for the
// next call given the same Shell. A call leaves its state only when it settles with its
// script's end: a call that detached (its script going on as a job) leaves the Shell as it
// was, as a background job leaves its shell, and so does a script outside the grammar (run
// whole by bash -c, where the host does not see what cd does). The zero Shell starts where
// the session does. It is safe for concurrent use: overlapping calls each start from what
// the last one to end left.
type Shell struct {
	mu     sync.Mutex
	set    bool                       // guarded by mu: a call has left its state
	cwd    string                     // guarded by mu
	vars   map[string]expand.Variable // guarded by mu
	status int                        // guarded by mu
}

// Cwd is the sandbox directory the next call starts in; "" before any call left one.
func (sh *Shell) Cwd() string {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	return sh.cwd
}

// load puts the shell's state in st, a call's fresh state.
func (sh *Shell) load(st *script.State) {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if !sh.set {
		return
	}
	st.Cwd, st.Status = sh.cwd, sh.status
	st.Vars = maps.Clone(sh.vars)
}

// keep takes what a call's steps left.
func (sh *Shell) keep(st *script.State) {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	sh.set, sh.cwd, sh.status = true, st.Cwd, st.Status
	sh.vars = maps.Clone(st.Vars)
}
