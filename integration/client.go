package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/paddockhq/paddock/transport"
	"github.com/paddockhq/paddock/transport/wire"
)

// frameClient drives a bare kernel over its frames, one request at a time, for the tests that
// need the transport without a session above it.
type frameClient struct {
	k    transport.Kernel
	w    *wire.Writer
	r    *wire.Reader
	next int
}

func newClient(k transport.Kernel) *frameClient {
	return &frameClient{k: k, w: wire.NewWriter(k.Stdin()), r: wire.NewReader(k.Stdout())}
}

// request sends one request and reads frames up to its reply; stream frames of fd 1 are
// gathered into out.
func (c *frameClient) request(ctx context.Context, typ string, body any) (reply wire.Frame, out string, err error) {
	c.next++
	id := strconv.Itoa(c.next)
	b, err := json.Marshal(body)
	if err != nil {
		return reply, "", err
	}
	if err := c.w.Write(&wire.Frame{Event: wire.EventRequest, ID: id, Type: typ, Body: b}); err != nil {
		return reply, "", err
	}
	type result struct {
		f   wire.Frame
		out string
		err error
	}
	done := make(chan result, 1)
	go func() {
		var sb strings.Builder
		for {
			line, err := c.r.Next()
			if err != nil {
				done <- result{err: err}
				return
			}
			f, err := wire.Decode(line.Bytes)
			if err != nil {
				done <- result{err: err}
				return
			}
			if f.ID != id {
				continue
			}
			switch f.Event {
			case wire.EventStream:
				if f.FD == 1 {
					sb.Write(f.Data)
				}
			case wire.EventReply:
				done <- result{f: f, out: sb.String()}
				return
			}
		}
	}()
	select {
	case r := <-done:
		if r.err == nil && r.f.Status != wire.StatusOK {
			r.err = fmt.Errorf("%s: %v", typ, r.f.Error)
		}
		return r.f, r.out, r.err
	case <-ctx.Done():
		return reply, "", ctx.Err()
	}
}

func (c *frameClient) ping(ctx context.Context) (wire.Hello, error) {
	var h wire.Hello
	f, _, err := c.request(ctx, wire.TypePing, struct{}{})
	if err != nil {
		return h, err
	}
	return h, json.Unmarshal(f.Body, &h)
}

// exec runs x and returns its standard output; a command that did not exit 0 is an error.
func (c *frameClient) exec(ctx context.Context, x wire.Exec) (string, error) {
	f, out, err := c.request(ctx, wire.TypeExec, x)
	if err != nil {
		return out, err
	}
	var r wire.ExecResult
	if err := json.Unmarshal(f.Body, &r); err != nil {
		return out, err
	}
	for _, s := range r.Statuses {
		if s.Code != 0 {
			return out, fmt.Errorf("exec: status %+v", s)
		}
	}
	return out, nil
}
