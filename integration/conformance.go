// Package integration holds Paddock's end-to-end tests against real peers (a Docker engine,
// and later containerd and OpenSSH) and the transport conformance suite every backend runs:
// RunConformance takes a factory of the backend under test and checks the contract of
// transport.Transport through a real session.
package integration

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/paddockhq/paddock/internal/await"
	"github.com/paddockhq/paddock/orchestrator"
	"github.com/paddockhq/paddock/transport"
	"github.com/paddockhq/paddock/transport/pathmap"
	"github.com/paddockhq/paddock/transport/wire"
)

// Env is one backend under test, made fresh for each conformance test.
type Env struct {
	// Transport is the backend.
	Transport transport.Transport
	// Kernel is the kernel binary's host path, given to the transport in Spec.Kernel.
	Kernel string
	// KernelInSandbox is the kernel binary's path as programs in the sandbox see it.
	KernelInSandbox string
	// Workspace is a host directory the sandbox sees (through PathMap); the sessions work
	// there.
	Workspace string
	// PathMap maps the sandbox's paths to the host's; nil is the identity (local).
	PathMap *pathmap.Map
	// Environ gives the kernel's environment from the host's, passing the host variables
	// named (environ.Local or environ.Sandbox).
	Environ func(host, names []string) []string
	// HidesProcCwd: the sandbox's kernel does not show another process's /proc/PID/cwd
	// (gVisor's answers EINVAL), so the kernel's own working directory is known by its
	// container's spec alone (a unit test of the spec holds it) and the suite checks the
	// working directories of the commands it runs.
	HidesProcCwd bool
	// Ephemeral: the sandbox is fresh and removed at its end (a container, a pod), so a path
	// under none of its mounts is its own, not the host's (orchestrator.Config.Ephemeral).
	Ephemeral bool
	// Listens: the kernels listen (transport.Spec.Listen) and live on when their
	// connection's input ends, as they must to outlive their host: Kill, not the end of
	// stdin, is what ends them, and nothing may be left after it either.
	Listens bool
	// Leftovers returns what is left, after a session of this id ended, of the session's
	// sandbox and of the processes named (pids as the sandbox sees them); nothing is nil.
	Leftovers func(ctx context.Context, session string, pids []int) []string
}

// Timeout bounds each test that takes its context from testContext. It is a guard against
// a hang, not a measure: the differential scripts through gVisor under the whole suite's
// load on two cores took over a minute, so the bound is far past any test's length.
const Timeout = 5 * time.Minute

// RunConformance runs the transport conformance suite against the backend newEnv makes.
// Every later transport runs it unchanged.
func RunConformance(t *testing.T, newEnv func(t *testing.T) Env) {
	for _, tc := range []struct {
		name string
		run  func(t *testing.T, e Env)
	}{
		{"Start", testStart},
		{"FramesBothWays", testFramesBothWays},
		{"PipesAndRedirections", testPipesAndRedirections},
		{"OutputStreams", testOutputStreams},
		{"SignalKillsGroup", testSignalKillsGroup},
		{"StdinEOFEndsKernel", testStdinEOF},
		{"EnvironmentWithoutCredentials", testEnvironment},
		{"WorkingDirectory", testWorkingDirectory},
		{"CwdOutsideRefused", testCwdOutside},
	} {
		t.Run(tc.name, func(t *testing.T) { tc.run(t, newEnv(t)) })
	}
}

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), Timeout)
	t.Cleanup(cancel)
	return ctx
}

