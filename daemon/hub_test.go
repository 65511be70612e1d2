package daemon

import (
	"strings"
	"testing"

	"github.com/paddockhq/paddock/daemon/api"
)

// A reader that does not read has its stream cut once what it would hold passes a bound in
// number of events or in output bytes, whichever comes first: a kernel that sends frames of
// tens of megabytes cannot make the daemon hold them by the thousand. A reader that keeps up
// is never cut.
func TestStreamBoundedInBytes(t *testing.T) {
	big := strings.Repeat("x", 8<<20)
	for _, tc := range []struct {
		name  string
		data  string
		cutAt int // the event whose push cuts the stream
	}{
		{"large output", big, maxQueueBytes / (len(big) + 256)},
		{"many events", "", maxQueue},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHub("s")
			s := h.subscribe(api.StreamWatch) // a reader that reads nothing
			cut := func() bool {
				s.mu.Lock()
				defer s.mu.Unlock()
				return s.cut
			}
			for range tc.cutAt {
				h.publish(api.Event{Kind: api.EventOutput, Output: &api.Output{Data: tc.data}})
			}
			if cut() {
				t.Fatalf("cut before the bound (%d events)", tc.cutAt)
			}
			h.publish(api.Event{Kind: api.EventOutput, Output: &api.Output{Data: tc.data}})
			if !cut() {
				t.Fatalf("not cut past the bound (%d events)", tc.cutAt)
			}
			r := h.subscribe(api.StreamWatch)
			for range 2 * tc.cutAt {
				h.publish(api.Event{Kind: api.EventOutput, Output: &api.Output{Data: tc.data}})
				if _, cut := r.take(); cut {
					t.Fatal("a reader that keeps up was cut")
				}
			}
		})
	}
}
