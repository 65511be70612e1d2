package daemon

import (
	"github.com/paddockhq/paddock/daemon/api"
	"github.com/paddockhq/paddock/internal/lifecycle"
)

// The life of a daemon's record of a session (an entry): the session's state as the API
// reports it, then gone once its state directory is removed. An entry changes its state only
// through move, under its lock; what it holds is e.info.State and e.gone.

// entryState is where an entry is in its life.
type entryState string

const (
	entryOpen   entryState = api.Open   // its session takes requests
	entryEnded  entryState = api.Ended  // its kernel ended while no daemon held it; listed with the reason
	entryClosed entryState = api.Closed // closed through the API; its last description is being made
	entryGone   entryState = "gone"     // its state directory is removed; nothing is saved any more
)

// entryEvent is what moves an entry.
type entryEvent string

const (
	entryLost   entryEvent = "lost"   // a new daemon could not take its session up
	entryClose  entryEvent = "close"  // the API closed it
	entryRemove entryEvent = "remove" // its state directory goes (closed, or a scripted child's end)
)

var entryLife = lifecycle.Machine[entryState, entryEvent]{
	Name:  "daemon entry",
	Start: entryOpen,
	Moves: map[entryState]map[entryEvent]entryState{
		entryOpen:   {entryLost: entryEnded, entryClose: entryClosed, entryRemove: entryGone},
		entryEnded:  {entryRemove: entryGone},
		entryClosed: {entryRemove: entryGone},
	},
}

// state is where the entry is; the caller holds mu, or the entry is not yet shared.
func (e *entry) state() entryState {
	if e.gone {
		return entryGone
	}
	return entryState(e.info.State)
}

// move moves the entry on ev; ok is false (and nothing changes) when the table holds no such
// move from where it is. The caller holds mu, or the entry is not yet shared.
func (e *entry) move(ev entryEvent) bool {
	to, ok := entryLife.Next(e.state(), ev)
	if !ok {
		return false
	}
	if to == entryGone {
		e.gone = true
	} else {
		e.info.State = string(to)
	}
	return true
}
