package main

import (
	"bufio"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/paddockhq/paddock/images"
)

// exitCmds are the commands of testdata/script/exit*.txtar, which need the exact exit
// status (exec only tells zero from not).
var exitCmds = map[string]func(ts *testscript.TestScript, neg bool, args []string){
	// status N ARGS...: run paddock ARGS..., which must exit N; its output goes to $WORK/out
	// and $WORK/err, for grep.
	"status": func(ts *testscript.TestScript, neg bool, args []string) {
		if len(args) < 2 {
			ts.Fatalf("usage: status N ARGS...")
		}
		want, err := strconv.Atoi(args[0])
		ts.Check(err)
		cmd := exec.Command(scriptBin, args[1:]...)
		got := runTo(ts, cmd)
		if (got == want) == neg {
			ts.Fatalf("paddock %s: exit %d, want %d", strings.Join(args[1:], " "), got, want)
		}
	},
	// interrupt LINE ARGS...: start paddock ARGS..., wait until it prints the line LINE,
	// send it SIGINT, and leave its exit status in $WORK/status.
	"interrupt": func(ts *testscript.TestScript, neg bool, args []string) {
		if len(args) < 2 {
			ts.Fatalf("usage: interrupt LINE ARGS...")
		}
		cmd := exec.Command(scriptBin, args[1:]...)
		cmd.Dir = ts.Getenv("WORK")
		cmd.Env = append(scriptEnv(ts), "XDG_STATE_HOME="+ts.Getenv("XDG_STATE_HOME"))
		stdout, err := cmd.StdoutPipe()
		ts.Check(err)
		errf, err := os.Create(ts.MkAbs("err"))
		ts.Check(err)
		defer errf.Close()
		cmd.Stderr = errf
		ts.Check(cmd.Start())
		sc := bufio.NewScanner(stdout)
		for sc.Scan() && sc.Text() != args[0] {
		}
		ts.Check(cmd.Process.Signal(os.Interrupt))
		for sc.Scan() { // the rest, to its end
		}
		err = cmd.Wait()
		var ee *exec.ExitError
		if err != nil && !errors.As(err, &ee) {
			ts.Fatalf("%v", err)
		}
		ts.Check(os.WriteFile(ts.MkAbs("status"), []byte(strconv.Itoa(cmd.ProcessState.ExitCode())+"\n"), 0o644))
	},
}

// runTo runs cmd in the script's directory, its output to $WORK/out and $WORK/err.
func runTo(ts *testscript.TestScript, cmd *exec.Cmd) int {
	cmd.Dir = ts.Getenv("WORK")
	cmd.Env = append(scriptEnv(ts), "XDG_STATE_HOME="+ts.Getenv("XDG_STATE_HOME"))
	outf, err := os.Create(ts.MkAbs("out"))
	ts.Check(err)
	defer outf.Close()
	errf, err := os.Create(ts.MkAbs("err"))
	ts.Check(err)
	defer errf.Close()
	cmd.Stdout, cmd.Stderr = outf, errf
	err = cmd.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		ts.Fatalf("%v", err)
	}
	return cmd.ProcessState.ExitCode()
}

// TestExitScripts runs testdata/script/exit*.txtar: every exit status the README documents,
// as a user meets it.
func TestExitScripts(t *testing.T) {
	kernel, err := images.Default.Find(context.Background(), runtime.GOARCH)
	if err != nil {
		t.Fatal(err)
	}
	runScripts(t, "exit*.txtar", func(e *testscript.Env) error {
		e.Setenv("PADDOCK_KERNEL", kernel)
		e.Setenv("XDG_CONFIG_HOME", filepath.Join(e.WorkDir, ".config"))
		e.Setenv("XDG_STATE_HOME", filepath.Join(e.WorkDir, ".state"))
		return nil
	}, exitCmds)
}
