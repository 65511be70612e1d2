//go:build linux

package kernel

import (
	"io"
	"sync"

	"github.com/paddockhq/paddock/transport/wire"
)

// output is the kernel's one writer to the host: every frame goes out whole, in one write,
// under one lock. After the first failed write (the host is gone) it drops every frame and
// reports the failure once through broken. A listening kernel's output is its journal
// instead, which outlives connections.
type output struct {
	j *journal // set: every frame goes to the journal

	mu     sync.Mutex
	w      *wire.Writer // guarded by mu
	failed bool         // guarded by mu
	broken func(error)  // called once, without mu, after the first failed write
}

func newOutput(w io.Writer, broken func(error)) *output {
	return &output{w: wire.NewWriter(w), broken: broken}
}

// write sends one frame.
func (o *output) write(f *wire.Frame) error {
	if o.j != nil {
		return o.j.write(f)
	}
	o.mu.Lock()
	if o.failed {
		o.mu.Unlock()
		return io.ErrClosedPipe
	}
	err := o.w.Write(f)
	o.failed = err != nil
	o.mu.Unlock()
	if err != nil && o.broken != nil {
		o.broken(err)
	}
	return err
}

// reply sends the one reply to request id: ok with body v, or the error.
func (o *output) reply(id string, v any, err error) {
	if err != nil {
		we := classify(err)
		o.write(wire.ErrorReply(id, wire.StatusError, we.Code, we.Message))
		return
	}
	f, merr := wire.Reply(id, v)
	if merr != nil {
		o.write(wire.ErrorReply(id, wire.StatusError, CodeIO, "encode reply: "+merr.Error()))
		return
	}
	o.write(f)
}

// hold keeps an exec's frames for a host that connects anew (a listening kernel only).
func (o *output) hold(id string) {
	if o.j != nil {
		o.j.hold(id)
	}
}

// ended marks a held exec as ended.
func (o *output) ended(id string) {
	if o.j != nil {
		o.j.ended(id)
	}
}
