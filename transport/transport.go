// Package transport is the contract between the host and the ways it starts a kernel: a
// local process, a wrapper command, a Docker or containerd container, a remote box over SSH.
// Each backend lives in its own package and satisfies Transport.
package transport

import (
	"context"
	"errors"
	"io"
	"time"

	"github.com/paddockhq/paddock/transport/pathmap"
	"github.com/paddockhq/paddock/transport/wire"
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
	// Listen, when set, is a private host directory (0700) bound into the sandbox where the
	// kernel listens for its host instead of serving its standard streams: it then outlives
	// the host's connection, and a new host reattaches to it (Reattacher). Key is what a
	// host attaches with. The container transports and ssh take it (ssh: in a directory of
	// its own on the box, named for this one).
	Listen string
	Key    string
	// Once, with Listen, serves this host only: the kernel ends with its connection, as
	// one on its standard streams does, and is not taken up again. A host listens so for
	// the speed of its frames (a socket, not the engine's relay of the streams).
	Once bool
	// Egress, when set, is a host directory the container transports bind read-only into
	// the sandbox at EgressDir: the host's proxy listens there (EgressSocket), and the
	// kernel carries the sandbox's connections to it (wire.Egress).
	Egress string
}

// Where a container sandbox sees its host's proxy (Spec.Egress).
const (
	EgressDir    = "/.paddock/egress"
	EgressSocket = "proxy.sock"
)

// EgressBeside is the egress directory of a kernel that listens in dir: beside it, where a
// host that reattaches to the kernel finds it.
func EgressBeside(dir string) string { return dir + ".egress" }

// Egressed is a kernel whose sandbox sees the host's proxy in a directory other than its
// start's Spec.Egress: a pool's warm kernel, started before its session.
type Egressed interface {
	EgressDir() string // the host directory bound at EgressDir; "": its start's Spec.Egress
}

// Reattacher is a transport whose kernels, started with Spec.Listen, outlive their host:
// Reattach connects to the running kernel of spec.Session. It fails with ErrGone when the
// session's sandbox is no longer there or no longer runs.
type Reattacher interface {
	Reattach(ctx context.Context, spec Spec) (Kernel, error)
}

// Relocated is a listening kernel that listens where its start's Spec did not say: a pool's
// warm kernel, started before its session. Reattach reaches it again with the Spec
// ListenSpec returns (its sandbox's session label, its directory, its key).
type Relocated interface {
	ListenSpec() Spec
}

// ErrGone is the error of a reattach to a sandbox that is no longer there.
var ErrGone = errors.New("the session's sandbox is gone")

// Resuming is a kernel that may be reached through a listening connection: when ok, res is
// the resume frame that opened it (its replayed frames are the first res.Replay frames of
// Stdout), and the host acknowledges what it handles with ack frames.
type Resuming interface {
	Resume() (res wire.Resume, ok bool)
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
