package daemon_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"testing/quick"
	"time"

	"github.com/paddockhq/paddock/daemon"
	"github.com/paddockhq/paddock/daemon/api"
	"github.com/paddockhq/paddock/egress"
	"github.com/paddockhq/paddock/orchestrator"
)

// A connection through a session's proxy is an event on the session's stream, with its
// record, and counted in /metrics by verdict and by what decided it, with its bytes.
func TestEgressEventsAndMetrics(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "fetched") }))
	t.Cleanup(srv.Close)
	target := strings.TrimPrefix(srv.URL, "http://")
	allow, err := egress.ParseRules([]string{target})
	if err != nil {
		t.Fatal(err)
	}
	d := startDaemon(t, daemonOptions{more: func(c *orchestrator.Config) {
		c.Egress = &orchestrator.Egress{Allow: allow, Loopback: true}
	}})
	ctx := context.Background()
	s, err := d.c.Open(ctx, api.OpenRequest{Workspace: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	st, err := d.c.Events(ctx, s.ID, api.StreamWatch)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	r, err := d.c.Bash(ctx, s.ID, api.BashRequest{Script: "curl -sS " + srv.URL + "/; echo; curl -sS -o /dev/null -w '%{http_code}' http://192.0.2.1:9/"})
	if err != nil {
		t.Fatal(err)
	}
	if got := stdout(r.Result); got != "fetched\n403" {
		t.Fatalf("the steps printed %q", got)
	}
	seen := map[string]api.Connection{}
	for len(seen) < 2 {
		e := nextKind(t, st, api.EventConnection)
		seen[e.Connection.Target] = *e.Connection
	}
	if c := seen[target]; c.Verdict != "allowed" || c.DecidedBy != "allow_rule" || c.Received == 0 || c.Addr != target {
		t.Errorf("the allowed connection's event: %+v", c)
	}
	if c := seen["192.0.2.1:9"]; c.Verdict != "refused" || c.Code != "unanswered" {
		t.Errorf("the refused connection's event: %+v", c)
	}
	m, err := d.c.Metrics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`paddock_egress_connections_total{verdict="allowed",decided_by="allow_rule"} 1`,
		`paddock_egress_connections_total{verdict="refused",decided_by="unanswered"} 1`,
		fmt.Sprintf("paddock_egress_received_bytes_total %d", seen[target].Received),
	} {
		if !strings.Contains(m, want+"\n") {
			t.Errorf("/metrics lacks %q:\n%s", want, m)
		}
	}
}

// A connection's API form is its record: the same JSON, byte for byte, for any record.
func TestConnectionFormMatches(t *testing.T) {
	t.Parallel()
	f := func(r egress.Record) bool {
		a, _ := json.Marshal(r)
		b, _ := json.Marshal(daemon.ConnectionOf(r))
		if string(a) != string(b) {
			t.Errorf("record %s\nform   %s", a, b)
			return false
		}
		return true
	}
	word := func(r *rand.Rand) string {
		if r.Intn(4) == 0 {
			return "" // left out when empty
		}
		s, _ := quick.Value(reflect.TypeFor[string](), r)
		return s.String()
	}
	cfg := &quick.Config{MaxCount: 300, Values: func(v []reflect.Value, r *rand.Rand) {
		v[0] = reflect.ValueOf(egress.Record{
			Time:   time.Unix(r.Int63n(1<<33), r.Int63n(1e9)).UTC(), // UTC, as the proxy makes it
			Method: word(r), Target: word(r), Host: word(r), Port: uint16(r.Intn(1 << 16)), Addr: word(r),
			Verdict: word(r), DecidedBy: word(r), Rule: word(r), Code: word(r), Question: word(r), At: word(r), By: word(r),
			Sent: r.Int63(), Received: r.Int63(), Duration: time.Duration(r.Int63()),
		})
	}}
	if err := quick.Check(f, cfg); err != nil {
		t.Error(err)
	}
}
