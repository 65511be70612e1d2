package orchestrator

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/paddockhq/paddock/policy"
)

// A program the policy judges by its arguments runs none of what a file the script can
// write configures: a script writes ~/.lesskey (an input preprocessor), ~/.curlrc (a file
// to upload, a file to write) and ~/.wgetrc, then runs less, curl and wget as read or net
// steps: no marker appears, no file is written. The session's HOME is inside the workspace,
// so writing those files is an ordinary write.
func TestProgramsIgnoreWrittenConfig(t *testing.T) {
	ws := t.TempDir()
	home := filepath.Join(ws, "home")
	os.MkdirAll(home, 0o755)
	marker := filepath.Join(t.TempDir(), "ran")
	auto, _ := policy.ParseAutoSet([]string{"read", "write", "net"})
	s := openLocal(t, ws, Config{Env: []string{"PATH=/usr/bin:/bin", "HOME=" + home, "LC_ALL=C"}, Policy: Policy{Auto: &auto}})
	ctx := context.Background()
	run := func(script string) *Result {
		t.Helper()
		res, err := s.Bash(ctx, script)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	os.WriteFile(filepath.Join(ws, "f.txt"), []byte("hello\n"), 0o644)
	steps := []string{}
	if _, err := exec.LookPath("less"); err == nil {
		run(`printf '#env\nLESSOPEN=|touch ` + marker + `-less %%s\n' > home/.lesskey`)
		steps = append(steps, "less -F f.txt")
	}
	if _, err := exec.LookPath("curl"); err == nil {
		run(`printf 'output = "` + filepath.Join(ws, "curl-wrote") + `"\nupload-file = "f.txt"\n' > home/.curlrc`)
		steps = append(steps, "curl -s --max-time 2 file://"+filepath.Join(ws, "f.txt"))
	}
	if _, err := exec.LookPath("wget"); err == nil {
		run(`printf 'output_document = ` + filepath.Join(ws, "wget-wrote") + `\n' > home/.wgetrc`)
		steps = append(steps, "wget -q --tries=1 --timeout=2 http://127.0.0.1:1/")
	}
	if len(steps) == 0 {
		t.Skip("none of less, curl, wget is installed")
	}
	for _, st := range steps {
		res := run(st)
		if res.End.Kind == Refused {
			t.Fatalf("%s was asked: %s", st, res)
		}
	}
	left, _ := filepath.Glob(marker + "*")
	for _, name := range []string{"curl-wrote", "wget-wrote"} {
		if _, err := os.Stat(filepath.Join(ws, name)); err == nil {
			left = append(left, name)
		}
	}
	if len(left) != 0 {
		t.Fatalf("a configuration file the script wrote was obeyed: %s", strings.Join(left, ", "))
	}
}