// open opens a session on e, closed at the end of the test.
func open(t *testing.T, ctx context.Context, e Env, handlers map[string]orchestrator.Handler, hostEnv, names []string) *orchestrator.Session {
	t.Helper()
	if hostEnv == nil {
		hostEnv = os.Environ()
	}
	s, err := orchestrator.Open(ctx, orchestrator.Config{
		Workspace: e.Workspace,
		Transport: e.Transport,
		Kernel:    e.Kernel,
		Env:       e.Environ(hostEnv, names),
		PathMap:   e.PathMap,
		Ephemeral: e.Ephemeral,
		Handlers:  handlers,
	})
	if err != nil {
		t.Fatalf("open a session: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// bash runs a script and returns its result, failing the test on an error.
func bash(t *testing.T, ctx context.Context, s *orchestrator.Session, src string) *orchestrator.Result {
	t.Helper()
	res, err := s.Bash(ctx, src)
	if err != nil {
		t.Fatalf("%s: %v", src, err)
	}
	return res
}

func stdout(res *orchestrator.Result) string {
	var b strings.Builder
	for _, s := range res.Steps {
		b.WriteString(s.Stdout.Text)
	}
	return b.String()
}

func sandboxCwd(t *testing.T, e Env) string {
	t.Helper()
	if e.PathMap == nil {
		return e.Workspace
	}
	cwd, err := e.PathMap.ToSandbox(e.Workspace)
	if err != nil {
		t.Fatalf("the workspace is not seen from the sandbox: %v", err)
	}
	return cwd
}

// The kernel starts and answers ping as a Linux kernel, with a pid.
func testStart(t *testing.T, e Env) {
	ctx := testContext(t)
	s := open(t, ctx, e, nil, nil, nil)
	h, err := s.Ping(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if h.OS != "linux" || h.PID <= 0 || h.HostSocket == "" {
		t.Fatalf("ping answered %+v", h)
	}
}

// Frames go host -> kernel (requests) and kernel -> host (a program's host request, relayed
// through the kernel's socket), and the host's reply reaches the program.
func testFramesBothWays(t *testing.T, e Env) {
	ctx := testContext(t)
	var got []string
	var mu sync.Mutex
	handlers := map[string]orchestrator.Handler{
		"test.echo": func(_ context.Context, req orchestrator.HostRequest) (any, error) {
			var body struct{ Word string }
			if err := req.Decode(&body); err != nil {
				return nil, err
			}
			mu.Lock()
			got = append(got, body.Word)
			mu.Unlock()
			return map[string]string{"echo": strings.ToUpper(body.Word)}, nil
		},
	}
	s := open(t, ctx, e, handlers, nil, nil)
	res := bash(t, ctx, s, e.KernelInSandbox+` host test.echo '{"word":"ping"}'`)
	if res.End.Status != 0 {
		t.Fatalf("host request failed: %s", res)
	}
	if out := stdout(res); !strings.Contains(out, `"echo":"PING"`) {
		t.Fatalf("the program got %q, not the host's reply", out)
	}
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(got, []string{"ping"}) {
		t.Fatalf("the handler saw %q", got)
	}
	// A type the host does not serve: one typed refusal, the program told so.
	res = bash(t, ctx, s, e.KernelInSandbox+` host test.unserved '{}'`)
	if res.End.Status == 0 || !strings.Contains(res.Steps[0].Stderr.Text, "unknown_type") && !strings.Contains(res.Steps[0].Stderr.Text, "not serve") {
		t.Fatalf("an unserved host request: %s", res)
	}
}

// A pipeline runs joined by pipes; redirections open files in the sandbox, which the host
// sees in the workspace.
func testPipesAndRedirections(t *testing.T, e Env) {
	ctx := testContext(t)
	s := open(t, ctx, e, nil, nil, nil)
	res := bash(t, ctx, s, `printf 'b\nc\na\n' | sort | head -n 2 > sorted.txt; cat < sorted.txt; echo more >> sorted.txt; ls nothing-here 2>err.txt; cat err.txt sorted.txt &> both.txt`)
	if res.End.Status != 0 {
		t.Fatalf("script failed: %s", res)
	}
	if out := stdout(res); out != "a\nb\n" {
		t.Fatalf("pipeline through a redirection gave %q", out)
	}
	b, err := os.ReadFile(filepath.Join(e.Workspace, "sorted.txt"))
	if err != nil || string(b) != "a\nb\nmore\n" {
		t.Fatalf("sorted.txt on the host: %q, %v", b, err)
	}
	b, err = os.ReadFile(filepath.Join(e.Workspace, "both.txt"))
	if err != nil || !strings.Contains(string(b), "nothing-here") || !strings.HasSuffix(string(b), "a\nb\nmore\n") {
		t.Fatalf("both.txt on the host: %q, %v", b, err)
	}
}

// Output reaches the host while the step still runs: the step waits for a file the host
// makes only once it has seen the step's first line.
func testOutputStreams(t *testing.T, e Env) {
	ctx := testContext(t)
	s := open(t, ctx, e, nil, nil, nil)
	var once sync.Once
	seen := make(chan struct{})
	call := orchestrator.Call{
		Script: `echo first; while [ ! -e go ]; do sleep 0.02; done; echo second`,
		Live: func(_, fd int, data []byte) {
			if fd == 1 && strings.Contains(string(data), "first") {
				once.Do(func() {
					close(seen)
					os.WriteFile(filepath.Join(e.Workspace, "go"), nil, 0o644)
				})
			}
		},
	}
	res, err := s.Run(ctx, call)
	if err != nil {
		t.Fatalf("the step did not end (was its output streamed?): %v", err)
	}
	select {
	case <-seen:
	default:
		t.Fatal("the first line never came live")
	}
	if out := stdout(res); out != "first\nsecond\n" {
		t.Fatalf("output %q", out)
	}
}

// Cancelling a running step signals its process group: every process of it, background
// ones too, ends.
func testSignalKillsGroup(t *testing.T, e Env) {
	ctx := testContext(t)
	s := open(t, ctx, e, nil, nil, nil)
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	var once sync.Once
	_, err := s.Run(runCtx, orchestrator.Call{
		Script: `sleep 1000 & echo $! > bg.pids; sleep 1001 & echo $! >> bg.pids; echo ready; wait`,
		Live: func(_, fd int, data []byte) {
			if strings.Contains(string(data), "ready") {
				once.Do(cancel)
			}
		},
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("a cancelled step returned %v", err)
	}
	pids := readPids(t, filepath.Join(e.Workspace, "bg.pids"))
	if len(pids) != 2 {
		t.Fatalf("bg.pids holds %v", pids)
	}
	// A killed process is gone once its parent has reaped it: give that a moment.
	for _, pid := range pids {
		// The one bounded poll: a process in the sandbox is seen from the host only
		// through a step that asks after it.
		pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		err := await.Poll(pctx, 20*time.Millisecond, func() bool {
			return bash(t, ctx, s, fmt.Sprintf(`sh -c 'kill -0 %d 2>/dev/null'`, pid)).End.Status != 0
		})
		cancel()
		if err != nil {
			t.Fatalf("process %d of the signalled group still runs", pid)
		}
	}
}

func readPids(t *testing.T, file string) []int {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var pids []int
	for _, f := range strings.Fields(string(b)) {
		n, err := strconv.Atoi(f)
		if err != nil {
			t.Fatalf("%s holds %q", file, b)
		}
		pids = append(pids, n)
	}
	return pids
}

// Closing the kernel's stdin ends it: Wait returns, and nothing of the session is left (no
// process it started, no sandbox the transport made for it).
func testStdinEOF(t *testing.T, e Env) {
	ctx := testContext(t)
	session := "conformance-eof-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	k, err := e.Transport.Start(ctx, transport.Spec{
		Session: session,
		Kernel:  e.Kernel,
		Env:     e.Environ(os.Environ(), nil),
		Cwd:     sandboxCwd(t, e),
		PathMap: e.PathMap,
		Labels:  map[string]string{"paddock.session": session},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { k.Kill() })
	c := newClient(k)
	hello, err := c.ping(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// A process that would outlive its step: it leaves the step's group and sleeps on.
	out, err := c.exec(ctx, wire.Exec{Cwd: sandboxCwd(t, e), Env: e.Environ(os.Environ(), nil), Shell: true,
		Commands: []wire.Command{{Argv: []string{`setsid sleep 1000 </dev/null >/dev/null 2>&1 & echo $!`}}}})
	if err != nil {
		t.Fatal(err)
	}
	bg, err := strconv.Atoi(strings.TrimSpace(out))
	if err != nil {
		t.Fatalf("the step printed %q", out)
	}
	end := k.Stdin().Close
	if e.Listens {
		end = k.Kill
	}
	if err := end(); err != nil {
		t.Fatal(err)
	}
	waited := make(chan error, 1)
	go func() { waited <- k.Wait() }()
	select {
	case <-waited:
	case <-ctx.Done():
		t.Fatal("the kernel did not end after its stdin closed")
	}
	pids := []int{hello.PID, bg}
	var left []string
	// The one bounded poll: what an engine or a sandbox still holds is seen only by asking.
	lctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if await.Poll(lctx, 50*time.Millisecond, func() bool {
		left = e.Leftovers(ctx, session, pids)
		return len(left) == 0
	}) != nil {
		t.Fatalf("left behind after stdin EOF: %v", left)
	}
}

// The kernel and its commands see the environment built for them: a named host variable
// passes, a credential never does, not even in the kernel's own environment.
func testEnvironment(t *testing.T, e Env) {
	ctx := testContext(t)
	secret := "sekrit-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	t.Setenv("PADDOCK_CONFORMANCE_API_KEY", secret)
	t.Setenv("PADDOCK_CONFORMANCE_PLAIN", "visible")
	s := open(t, ctx, e, nil, os.Environ(), []string{"PADDOCK_CONFORMANCE_API_KEY", "PADDOCK_CONFORMANCE_PLAIN"})
	h, err := s.Ping(ctx)
	if err != nil {
		t.Fatal(err)
	}
	res := bash(t, ctx, s, fmt.Sprintf(`env; tr '\0' '\n' < /proc/%d/environ`, h.PID))
	out := stdout(res)
	if !strings.Contains(out, "PADDOCK_CONFORMANCE_PLAIN=visible\n") {
		t.Errorf("the named variable did not pass:\n%s", out)
	}
	if strings.Contains(out, secret) || strings.Contains(out, "PADDOCK_CONFORMANCE_API_KEY") {
		t.Errorf("a credential reached the sandbox:\n%s", out)
	}
	if res.Steps[len(res.Steps)-1].Status != 0 {
		t.Errorf("the kernel's environment was not read: %s", res)
	}
}

// The kernel, and the commands it runs, start in the sandbox path of the session's working
// directory.
func testWorkingDirectory(t *testing.T, e Env) {
	ctx := testContext(t)
	if err := os.Mkdir(filepath.Join(e.Workspace, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	s := open(t, ctx, e, nil, nil, nil)
	want := sandboxCwd(t, e)
	h, err := s.Ping(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if res := bash(t, ctx, s, fmt.Sprintf("readlink /proc/%d/cwd", h.PID)); e.HidesProcCwd && res.End.Status != 0 {
		t.Logf("the sandbox's kernel hides /proc/%d/cwd: %s", h.PID, res)
	} else if out := stdout(res); out != want+"\n" {
		t.Errorf("the kernel runs in %q, want %q", out, want)
	}
	res := bash(t, ctx, s, `pwd; sh -c pwd; cd sub; pwd; touch here`)
	if out := stdout(res); out != want+"\n"+want+"\n"+want+"/sub\n" {
		t.Fatalf("working directories %q, want %q then its sub", out, want)
	}
	if _, err := os.Stat(filepath.Join(e.Workspace, "sub", "here")); err != nil {
		t.Fatalf("a file made in the sandbox's cwd is not in the host's: %v", err)
	}
}

// A working directory outside every mount stops the start with a typed error, and a
// session whose workspace no mount holds does not open.
func testCwdOutside(t *testing.T, e Env) {
	if e.PathMap == nil {
		t.Skip("the identity map holds every path")
	}
	ctx := testContext(t)
	_, err := e.Transport.Start(ctx, transport.Spec{Session: "conformance-outside", Kernel: e.Kernel,
		Env: e.Environ(os.Environ(), nil), Cwd: "/paddock-outside-every-mount", PathMap: e.PathMap})
	var coded interface{ Code() string }
	if !errors.As(err, &coded) || coded.Code() != "outside" {
		t.Fatalf("a cwd outside every mount: %v, want a refusal with code outside", err)
	}
	_, err = orchestrator.Open(ctx, orchestrator.Config{Workspace: t.TempDir(), Transport: e.Transport,
		Kernel: e.Kernel, Env: e.Environ(os.Environ(), nil), PathMap: e.PathMap})
	if err == nil || !errors.Is(err, &pathmap.Refusal{Code: pathmap.Outside}) {
		t.Fatalf("a workspace under no mount opened a session: %v", err)
	}
}
