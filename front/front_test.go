package front

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/paddockhq/paddock/config"
	"github.com/paddockhq/paddock/daemon/api"
	"github.com/paddockhq/paddock/errdefs"
	"github.com/paddockhq/paddock/images"
	"github.com/paddockhq/paddock/orchestrator"
	"github.com/paddockhq/paddock/session"
)

// here is a Where of a local session in ws, whose notices and hand-backs are kept; its
// Request must never be asked for.
func here(t *testing.T, ws string) (Where, *[]string) {
	t.Helper()
	if _, err := images.Default.Find(context.Background(), runtime.GOARCH); err != nil {
		t.Fatal(err)
	}
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	var told []string
	return Where{
		Options: func() (session.Options, error) {
			l, err := config.Load(config.Options{Workspace: ws, Set: map[string]any{"kernelTransport.kind": "local"}, SetBy: "test"})
			return session.Options{Workspace: ws, Settings: l}, err
		},
		Request: func() (api.OpenRequest, error) {
			t.Error("a session here asked for a daemon's request")
			return api.OpenRequest{}, nil
		},
		Notice:   func(n string) { told = append(told, n) },
		Handback: func(*api.Report) {},
	}, &told
}

// A script run here: its output as it comes, its result, and nothing handed back (the
// workspace was the session's own).
func TestRunHere(t *testing.T) {
	ws := t.TempDir()
	w, _ := here(t, ws)
	var out strings.Builder
	res, rep, err := w.Run(context.Background(), Script{Script: "cd sub 2>/dev/null || mkdir sub; echo made > sub/f; echo hi; exit 3",
		Output: func(fd int, data []byte) { out.Write(data) }})
	if err != nil {
		t.Fatal(err)
	}
	if res.End.Status != 3 || out.String() != "hi\n" || rep != nil {
		t.Fatalf("result %+v, output %q, hand-back %v", res.End, out.String(), rep)
	}
	if b, err := os.ReadFile(filepath.Join(ws, "sub", "f")); err != nil || string(b) != "made\n" {
		t.Fatalf("the script's file: %q %v", b, err)
	}
}

// A library caller may leave Notice and Handback unset: a script runs here, and its session
// closes, all the same.
func TestRunHereWithoutCallbacks(t *testing.T) {
	w, _ := here(t, t.TempDir())
	w.Notice, w.Handback = nil, nil
	res, rep, err := w.Run(context.Background(), Script{Script: "exit 4"})
	if err != nil || res.End.Status != 4 || rep != nil {
		t.Fatalf("result %+v, hand-back %v, %v", res, rep, err)
	}
	sv, err := w.MCP(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	if err := sv.Close(); err != nil {
		t.Fatal(err)
	}
}

// A step outside the auto set with no terminal is refused as unanswered, the run's result
// says so.
func TestRunHereRefusesUnanswered(t *testing.T) {
	ws := t.TempDir()
	w, _ := here(t, ws)
	res, _, err := w.Run(context.Background(), Script{Script: "cat ~/.ssh/id_rsa"})
	if err != nil {
		t.Fatal(err)
	}
	if res.End.Kind != orchestrator.Refused {
		t.Fatalf("a secret read with nobody to ask ended %+v", res.End)
	}
}

// Served here: the MCP server's session runs steps, and closing it closes the session once.
func TestMCPHere(t *testing.T) {
	w, _ := here(t, t.TempDir())
	ctx := context.Background()
	sv, err := w.MCP(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	if sv.SSH != nil {
		t.Error("an ssh reader with no ssh.hosts")
	}
	res, err := sv.Session.Run(ctx, "echo served", 0, nil)
	if err != nil || !strings.Contains(res.String(), "served") {
		t.Fatalf("%v %v", res, err)
	}
	if err := sv.Close(); err != nil {
		t.Fatal(err)
	}
	if err := sv.Close(); err != nil {
		t.Fatalf("a second close: %v", err)
	}
}

// What names a daemon's state where no daemon is is the caller's to fix, refused before
// anything is opened: a daemon's session to serve with no daemon, a state directory for a
// daemon's children.
func TestDaemonOnlyOptionsRefused(t *testing.T) {
	w, _ := here(t, t.TempDir())
	ctx := context.Background()
	if _, err := w.MCP(ctx, "s-1"); !invalid(err) {
		t.Errorf("--session without a daemon: %v", err)
	}
	hosted := Where{Host: "unix:///nonexistent/paddock.sock", Request: func() (api.OpenRequest, error) {
		t.Error("a request made for a refused fan-out")
		return api.OpenRequest{}, nil
	}}
	if _, err := hosted.Spawner(ctx, t.TempDir()); !invalid(err) {
		t.Errorf("--state-dir with a daemon: %v", err)
	}
}

// The effective settings here are the ones the options read, each with its source.
func TestSettingsHere(t *testing.T) {
	w, _ := here(t, t.TempDir())
	got, err := w.Settings(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range got {
		if s.Key == "kernelTransport.kind" {
			if s.Value != "local" || s.Source != "test" {
				t.Errorf("kernelTransport.kind = %v from %s", s.Value, s.Source)
			}
			return
		}
	}
	t.Error("no kernelTransport.kind among the settings")
}

// invalid reports whether err is the caller's to fix.
func invalid(err error) bool {
	c, _ := errdefs.Of(err)
	return err != nil && c == errdefs.InvalidArgument
}
