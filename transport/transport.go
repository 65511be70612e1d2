// Package transport is the contract between the host and the ways it starts a kernel: a
// local process, a wrapper command, a Docker or containerd container, a remote box over SSH.
// Each backend lives in its own package and satisfies Transport.
package transport

import (
	"context"
	"io"
	"time"

	"github.com/paddockhq/paddock/transport/pathmap"
)

// Transport starts kernels.
type Transport interface {
	Start(ctx context.Context, spec Spec) (Kernel, error)
}

// Kernel is one running kernel process.
type Kernel interface {
	Stdin() io.WriteCloser // host -> kernel frames
	Stdout() io.Reader     // kernel -> host frames
	Wait() error           // waits for the kernel to end
	Kill() error           // closes stdin, then kills the kernel and what it started
}

// Spec says how to start one kernel.
type Spec struct {
	Session string            // the session's id, carried in labels and names
	Kernel  string            // host path of the kernel binary, or "" for the backend's own
	Args    []string          // arguments after the kernel's name
	Env     []string          // the kernel's whole environment, NAME=value
	Cwd     string            // sandbox path the kernel starts in
	PathMap *pathmap.Map      // sandbox <-> host; nil: the identity (local)
	Labels  map[string]string // added to what the backend creates
}

// Stop ends a kernel as Kernel.Kill promises: its input is closed, and when it has not ended
// within grace (done is closed at its end) it is killed. Stop then waits up to wait for the
// end (0: for as long as it takes) and reports whether the kernel ended.
func Stop(done <-chan struct{}, closeInput, kill func(), grace, wait time.Duration) bool {
	closeInput()
	select {
	case <-done:
		return true
	case <-time.After(grace):
	}
	kill()
	if wait == 0 {
		<-done
		return true
	}
	select {
	case <-done:
		return true
	case <-time.After(wait):
		return false
	}
}
