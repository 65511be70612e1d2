package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/paddockhq/paddock/client"
	"github.com/paddockhq/paddock/daemon/api"
	"github.com/paddockhq/paddock/images"
	"github.com/paddockhq/paddock/internal/await"
	"github.com/paddockhq/paddock/orchestrator"
)

// daemonCmds are the testscript commands that drive a daemon through the Go client.
var daemonCmds = map[string]func(ts *testscript.TestScript, neg bool, args []string){
	// daemon-start NAME ARGS...: start paddock ARGS... in the background, its standard
	// error in $WORK/NAME.log.
	"daemon-start": func(ts *testscript.TestScript, neg bool, args []string) {
		if len(args) < 2 {
			ts.Fatalf("usage: daemon-start NAME ARGS...")
		}
		logf, err := os.Create(ts.MkAbs(args[0] + ".log"))
		ts.Check(err)
		cmd := exec.Command(scriptBin, args[1:]...)
		cmd.Dir = ts.Getenv("WORK")
		cmd.Env = scriptEnv(ts)
		cmd.Stderr, cmd.Stdout = logf, logf
		ts.Check(cmd.Start())
		p := &proc{cmd: cmd, done: make(chan struct{})}
		go func() { p.err = cmd.Wait(); logf.Close(); close(p.done) }()
		procs.Store(ts.Getenv("WORK")+"/"+args[0], p)
		ts.Defer(func() {
			cmd.Process.Kill()
			<-p.done
		})
	},
	// daemon-signal NAME KILL|INT: signal a process daemon-start started and wait for its
	// end; with INT it must exit 0 (or, negated, not).
	"daemon-signal": func(ts *testscript.TestScript, neg bool, args []string) {
		if len(args) != 2 {
			ts.Fatalf("usage: daemon-signal NAME KILL|INT")
		}
		v, ok := procs.Load(ts.Getenv("WORK") + "/" + args[0])
		if !ok {
			ts.Fatalf("no process %s", args[0])
		}
		p := v.(*proc)
		sig := map[string]os.Signal{"KILL": os.Kill, "INT": os.Interrupt}[args[1]]
		if sig == nil {
			ts.Fatalf("signal %s: KILL or INT", args[1])
		}
		ts.Check(p.cmd.Process.Signal(sig))
		select {
		case <-p.done:
			if sig == os.Interrupt && (p.err != nil) != neg {
				ts.Fatalf("%s after INT: %v", args[0], p.err)
			}
		case <-time.After(30 * time.Second):
			ts.Fatalf("%s did not end after %s", args[0], args[1])
		}
	},
	// daemon-ready SOCKET: wait until the daemon at SOCKET answers (two minutes at most):
	// once its socket accepts, seen at a change in the socket's directory.
	"daemon-ready": func(ts *testscript.TestScript, neg bool, args []string) {
		if len(args) != 1 {
			ts.Fatalf("usage: daemon-ready SOCKET")
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if err := await.Socket(ctx, args[0]); err != nil {
			ts.Fatalf("daemon at %s: %v", args[0], err)
		}
		c, err := client.New("unix://" + args[0])
		ts.Check(err)
		defer c.Close()
		_, err = c.Health(ctx)
		ts.Check(err)
	},
	// daemon-open VAR DIR [TRANSPORT [BUDGET]]: open a session in DIR; $VAR is its id.
	"daemon-open": func(ts *testscript.TestScript, neg bool, args []string) {
		if len(args) < 2 {
			ts.Fatalf("usage: daemon-open VAR DIR [TRANSPORT [BUDGET]]")
		}
		req := api.OpenRequest{Workspace: ts.MkAbs(args[1])}
		if len(args) > 2 {
			req.Transport = args[2]
		}
		if len(args) > 3 {
			req.BlockingBudget = args[3]
		}
		c := scriptClient(ts)
		defer c.Close()
		s, err := c.Open(context.Background(), req)
		ts.Check(err)
		ts.Setenv(args[0], s.ID)
	},
	// daemon-bash VAR SESSION SCRIPT: run SCRIPT; $VAR is the job id when it detached, else
	// how it ended.
	"daemon-bash": func(ts *testscript.TestScript, neg bool, args []string) {
		if len(args) != 3 {
			ts.Fatalf("usage: daemon-bash VAR SESSION SCRIPT")
		}
		c := scriptClient(ts)
		defer c.Close()
		r, err := c.Bash(context.Background(), args[1], api.BashRequest{Script: args[2]})
		ts.Check(err)
		if r.End.Kind == orchestrator.Detached {
			ts.Setenv(args[0], r.End.Job)
		} else {
			ts.Setenv(args[0], r.End.Kind)
		}
		fmt.Fprint(ts.Stdout(), orchestrator.ResultOf(r.Result).String())
	},
}

// proc is a process daemon-start started.
type proc struct {
	cmd  *exec.Cmd
	done chan struct{} // closed when it has ended
	err  error         // how it ended, once done is closed
}

var procs sync.Map // $WORK/NAME -> *proc

// scriptBin is the paddock binary the scripts run.
var scriptBin string

// scriptEnv is the script's environment, for a process the script starts.
func scriptEnv(ts *testscript.TestScript) []string {
	var env []string
	for _, k := range []string{"PATH", "HOME", "TMPDIR", "PADDOCK_KERNEL", "XDG_CONFIG_HOME", client.HostEnv, "DOCKER_HOST"} {
		if v := ts.Getenv(k); v != "" {
			env = append(env, k+"="+v)
		}
	}
	return env
}

func scriptClient(ts *testscript.TestScript) *client.Client {
	c, err := client.New(ts.Getenv(client.HostEnv))
	ts.Check(err)
	return c
}

// TestDaemonScripts runs testdata/script/daemon*.txtar: paddock serve, and the CLI's verbs
// against it.
func TestDaemonScripts(t *testing.T) {
	kernel, err := images.Default.Find(context.Background(), runtime.GOARCH)
	if err != nil {
		t.Fatal(err)
	}
	runScripts(t, "daemon*.txtar", func(e *testscript.Env) error {
		e.Setenv("PADDOCK_KERNEL", kernel) // the scripts' HOME has no kernel cache
		e.Setenv("XDG_CONFIG_HOME", filepath.Join(e.WorkDir, ".config"))
		// The socket's directory must be short: a unix socket path holds at most 107 bytes.
		dir, err := os.MkdirTemp("/tmp", "pd-")
		if err != nil {
			return err
		}
		e.Defer(func() { os.RemoveAll(dir) })
		e.Setenv("SOCK", filepath.Join(dir, "run", "paddock.sock"))
		e.Setenv(client.HostEnv, "unix://"+filepath.Join(dir, "run", "paddock.sock"))
		e.Setenv("SOCKBASE", dir)
		return nil
	}, daemonCmds)
}
