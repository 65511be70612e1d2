package client

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"testing"

	"github.com/paddockhq/paddock/daemon/api"
)

// streamOf serves one session's event stream made of body, as a daemon frames it, on a unix
// socket, and returns a client of it. The daemon never sends a broken record; this stand-in
// does, so that the client's reading of one can be seen (the daemon's tests follow real
// streams).
func streamOf(t *testing.T, body string) *Client {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "s")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, ": paddock event stream\n\n"+body)
	}))
	srv.Listener = l
	srv.Start()
	t.Cleanup(srv.Close)
	c, err := New("unix://" + sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

func event(kind, data string) string { return fmt.Sprintf("event: %s\ndata: %s\n\n", kind, data) }

// Follow hands over every event in order up to the session's close and none after it; a
// stream that ends is not an error, one that breaks is.
func TestStreamFollow(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name, body string
		want       []string
		fails      bool
	}{
		{"closed", event("output", `{"kind":"output","output":{"fd":1,"data":"hi"}}`) + event("closed", `{"kind":"closed"}`) +
			event("output", `{"kind":"output"}`), []string{"output", "closed"}, false},
		{"ended", event("job_end", `{"kind":"job_end"}`), []string{"job_end"}, false},
		{"broken", event("output", `{"kind":"output"}`) + event("output", `{"kind":`), []string{"output"}, true},
	} {
		st, err := streamOf(t, c.body).Events(context.Background(), "s", api.StreamWatch)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		err = st.Follow(func(e api.Event) { got = append(got, e.Kind) })
		st.Close()
		if (err != nil) != c.fails || !slices.Equal(got, c.want) {
			t.Errorf("%s: events %v, err %v; want %v, failing %v", c.name, got, err, c.want, c.fails)
		}
	}
}

// A run's output event that lacks its part is skipped, not a panic.
func TestRunOutputWithoutPart(t *testing.T) {
	t.Parallel()
	st, err := streamOf(t, event("output", `{"kind":"output"}`)+event("closed", `{"kind":"closed"}`)).Events(context.Background(), "s", api.StreamWatch)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var out []string
	o := RunOptions{Output: func(_ int, data string) { out = append(out, data) }}
	if err := st.Follow(func(e api.Event) { runEvent(o, e) }); err != nil || len(out) != 0 {
		t.Errorf("output %v, err %v", out, err)
	}
}
