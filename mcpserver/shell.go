package mcpserver

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/paddockhq/paddock/errdefs"
	"github.com/paddockhq/paddock/orchestrator"
)

// Budgets of the bash and job_wait tools, in seconds.
const (
	defaultBudget = 120
	maxBudget     = 600
)

// BashIn is the bash tool's input.
type BashIn struct {
	Command string  `json:"command" jsonschema:"the shell script to run (bash syntax); cd and exported variables hold for the next call"`
	Timeout float64 `json:"timeout,omitempty" jsonschema:"seconds to wait for the script (default 120, at most 600); past it the script goes on as a job and its output so far comes back with the job's id"`
}

// JobIn names a job.
type JobIn struct {
	Job string `json:"job" jsonschema:"the job's id, as bash gave it"`
}

// JobWaitIn is the job_wait tool's input.
type JobWaitIn struct {
	Job     string  `json:"job" jsonschema:"the job's id, as bash gave it"`
	Timeout float64 `json:"timeout,omitempty" jsonschema:"seconds to wait for its end (default 120, at most 600)"`
}

func (x *Server) addShellTools() {
	tool(x, &mcp.Tool{Name: "bash", Description: `Run a shell script in the sandbox and return each step's output and how it ended.
Each step (a command of a pipeline or list) is decided by Paddock's policy before it runs: a step
the policy does not run at once is asked of the person, or refused with the reason and the step
is not run; a refused step ends the script there. The working directory and exported variables
persist across calls. Output is bounded; what was dropped is said. A script that runs past its
timeout goes on as a job: its output so far comes back with the job's id for job_wait or job_kill.`,
		Annotations: &mcp.ToolAnnotations{Title: "Shell in the sandbox", OpenWorldHint: ptr(false)}}, x.bash)
	tool(x, &mcp.Tool{Name: "job_wait", Description: "Wait for a job that bash detached to end, or for the timeout; return its output so far and how it ended.",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}}, x.jobWait)
	tool(x, &mcp.Tool{Name: "job_kill", Description: "Kill a job that bash detached; its output so far is kept and returned.",
		Annotations: &mcp.ToolAnnotations{DestructiveHint: ptr(true)}}, x.jobKill)
	tool(x, &mcp.Tool{Name: "job_list", Description: "List this session's jobs: id, script, and whether each is still running.",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}}, x.jobList)
}

func ptr[T any](v T) *T { return &v }

// budget is a tool's timeout in seconds as a duration: the default for 0, refused outside
// 0..max.
func budget(sec float64) (time.Duration, error) {
	switch {
	case sec == 0:
		return defaultBudget * time.Second, nil
	case sec < 0 || sec > maxBudget:
		return 0, errdefs.New(errdefs.InvalidArgument, "bad_timeout", fmt.Sprintf("timeout %g is not within 0..%d seconds", sec, maxBudget))
	}
	return time.Duration(sec * float64(time.Second)), nil
}

func (x *Server) bash(ctx context.Context, req *mcp.CallToolRequest, in BashIn) (*mcp.CallToolResult, any, error) {
	if strings.TrimSpace(in.Command) == "" {
		return refuse(errdefs.InvalidArgument, "bad_request", "no command given")
	}
	b, err := budget(in.Timeout)
	if err != nil {
		return fail(err)
	}
	var live func(step, fd int, data []byte)
	if p := newProgress(ctx, req); p != nil {
		live = p.chunk
	}
	res, err := x.s.Run(ctx, in.Command, b, live)
	if err != nil {
		return fail(err)
	}
	return text(res.String()), nil, nil
}

// progress sends a long step's output as MCP progress notifications, when the client asked
// for them (a progress token): each chunk's text, bounded, and the bytes so far.
type progress struct {
	ctx   context.Context
	ss    *mcp.ServerSession
	token any

	mu    sync.Mutex
	bytes int
}

// progressText bounds the text of one notification.
const progressText = 1 << 10

func newProgress(ctx context.Context, req *mcp.CallToolRequest) *progress {
	t := req.Params.GetProgressToken()
	if t == nil || req.Session == nil {
		return nil
	}
	return &progress{ctx: ctx, ss: req.Session, token: t}
}

func (p *progress) chunk(step, _ int, data []byte) {
	p.mu.Lock()
	p.bytes += len(data)
	n := p.bytes
	p.mu.Unlock()
	msg := string(data)
	if len(msg) > progressText {
		msg = msg[len(msg)-progressText:]
	}
	// A notification that cannot be sent changes nothing about the step.
	_ = p.ss.NotifyProgress(p.ctx, &mcp.ProgressNotificationParams{ProgressToken: p.token, Progress: float64(n),
		Message: fmt.Sprintf("step %d: %s", step+1, msg)})
}

func (x *Server) jobWait(ctx context.Context, _ *mcp.CallToolRequest, in JobWaitIn) (*mcp.CallToolResult, any, error) {
	b, err := budget(in.Timeout)
	if err != nil {
		return fail(err)
	}
	res, running, err := x.s.Wait(ctx, in.Job, b)
	if err != nil {
		return fail(err)
	}
	return jobResult(in.Job, res, running)
}

func (x *Server) jobKill(ctx context.Context, _ *mcp.CallToolRequest, in JobIn) (*mcp.CallToolResult, any, error) {
	res, err := x.s.Kill(ctx, in.Job)
	if err != nil {
		return fail(err)
	}
	return jobResult(in.Job, res, false)
}

// jobResult is a job's result so far, with whether it is still running.
func jobResult(id string, res *orchestrator.Result, running bool) (*mcp.CallToolResult, any, error) {
	s := res.String()
	if running {
		s += fmt.Sprintf("[job %s is still running]\n", id)
	}
	return text(s), nil, nil
}

// JobInfo is one job as job_list lists it.
type JobInfo struct {
	ID      string `json:"id"`
	Script  string `json:"script"`
	Running bool   `json:"running"`
}

func (x *Server) jobList(ctx context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
	jobs, err := x.s.Jobs(ctx)
	if err != nil {
		return fail(err)
	}
	var b strings.Builder
	for _, info := range jobs {
		state := "ended"
		if info.Running {
			state = "running"
		}
		first, _, _ := strings.Cut(info.Script, "\n")
		fmt.Fprintf(&b, "%s\t%s\t%s\n", info.ID, state, first)
	}
	if len(jobs) == 0 {
		b.WriteString("no jobs\n")
	}
	out := text(b.String())
	out.StructuredContent = map[string]any{"jobs": jobs}
	return out, nil, nil
}
