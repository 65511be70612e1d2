package daemon

import (
	"os"
	"testing"

	"github.com/paddockhq/paddock/daemon/api"
)

// The entry's table holds: every state is reached and can end; a removed entry takes no
// move, and closing one that ended keeps it ended.
func TestEntryLife(t *testing.T) {
	t.Parallel()
	if err := entryLife.Check(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		from string
		evs  []entryEvent
		want entryState
	}{
		{"closed", api.Open, []entryEvent{entryClose, entryRemove}, entryGone},
		{"closed, not yet removed", api.Open, []entryEvent{entryClose}, entryClosed},
		{"lost", api.Open, []entryEvent{entryLost}, entryEnded},
		{"ended, then closed", api.Ended, []entryEvent{entryClose}, entryEnded},
		{"ended, lost again", api.Ended, []entryEvent{entryLost}, entryEnded},
		{"removed, then closed", api.Open, []entryEvent{entryRemove, entryClose, entryLost}, entryGone},
		{"removed twice", api.Closed, []entryEvent{entryRemove, entryRemove}, entryGone},
	} {
		e := &entry{info: api.Session{State: tc.from}}
		for _, ev := range tc.evs {
			e.move(ev)
		}
		if got := e.state(); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, got, tc.want)
		}
	}
	// A gone entry saves nothing.
	e := &entry{info: api.Session{State: api.Open}, dir: t.TempDir() + "/no"}
	e.move(entryRemove)
	if err := e.save(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(e.dir); !os.IsNotExist(err) {
		t.Fatalf("a removed entry was saved: %v", err)
	}
}
