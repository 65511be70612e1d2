package main

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"golang.org/x/sync/errgroup"

	"github.com/paddockhq/paddock/client"
	"github.com/paddockhq/paddock/daemon/api"
	"github.com/paddockhq/paddock/orchestrator"
	"github.com/paddockhq/paddock/transport/docker"
)

// ourContainers lists the containers this process's sessions made (running or not).
func ourContainers(ctx context.Context, t *testing.T) []string {
	cli, err := docker.Connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	list, err := cli.ContainerList(ctx, container.ListOptions{All: true, Filters: filters.NewArgs(
		filters.Arg("label", docker.LabelManaged+"=1"), filters.Arg("label", docker.LabelPID+"="+strconv.Itoa(os.Getpid())))})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, c := range list {
		ids = append(ids, c.ID[:12])
	}
	return ids
}

func fdCount(t *testing.T) int {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

// Load on the daemon's unix socket with docker sessions, bounded: sessions opened and closed
// (4 at a time), then steps over 20 concurrent sessions; afterwards no goroutine, descriptor
// or container is left over. By default 30 sessions and 2,000 steps, to keep the run short;
// PADDOCK_LOAD_FULL=1: 100 sessions and 10,000 steps (about two minutes on two cores).
func TestLoadDocker(t *testing.T) {
	if testing.Short() {
		t.Skip("load test: skipped with -short")
	}
	needDocker(t)
	c := serveTest(t, "kernelTransport:\n  kind: docker\n")
	sessions, steps := 30, 2000
	if os.Getenv("PADDOCK_LOAD_FULL") == "1" {
		sessions, steps = 100, 10000
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Second)
	defer cancel()
	ws := t.TempDir()
	// Warm up: the host image, the client's connections.
	s, err := c.Open(ctx, api.OpenRequest{Workspace: ws})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.CloseSession(ctx, s.ID); err != nil {
		t.Fatal(err)
	}
	c.Close()
	baseG, baseFD := runtime.NumGoroutine(), fdCount(t)

	t0 := time.Now()
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(4)
	for range sessions {
		g.Go(func() error {
			s, err := c.Open(gctx, api.OpenRequest{Workspace: ws})
			if err != nil {
				return err
			}
			_, err = c.CloseSession(gctx, s.ID)
			return err
		})
	}
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d docker sessions opened and closed in %v", sessions, time.Since(t0))

	t0 = time.Now()
	lat, err := dockerSteps(ctx, c, ws, 20, steps)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(lat)
	t.Logf("%d steps over 20 docker sessions in %v: p50 %v, p99 %v", steps, time.Since(t0), lat[len(lat)/2], lat[len(lat)*99/100])

	c.Close()
	cctx, ccancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer ccancel()
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		ids := ourContainers(cctx, t)
		g, fd := runtime.NumGoroutine(), fdCount(t)
		if len(ids) == 0 && g <= baseG && fd <= baseFD {
			break
		}
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Fatalf("leak: containers %v, goroutines %d (was %d), descriptors %d (was %d)\n%s", ids, g, baseG, fd, baseFD, buf[:runtime.Stack(buf, true)])
		}
	}
}

// dockerSteps runs total one-step calls over n sessions, one client goroutine each.
func dockerSteps(ctx context.Context, c *client.Client, ws string, n, total int) ([]time.Duration, error) {
	ids := make([]string, n)
	for i := range ids {
		s, err := c.Open(ctx, api.OpenRequest{Workspace: ws})
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
				r, err := c.Bash(gctx, ids[w], api.BashRequest{Script: "echo " + strconv.Itoa(i)})
				lat[i] = time.Since(t0)
				if err != nil {
					return err
				}
				if r.End.Kind != orchestrator.Finished || r.Steps[0].Stdout.Text != strconv.Itoa(i)+"\n" {
					return fmt.Errorf("step %d: %s", i, orchestrator.ResultOf(r.Result))
				}
			}
			return nil
		})
	}
	err := g.Wait()
	for _, id := range ids {
		if _, cerr := c.CloseSession(ctx, id); cerr != nil && err == nil {
			err = cerr
		}
	}
	return lat, err
}
