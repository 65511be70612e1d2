// Package local starts a kernel as a child process of the host, in its own process group,
// with the host's environment less its credentials. The kernel ends when the host does: its
// stdin closes, and on Linux the parent-death signal kills it too.
package local

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"github.com/paddockhq/paddock/transport"
)

var _ transport.Transport = (*Transport)(nil)

// Grace is how long Kill waits after closing stdin before it kills the process group.
const Grace = 2 * time.Second

// Transport starts local kernels.
type Transport struct {
	// Stderr receives the kernel's diagnostics; nil discards them.
	Stderr io.Writer
}

// Start starts spec.Kernel with spec.Args in spec.Cwd (a host path: the local sandbox is the
// host) with exactly spec.Env.
func (t *Transport) Start(ctx context.Context, spec transport.Spec) (transport.Kernel, error) {
	if spec.Kernel == "" {
		return nil, errors.New("local: no kernel binary named")
	}
	cmd := exec.Command(spec.Kernel, spec.Args...)
	cmd.Dir = spec.Cwd
	cmd.Env = spec.Env
	if cmd.Env == nil {
		cmd.Env = []string{}
	}
	cmd.Stderr = t.Stderr
	k, err := StartProcess(cmd)
	if err != nil {
		return nil, fmt.Errorf("local: start kernel: %w", err)
	}
	return k, nil
}

// StartProcess starts cmd as a kernel: in its own process group (killed with the host on
// Linux), its stdin and stdout the frame pipes. Kill closes stdin and kills the process
// group when the process has not ended within Grace. Other backends whose kernel is a host
// process (a wrapper command) start it here too.
func StartProcess(cmd *exec.Cmd) (transport.Kernel, error) {
	cmd.SysProcAttr = sysProcAttr()
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		stdin.Close()
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	k := &kernel{cmd: cmd, stdin: stdin, stdout: stdout, done: make(chan struct{})}
	go func() {
		k.err = cmd.Wait()
		close(k.done)
	}()
	return k, nil
}

type kernel struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stdout io.Reader
	done   chan struct{}
	err    error // set before done closes

	killOnce sync.Once
}

func (k *kernel) Stdin() io.WriteCloser { return k.stdin }
func (k *kernel) Stdout() io.Reader     { return k.stdout }

func (k *kernel) Wait() error {
	<-k.done
	return k.err
}

// Kill closes stdin (the kernel then ends and kills what it started), and kills the
// kernel's process group when it has not ended within Grace.
func (k *kernel) Kill() error {
	k.killOnce.Do(func() {
		transport.Stop(k.done, func() { k.stdin.Close() }, func() { _ = syscall.Kill(-k.cmd.Process.Pid, syscall.SIGKILL) }, Grace, 0)
	})
	return nil
}
