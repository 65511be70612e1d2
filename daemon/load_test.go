package daemon_test

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/paddockhq/paddock/daemon"
	"github.com/paddockhq/paddock/daemon/api"
	"github.com/paddockhq/paddock/orchestrator"
	"github.com/paddockhq/paddock/orchestrator/output"
)

// openFDs counts this process's open descriptors.
func openFDs(t testing.TB) int {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

// childProcs lists the live processes whose parent is this one.
func childProcs() []string {
	self := strconv.Itoa(os.Getpid())
	var out []string
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid …; comm may hold spaces, so read after the last ')'.
		s := string(b)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(f) > 1 && f[1] == self && f[0] != "Z" {
			out = append(out, e.Name())
		}
	}
	return out
}

// runSteps runs total steps over n concurrent sessions, each its own client goroutine, and
// returns every step's latency.
func runSteps(ctx context.Context, d *testDaemon, ws string, n, total int) ([]time.Duration, error) {
	ids := make([]string, n)
	for i := range ids {
		s, err := d.c.Open(ctx, api.OpenRequest{Workspace: ws})
		if err != nil {
			return nil, err
		}
		ids[i] = s.ID
	}
	lat := make([]time.Duration, total)
	g, gctx := errgroup.WithContext(ctx)
	for w := range n {
		g.Go(func() error {
			for i := w; i < total; i += n {
				t0 := time.Now()
				r, err := d.c.Bash(gctx, ids[w], api.BashRequest{Script: "echo " + strconv.Itoa(i)})
				lat[i] = time.Since(t0)
				if err != nil {
					return err
				}
				if r.End.Kind != orchestrator.Finished || len(r.Steps) != 1 || r.Steps[0].Stdout.Text != strconv.Itoa(i)+"\n" {
					return fmt.Errorf("step %d: %s", i, orchestrator.ResultOf(r.Result))
				}
			}
			return nil
		})
	}
	err := g.Wait()
	for _, id := range ids {
		if _, cerr := d.c.CloseSession(ctx, id); cerr != nil && err == nil {
			err = cerr
		}
	}
	return lat, err
}

func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(len(sorted)-1, int(float64(len(sorted))*p))]
}

// Load on the unix socket, bounded: 100 sessions opened and closed, then 10,000 steps over 20
// concurrent sessions; afterwards no goroutine, descriptor or process is left over. (Local
// kernels: each session's kernel is a child process of this one.)
func TestLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("load test: skipped with -short")
	}
	// Processes other tests left (a daemon that left its sessions, say) are not this one's.
	others := childProcs()
	d := startDaemon(t, daemonOptions{})
	// A guard against a hang, not a measure: the figures are logged, and the benchmarks
	// measure; on a loaded machine the steps take what they take.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	ws := t.TempDir()
	// Warm up connections and the kernel's page cache, then take the baseline.
	if _, err := runSteps(ctx, d, ws, 2, 4); err != nil {
		t.Fatal(err)
	}
	d.c.Close()
	baseG, baseFD := runtime.NumGoroutine(), openFDs(t)

	var mu sync.Mutex
	var opened []string
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(10)
	for range 100 {
		g.Go(func() error {
			s, err := d.c.Open(gctx, api.OpenRequest{Workspace: ws})
			if err != nil {
				return err
			}
			mu.Lock()
			opened = append(opened, s.ID)
			mu.Unlock()
			_, err = d.c.CloseSession(gctx, s.ID)
			return err
		})
	}
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
	if len(opened) != 100 {
		t.Fatalf("%d sessions opened", len(opened))
	}
	t0 := time.Now()
	lat, err := runSteps(ctx, d, ws, 20, 10000)
	if err != nil {
		t.Fatal(err)
	}
	elapsed := time.Since(t0)
	slices.Sort(lat)
	t.Logf("10000 steps over 20 sessions in %v: p50 %v, p99 %v, max %v", elapsed, percentile(lat, 0.5), percentile(lat, 0.99), lat[len(lat)-1])

	if list, err := d.c.Sessions(ctx); err != nil || len(list) != 0 {
		t.Errorf("sessions left: %d %v", len(list), err)
	}
	d.c.Close()
	for _, p := range childProcs() { // no process left
		if !slices.Contains(others, p) {
			pid, _ := strconv.Atoi(p)
			gone(t, pid, "a child process")
		}
	}
	settled(t, baseG, baseFD)
}

// BenchmarkDaemonStep is a one-step call ("echo N") through the daemon on its unix socket,
// from 1 and from 20 concurrent sessions, beside the same call on an embedded session (no
// daemon): p50 and p99 are reported beside ns/op (wall time over the workers).
func BenchmarkDaemonStep(b *testing.B) {
	for _, n := range []int{1, 20} {
		b.Run(fmt.Sprintf("sessions=%d", n), func(b *testing.B) {
			d := startDaemon(b, daemonOptions{})
			ws := b.TempDir()
			lat, err := runSteps(context.Background(), d, ws, n, b.N)
			if err != nil {
				b.Fatal(err)
			}
			slices.Sort(lat)
			b.ReportMetric(float64(percentile(lat, 0.5).Microseconds()), "p50-µs")
			b.ReportMetric(float64(percentile(lat, 0.99).Microseconds()), "p99-µs")
		})
	}
	b.Run("embedded", func(b *testing.B) {
		ws := b.TempDir()
		o, err := opener(kernel(b), output.Default())(context.Background(), api.OpenRequest{Workspace: ws}, daemon.Where{})
		if err != nil {
			b.Fatal(err)
		}
		s, err := orchestrator.Open(context.Background(), o.Config)
		if err != nil {
			b.Fatal(err)
		}
		defer s.Close()
		lat := make([]time.Duration, b.N)
		b.ResetTimer()
		for i := range b.N {
			t0 := time.Now()
			if _, err := s.Bash(context.Background(), "echo "+strconv.Itoa(i)); err != nil {
				b.Fatal(err)
			}
			lat[i] = time.Since(t0)
		}
		b.StopTimer()
		slices.Sort(lat)
		b.ReportMetric(float64(percentile(lat, 0.5).Microseconds()), "p50-µs")
		b.ReportMetric(float64(percentile(lat, 0.99).Microseconds()), "p99-µs")
	})
}
