package integration

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/paddockhq/paddock/images"
	"github.com/paddockhq/paddock/orchestrator"
	"github.com/paddockhq/paddock/transport"
	"github.com/paddockhq/paddock/transport/containerd"
	"github.com/paddockhq/paddock/transport/docker"
)

// The benchmarks of the containerd transport and of warm pools, in one run and on one image:
// the Docker engine's host image, loaded into containerd's store for the containerd runs.
//
//	go test ./integration -run '^$' -bench 'SessionReady|PoolClaim' -benchtime 20x
//
// BenchmarkSessionReady/BACKEND/cold opens a session from nothing (sandbox created and
// started, the kernel answered ping); BenchmarkSessionReady/BACKEND/pool opens one from a
// full warm pool (claimed, the kernel answered ping), the pool refilled between sessions
// off the clock. BenchmarkPoolClaim20/BACKEND opens 20 sessions at once from a full pool of
// 20. Each reports the p50 and p99 of a session's ready time besides ns/op.

// benchBackends are the container backends on one image: the Docker engine's host image,
// and the same image loaded into containerd.
func benchBackends(b *testing.B) []poolBackend {
	cli := engine(b)
	img := hostImage(b, cli)
	c := containerdDaemon(b)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	b.Cleanup(func() { images.RemoveContainerd(context.Background(), c, containerd.Namespace, img) })
	if _, err := images.ContainerdFromDocker(ctx, cli, c, containerd.Namespace, "", img, testLabels); err != nil {
		b.Fatal(err)
	}
	return []poolBackend{
		{name: "docker", transport: func(testing.TB) transport.Transport {
			return &docker.Transport{Client: cli, Image: img, Mounts: hostMounts(), NoReap: true}
		}},
		{name: "containerd", transport: func(testing.TB) transport.Transport {
			return &containerd.Transport{Client: c, Image: img, Mounts: hostMounts(), NoReap: true}
		}},
	}
}

// percentiles reports the p50 and p99 of ds, in milliseconds.
func percentiles(b *testing.B, ds []time.Duration) {
	if len(ds) == 0 {
		return
	}
	slices.Sort(ds)
	at := func(q float64) float64 {
		i := int(q*float64(len(ds))+0.5) - 1
		i = max(0, min(i, len(ds)-1))
		return float64(ds[i]) / float64(time.Millisecond)
	}
	b.ReportMetric(at(0.50), "p50-ms")
	b.ReportMetric(at(0.99), "p99-ms")
}

func BenchmarkSessionReady(b *testing.B) {
	for _, be := range benchBackends(b) {
		b.Run(be.name+"/cold", func(b *testing.B) {
			ws, pm, spec := poolWorkspace(b)
			tr := be.transport(b)
			ctx := context.Background()
			var ds []time.Duration
			b.ResetTimer()
			for range b.N {
				t0 := time.Now()
				s, err := orchestrator.Open(ctx, orchestrator.Config{Workspace: ws, Transport: tr, Kernel: spec.Kernel, Env: sandboxEnv, PathMap: pm})
				if err != nil {
					b.Fatal(err)
				}
				ds = append(ds, time.Since(t0))
				b.StopTimer()
				s.Close()
				b.StartTimer()
			}
			b.StopTimer()
			percentiles(b, ds)
		})
		b.Run(be.name+"/pool", func(b *testing.B) {
			ws, pm, spec := poolWorkspace(b)
			p := newPool(b, be.transport(b), 2, spec)
			ctx := context.Background()
			var ds []time.Duration
			b.ResetTimer()
			for range b.N {
				t0 := time.Now()
				s, err := orchestrator.Open(ctx, orchestrator.Config{Workspace: ws, Transport: p, Kernel: spec.Kernel, Env: sandboxEnv, PathMap: pm})
				if err != nil {
					b.Fatal(err)
				}
				ds = append(ds, time.Since(t0))
				b.StopTimer()
				s.Close()
				waitPool(b, p, spec, 2)
				b.StartTimer()
			}
			b.StopTimer()
			percentiles(b, ds)
		})
	}
}

func BenchmarkPoolClaim20(b *testing.B) {
	const n = 20
	for _, be := range benchBackends(b) {
		b.Run(be.name, func(b *testing.B) {
			ws, pm, spec := poolWorkspace(b)
			p := newPool(b, be.transport(b), n, spec)
			ctx := context.Background()
			var ds []time.Duration
			b.ResetTimer()
			for range b.N {
				var mu sync.Mutex
				var sessions []*orchestrator.Session
				var wg sync.WaitGroup
				t0 := time.Now()
				for range n {
					wg.Go(func() {
						s, err := orchestrator.Open(ctx, orchestrator.Config{Workspace: ws, Transport: p, Kernel: spec.Kernel, Env: sandboxEnv, PathMap: pm})
						if err != nil {
							b.Error(err)
							return
						}
						d := time.Since(t0)
						mu.Lock()
						ds = append(ds, d)
						sessions = append(sessions, s)
						mu.Unlock()
					})
				}
				wg.Wait()
				b.StopTimer()
				var closing sync.WaitGroup
				for _, s := range sessions {
					closing.Go(func() { s.Close() })
				}
				closing.Wait()
				waitPool(b, p, spec, n)
				b.StartTimer()
			}
			b.StopTimer()
			percentiles(b, ds)
		})
	}
}
