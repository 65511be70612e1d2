package daemon_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"testing/quick"
	"time"

	"github.com/paddockhq/paddock/daemon"
	"github.com/paddockhq/paddock/daemon/api"
	"github.com/paddockhq/paddock/egress"
	"github.com/paddockhq/paddock/errdefs"
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

// The API's forms of the tree requests and edits are the orchestrator's: any value of one,
// written as JSON, reads into the other with no field left over and writes back the same,
// byte for byte. (The API owns its types so that the Go client links no engine.)
func TestFSFormsMatch(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewSource(1))
	for _, pair := range [][2]any{
		{&orchestrator.FSPathRequest{}, &api.FSPathRequest{}}, {&orchestrator.FSEntry{}, &api.FSEntry{}},
		{&orchestrator.FSListReply{}, &api.FSListReply{}}, {&orchestrator.FSGlobRequest{}, &api.FSGlobRequest{}},
		{&orchestrator.FSGlobReply{}, &api.FSGlobReply{}}, {&orchestrator.FSGrepRequest{}, &api.FSGrepRequest{}},
		{&orchestrator.FSGrepReply{}, &api.FSGrepReply{}}, {&orchestrator.FSEditRequest{}, &api.FSEditRequest{}},
		{&orchestrator.FSEditReply{}, &api.FSEditReply{}}, {&orchestrator.FSReadRequest{}, &api.FSReadRequest{}},
		{&orchestrator.FSWriteRequest{}, &api.FSWriteRequest{}}, {&orchestrator.FSReply{}, &api.FSReply{}},
	} {
		for range 200 {
			fill(r, reflect.ValueOf(pair[0]).Elem())
			a, _ := json.Marshal(pair[0])
			form := reflect.New(reflect.TypeOf(pair[1]).Elem()).Interface()
			dec := json.NewDecoder(strings.NewReader(string(a)))
			dec.DisallowUnknownFields()
			if err := dec.Decode(form); err != nil {
				t.Fatalf("%T into %T: %v\n%s", pair[0], form, err, a)
			}
			if b, _ := json.Marshal(form); string(a) != string(b) {
				t.Fatalf("%T: the record's JSON\n%s\nits API form's\n%s", pair[0], a, b)
			}
		}
	}
}

// fill gives v random contents: strings, numbers, booleans, UTC times, slices of up to three.
func fill(r *rand.Rand, v reflect.Value) {
	switch {
	case v.Type() == reflect.TypeFor[time.Time]():
		v.Set(reflect.ValueOf(time.Unix(r.Int63n(1<<33), r.Int63n(1e9)).UTC()))
		return
	}
	switch v.Kind() {
	case reflect.String:
		if r.Intn(3) > 0 {
			s, _ := quick.Value(v.Type(), r)
			v.Set(s)
		} else {
			v.SetString("")
		}
	case reflect.Bool:
		v.SetBool(r.Intn(2) == 0)
	case reflect.Int, reflect.Int64, reflect.Int32:
		v.SetInt(r.Int63n(1<<31) - 1<<30)
	case reflect.Uint32, reflect.Uint16, reflect.Uint64:
		v.SetUint(uint64(r.Int63n(1 << 16)))
	case reflect.Slice:
		n := r.Intn(4)
		s := reflect.MakeSlice(v.Type(), n, n)
		for i := range n {
			fill(r, s.Index(i))
		}
		v.Set(s)
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				fill(r, v.Field(i))
			}
		}
	}
}

// A named shell continues: cd and exports hold from one call to the next of the same name,
// and the answer says where the shell is; another name, or none, starts where the session
// does. The session keeps a bounded number of them.
func TestNamedShells(t *testing.T) {
	d := startDaemon(t, daemonOptions{})
	ctx := context.Background()
	ws := t.TempDir()
	os.Mkdir(filepath.Join(ws, "sub"), 0o755)
	s, err := d.c.Open(ctx, api.OpenRequest{Workspace: ws})
	if err != nil {
		t.Fatal(err)
	}
	if s.Cwd != ws {
		t.Errorf("the session says it starts in %q, want %q", s.Cwd, ws)
	}
	bash := func(shell, script string) api.BashResponse {
		t.Helper()
		r, err := d.c.Bash(ctx, s.ID, api.BashRequest{Script: script, Shell: shell})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	if r := bash("a", "cd sub && export X=1"); r.Cwd != filepath.Join(ws, "sub") {
		t.Errorf("shell a after cd: %q", r.Cwd)
	}
	if got := stdout(bash("a", "pwd; echo $X").Result); got != filepath.Join(ws, "sub")+"\n1\n" {
		t.Errorf("shell a again: %q", got)
	}
	if got := stdout(bash("b", "pwd; echo ${X:-unset}").Result); got != ws+"\nunset\n" {
		t.Errorf("shell b: %q", got)
	}
	if r := bash("", "pwd"); stdout(r.Result) != ws+"\n" || r.Cwd != "" {
		t.Errorf("no shell: %q, cwd %q", stdout(r.Result), r.Cwd)
	}
	// Past the bound, the shell used least recently is forgotten: a's next call starts
	// afresh; b, used since, is kept.
	bash("b", "cd sub")
	for i := range 64 - 1 { // a, b and 62 of these fill the bound; the last passes it
		bash(fmt.Sprint("many-", i), "true")
	}
	if got := stdout(bash("b", "pwd").Result); got != filepath.Join(ws, "sub")+"\n" {
		t.Errorf("shell b, used more recently: %q", got)
	}
	if got := stdout(bash("a", "pwd").Result); got != ws+"\n" {
		t.Errorf("shell a after the bound was passed: %q, want it started afresh", got)
	}
	_, err = d.c.Bash(ctx, s.ID, api.BashRequest{Script: "true", Shell: strings.Repeat("n", 129)})
	if c, _ := errdefs.Of(err); c != errdefs.InvalidArgument {
		t.Errorf("a name past the bound: %v", err)
	}
}
