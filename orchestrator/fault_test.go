package orchestrator

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/paddockhq/paddock/transport/local"
	"github.com/paddockhq/paddock/transport/wire"
)

// A kernel that sends a frame the host cannot answer is replaced, loudly, and the request in
// flight fails with the fault. The misbehaving kernel is a real process on the local
// transport: a shell script that answers ping, then writes a line that is not UTF-8 on its
// first start and behaves on the next.
func TestProtocolFaultReplacesKernel(t *testing.T) {
	dir := t.TempDir()
	marker := filepath.Join(dir, "started-once")
	kernel := filepath.Join(dir, "bad-kernel")
	script := `#!/bin/sh
read line
echo '{"event":"reply","id":"1","status":"ok","body":{}}'
read line
if [ -e ` + marker + ` ]; then
  echo '{"event":"reply","id":"2","status":"ok","body":{"statuses":[{"code":0}]}}'
else
  touch ` + marker + `
  printf '{"event":"stream","id":"2","data":"\377"}\n'
fi
cat >/dev/null
`
	if err := os.WriteFile(kernel, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	s, err := Open(context.Background(), Config{
		Workspace: dir, Transport: &local.Transport{}, Kernel: kernel,
		Env: []string{"PATH=/usr/bin:/bin"}, Log: slog.New(slog.NewTextHandler(&logs, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	_, err = s.Bash(context.Background(), "true")
	var pf *wire.ProtocolFault
	if !errors.As(err, &pf) {
		t.Fatalf("the request in flight failed with %v, want a ProtocolFault", err)
	}
	res, err := s.Bash(context.Background(), "true")
	if err != nil || res.End.Kind != Finished {
		t.Fatalf("after the fault: %v, %+v", err, res)
	}
	if !strings.Contains(logs.String(), "level=ERROR") || !strings.Contains(logs.String(), "protocol fault") {
		t.Fatalf("the replacement was not logged as an error:\n%s", logs.String())
	}
}
