package integration

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/paddockhq/paddock/client"
	"github.com/paddockhq/paddock/daemon/api"
)

// BenchmarkMCPStepVsHTTPVsExec is a `true` step through `paddock mcp` (the SDK's client over
// stdio, a real process) beside the same step through the daemon's HTTP API (a real
// `paddock serve` on its unix socket) and `docker exec BOX true`, one of each per iteration
// in turning order so that all three meet the same load, all on the Docker transport (or
// BENCH_TRANSPORT's).
func BenchmarkMCPStepVsHTTPVsExec(b *testing.B) {
	e := newBenchEnv(b)
	ctx := context.Background()
	bin := paddockBinary(b)
	ws := mcpWorkspace(b)
	conf := b.TempDir()
	tkind := cmpOr(os.Getenv("BENCH_TRANSPORT"), "docker")
	c := startMCPWith(b, ws, false, nil, nil, nil, "--transport", tkind)
	sock := filepath.Join(b.TempDir(), "d.sock")
	startServe(b, bin, sock, b.TempDir(), append(os.Environ(), "XDG_CONFIG_HOME="+conf))
	cl, err := client.New("unix://" + sock)
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	sess, err := cl.Open(ctx, api.OpenRequest{Workspace: ws, Transport: tkind})
	if err != nil {
		b.Fatal(err)
	}
	box := longLived(b, e.tr.Client, e.img, e.kernel, e.ws)
	mcpTrue := func() {
		if out, isErr := c.call("bash", map[string]any{"command": "true"}); isErr {
			b.Fatal(out)
		}
	}
	httpTrue := func() {
		r, err := cl.Bash(ctx, sess.ID, api.BashRequest{Script: "true"})
		if err != nil || r.Result == nil || r.End.Status != 0 {
			b.Fatalf("true through the API: %+v %v", r, err)
		}
	}
	mcpTrue()
	httpTrue()
	execTrue := func() {
		if out, err := exec.Command("docker", "exec", box, "true").CombinedOutput(); err != nil {
			b.Fatalf("docker exec: %v: %s", err, out)
		}
	}
	// The order turns each iteration: the engine goes on working after docker exec returns,
	// and what runs right after it pays for that.
	ops := []func(){mcpTrue, httpTrue, execTrue}
	var took [3]time.Duration
	b.ResetTimer()
	for i := range b.N {
		for k := range ops {
			j := (i + k) % len(ops)
			t0 := time.Now()
			ops[j]()
			took[j] += time.Since(t0)
		}
	}
	m, h, x := took[0], took[1], took[2]
	b.StopTimer()
	n := float64(b.N)
	b.ReportMetric(float64(m.Microseconds())/n, "mcp-µs/op")
	b.ReportMetric(float64(h.Microseconds())/n, "http-µs/op")
	b.ReportMetric(float64(x.Microseconds())/n, "exec-µs/op")
	b.ReportMetric(float64(m)/float64(h), "mcp/http")
	b.ReportMetric(float64(x)/float64(m), "exec/mcp")
}

// BenchmarkMCPGrepVsRg is the grep tool over the project's own tree beside `rg` run in the
// sandbox by the bash tool of the same session (both skip .git and what .gitignore
// ignores), one of each per iteration.
func BenchmarkMCPGrepVsRg(b *testing.B) {
	engine(b)
	if _, err := exec.LookPath("rg"); err != nil {
		needPeer(b, "no rg on the host (the sandbox's system directories are the host's): %v", err)
	}
	root := repoRoot(b)
	c := startMCPWith(b, root, false, nil, nil, nil, "--transport", "docker", "--workspace", root)
	const pattern = `func \(s \*Session\) [A-Z]`
	grep := func() string {
		out, isErr := c.call("grep", map[string]any{"pattern": pattern, "output_mode": "count", "limit": 100000})
		if isErr {
			b.Fatal(out)
		}
		return out
	}
	rg := func() string {
		out, isErr := c.call("bash", map[string]any{"command": "rg -c '" + pattern + "' ."})
		if isErr {
			b.Fatal(out)
		}
		return out
	}
	grep()
	rg()
	var g, r time.Duration
	b.ResetTimer()
	for range b.N {
		t0 := time.Now()
		grep()
		g += time.Since(t0)
		t0 = time.Now()
		rg()
		r += time.Since(t0)
	}
	b.StopTimer()
	n := float64(b.N)
	b.ReportMetric(float64(g.Microseconds())/n, "grep-µs/op")
	b.ReportMetric(float64(r.Microseconds())/n, "rg-µs/op")
	b.ReportMetric(float64(g)/float64(r), "grep/rg")
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
