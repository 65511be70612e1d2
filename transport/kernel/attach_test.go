//go:build linux

package kernel

import (
	"encoding/json"
	"testing"

	"github.com/paddockhq/paddock/transport/wire"
)

// A connection to a listening kernel is served only when its first line is an attach frame
// carrying the kernel's key; nothing else, however malformed, attaches.
func FuzzAttaches(f *testing.F) {
	const key = "the-key"
	f.Add([]byte(`{"event":"attach","body":{"key":"the-key"}}`))
	f.Add([]byte(`{"event":"attach","body":{"key":"the-kez"}}`))
	f.Add([]byte(`{"event":"request","id":"1","type":"exec","body":{"key":"the-key"}}`))
	f.Add([]byte(`{"event":"attach","body":{"key":"the-key","key":"x"}}`))
	f.Add([]byte(`{"event":"attach","body":"the-key"}`))
	f.Add([]byte(`{"event":"attach"}`))
	f.Add([]byte("\xff"))
	f.Fuzz(func(t *testing.T, line []byte) {
		got := attaches(line, key)
		// The oracle: encoding/json's reading of the whole line.
		var fr struct {
			Event string `json:"event"`
			Body  struct {
				Key *string `json:"key"`
			} `json:"body"`
		}
		want := json.Unmarshal(line, &fr) == nil && fr.Event == wire.EventAttach && fr.Body.Key != nil && *fr.Body.Key == key
		if got && !want {
			t.Fatalf("%q attached", line)
		}
	})
}
