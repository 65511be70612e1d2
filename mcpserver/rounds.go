package mcpserver

import (
	"context"
	"fmt"
	"maps"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/paddockhq/paddock/errdefs"
	"github.com/paddockhq/paddock/orchestrator"
)

// roundsVersion is the protocol version from which questions go out as input requests.
const roundsVersion = "2026-07-28"

// A round is a tool call carried over several requests while questions are answered: the
// call runs on its own, and each request waits for its end or for a question, which it
// returns as an input request with the round's id as its state; the client's next request
// brings the answers and the state, and waits again.
type round struct {
	done chan struct{}
	res  *mcp.CallToolResult // set before done is closed

	mu    sync.Mutex
	asked map[string]bool // guarded by mu: the questions this call handed out: true until answered
}

// take marks the questions as handed out by this call.
func (r *round) take(qs map[string]orchestrator.Question) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for id := range qs {
		r.asked[id] = true
	}
}

// answered reports whether this call handed out question id and has not had it answered:
// an answer is taken only for a question the call asked, once.
func (r *round) answered(id string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	ok := r.asked[id]
	if ok {
		r.asked[id] = false
	}
	return ok
}

// handed is a copy of the questions the call handed out, answered or not: it asks none
// twice.
func (r *round) handed() map[string]bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return maps.Clone(r.asked)
}

// handler is a tool's work: its result, as the SDK's typed handlers return it.
type handler func(ctx context.Context) (*mcp.CallToolResult, any, error)

// tool registers a tool whose calls take questions in rounds when the client speaks that
// protocol version, and run straight through otherwise.
func tool[In any](x *Server, t *mcp.Tool, h func(context.Context, *mcp.CallToolRequest, In) (*mcp.CallToolResult, any, error)) {
	mcp.AddTool(x.srv, t, func(ctx context.Context, req *mcp.CallToolRequest, in In) (*mcp.CallToolResult, any, error) {
		return x.inRounds(ctx, req, func(ctx context.Context) (*mcp.CallToolResult, any, error) { return h(ctx, req, in) })
	})
}

// keptEnded bounds the calls that ended with nobody come back for their result yet.
const keptEnded = 64

// ended keeps the result of call id for the request that comes back for it, and forgets the
// oldest such result past keptEnded: a client that never comes back leaks nothing.
func (x *Server) ended(id string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.endedCalls = append(x.endedCalls, id)
	if len(x.endedCalls) > keptEnded {
		delete(x.calls, x.endedCalls[0])
		x.endedCalls = x.endedCalls[1:]
	}
}

func (x *Server) inRounds(ctx context.Context, req *mcp.CallToolRequest, h handler) (*mcp.CallToolResult, any, error) {
	a := x.attach(req)
	if a == nil || !a.rounds {
		return h(ctx)
	}
	var r *round
	var id string
	if id = req.Params.RequestState; id != "" {
		x.mu.Lock()
		r = x.calls[id]
		x.mu.Unlock()
		if r == nil {
			return refuse(errdefs.NotFound, "unknown_state", "no call is waiting with the state %q", id)
		}
		for qid, resp := range req.Params.InputResponses {
			if res, ok := resp.(*mcp.ElicitResult); ok && r.answered(qid) {
				a.answer(qid, res)
			}
		}
	} else {
		r = &round{done: make(chan struct{}), asked: map[string]bool{}}
		x.mu.Lock()
		x.n++
		id = fmt.Sprintf("call-%d", x.n)
		x.calls[id] = r
		x.mu.Unlock()
		// The call outlives this request: it ends when its work does, answered or not.
		cctx := context.WithoutCancel(ctx)
		go func() {
			res, _, err := h(cctx)
			if err != nil {
				res, _, _ = fail(err)
			}
			r.res = res
			close(r.done)
			x.ended(id)
		}()
	}
	for {
		qs, more := a.next(r.handed())
		if len(qs) > 0 {
			r.take(qs)
			ir := mcp.InputRequestMap{}
			for qid, q := range qs {
				ir[qid] = elicitation(q)
			}
			return &mcp.CallToolResult{InputRequests: ir, RequestState: id}, nil, nil
		}
		select {
		case <-r.done:
			x.mu.Lock()
			delete(x.calls, id)
			x.mu.Unlock()
			return r.res, nil, nil
		case <-more:
		case <-ctx.Done():
			return fail(ctx.Err())
		}
	}
}
