package prompt

import (
	"bytes"
	"context"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/creack/pty"

	"github.com/paddockhq/paddock/images"
	"github.com/paddockhq/paddock/orchestrator"
	"github.com/paddockhq/paddock/policy"
	"github.com/paddockhq/paddock/transport/local"
)

func TestEscape(t *testing.T) {
	for in, want := range map[string]string{
		"plain text":     "plain text",
		"tab\tok":        "tab\tok",
		"esc\x1b[31m":    `esc$'\x1b'[31m`,
		"bell\a":         `bell$'\x07'`,
		"rtl\u202eevil":  `rtl$'\u202e'evil`,
		"del\x7f":        `del$'\x7f'`,
		"cr\rhidden":     `cr$'\x0d'hidden`,
		"isolate\u2066x": `isolate$'\u2066'x`,
	} {
		if got := Escape(in); got != want {
			t.Errorf("Escape(%q) = %q, want %q", in, got, want)
		}
	}
}

// readUntil reads from r until the text holds want or the deadline passes.
func readUntil(t *testing.T, r *os.File, want string) string {
	t.Helper()
	var got bytes.Buffer
	buf := make([]byte, 4096)
	r.SetReadDeadline(time.Now().Add(20 * time.Second))
	for !strings.Contains(got.String(), want) {
		n, err := r.Read(buf)
		got.Write(buf[:n])
		if err != nil {
			t.Fatalf("waiting for %q: %v; read %q", want, err, got.String())
		}
	}
	return got.String()
}

// On a real pseudo-terminal: the prompt names the subagent, shows a control character
// escaped and keeps every line; Enter alone denies.
func TestTerminalOnPTY(t *testing.T) {
	master, tty, err := pty.Open()
	if err != nil {
		t.Fatalf("no pseudo-terminal: %v", err)
	}
	defer master.Close()
	defer tty.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	kernel, err := images.Default.Find(ctx, runtime.GOARCH)
	if err != nil {
		t.Fatal(err)
	}
	auto, _ := policy.ParseAutoSet([]string{"read"})
	root, err := orchestrator.Open(ctx, orchestrator.Config{
		Workspace: t.TempDir(), Transport: &local.Transport{}, Kernel: kernel,
		Env: []string{"PATH=/usr/bin:/bin"}, Policy: orchestrator.Policy{Auto: &auto},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	term := New(tty, tty, root.Answer)
	defer root.Attach(term)()
	go term.Run(ctx)
	child, err := root.Spawn(ctx, orchestrator.ChildConfig{Name: "builder"})
	if err != nil {
		t.Fatal(err)
	}
	defer child.Close()
	type outcome struct {
		res *orchestrator.Result
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		res, err := child.Bash(ctx, "echo $'\\e[31mred\\nsecond line' > out.txt")
		done <- outcome{res, err}
	}()
	screen := readUntil(t, master, "[N]o: ")
	if !strings.Contains(screen, "subagent builder") {
		t.Errorf("the prompt does not name the subagent:\n%s", screen)
	}
	if strings.Contains(screen, "\x1b") || !strings.Contains(screen, `\E[31m`) && !strings.Contains(screen, `\x1b[31m`) {
		t.Errorf("the control character is not shown escaped:\n%q", screen)
	}
	if !strings.Contains(screen, "second line") {
		t.Errorf("a line of the step is missing:\n%q", screen)
	}
	master.Write([]byte("\r")) // Enter alone
	o := <-done
	if o.err != nil || o.res.End.Kind != orchestrator.Refused || o.res.End.Code != "denied" {
		t.Fatalf("Enter alone: %v %+v", o.err, o.res)
	}
}
