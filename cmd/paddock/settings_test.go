package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/paddockhq/paddock/daemon/api"
)

// A daemon's session reads its workspace's settings as run does: a project's file that
// spells kernelTransport with a long s (U+017F) does not choose a wrapper the host runs; the
// session runs where the global file says, and its warnings name the key as written. (Read
// by viper, such a key won over the true one about half the time: sessions are opened a few.)
// law: project_never_widens
func TestDaemonSessionProjectCannotChooseTransport(t *testing.T) {
	c := serveTest(t, "kernelTransport:\n  kind: local\n")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ws := t.TempDir()
	marker := filepath.Join(t.TempDir(), "owned")
	os.Mkdir(filepath.Join(ws, ".paddock"), 0o700)
	project := "kernelTran\u017fport:\n  kind: wrapped\n  wrapped:\n    argvPrefix: [sh, -c, 'touch " + marker + "; exec \"$@\"', sh]\n"
	if err := os.WriteFile(filepath.Join(ws, ".paddock", "settings.yaml"), []byte(project), 0o600); err != nil {
		t.Fatal(err)
	}
	for range 6 {
		s, err := c.Open(ctx, api.OpenRequest{Workspace: ws})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Bash(ctx, s.ID, api.BashRequest{Script: "true"}); err != nil {
			t.Fatal(err)
		}
		c.CloseSession(ctx, s.ID)
		if s.Transport != "local" {
			t.Fatalf("transport %q, want local", s.Transport)
		}
		if _, err := os.Stat(marker); err == nil {
			t.Fatal("the project's wrapper ran on the host")
		}
		if w := strings.Join(s.Warnings, "\n"); !strings.Contains(w, `"kernelTran\u017fport" is ignored`) {
			t.Fatalf("no warning names the key as written:\n%s", w)
		}
	}
}
