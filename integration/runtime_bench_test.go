package integration

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/paddockhq/paddock/orchestrator"
	"github.com/paddockhq/paddock/transport"
	"github.com/paddockhq/paddock/transport/docker"
	"github.com/paddockhq/paddock/transport/environ"
	"github.com/paddockhq/paddock/transport/pathmap"
)

// BenchmarkRuntimes measures, in one run, a session made ready (a fresh hardened sandbox of
// the host image, its kernel answering) and then a `true` step in it, under gVisor against
// runc (both through containerd, the Docker engine's own), through Podman against Docker
// (both under runc), and under gVisor through Podman (its service whose default runtime is
// runsc) against Podman under runc. Each iteration does one of each, in turn, so that all
// meet the same load; it reports each one's mean and the ratios runsc/runc, podman/docker and
// podman-runsc/podman.
//
//	PADDOCK_PODMAN_HOST=unix:///PATH/podman.sock PADDOCK_PODMAN_RUNSC_HOST=unix:///PATH/runsc.sock \
//	  go test ./integration -run '^$' -bench Runtimes -benchtime 10x
func BenchmarkRuntimes(b *testing.B) {
	runsc(b)
	cli := engine(b)
	pcli, _ := podmanEngine(b)
	rcli, _ := podmanRunscEngine(b)
	c := containerdDaemon(b)
	cimg := containerdHostImage(b, c)
	kernel := kernelBinary(b)
	ws := b.TempDir()
	pm, err := pathmap.New(pathmap.Mount{Sandbox: "/work", Host: ws})
	if err != nil {
		b.Fatal(err)
	}
	env, _ := environ.Sandbox(os.Environ(), nil, sandboxEnv, pm)
	runc := containerdTransport(b, c, cimg, docker.Hardening{})
	gvisor := runscContainerd(b, c, cimg, docker.Hardening{})
	dock := &docker.Transport{Client: cli, Image: hostImage(b, cli), Mounts: hostMounts(), NoReap: true}
	pod := &docker.Transport{Client: pcli, Image: hostImage(b, pcli), Mounts: hostMounts(), NoReap: true}
	podRunsc := &docker.Transport{Client: rcli, Image: hostImage(b, rcli), Mounts: hostMounts(), Runtime: "runsc", NoReap: true}
	backends := []struct {
		name string
		tr   transport.Transport
	}{{"runc", runc}, {"runsc", gvisor}, {"docker", dock}, {"podman", pod}, {"podman-runsc", podRunsc}}
	ready := make([]time.Duration, len(backends))
	step := make([]time.Duration, len(backends))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	measure := func(i int) {
		t0 := time.Now()
		s, err := orchestrator.Open(ctx, orchestrator.Config{Workspace: ws, Transport: backends[i].tr, Kernel: kernel, Env: env, PathMap: pm, Ephemeral: true})
		if err != nil {
			b.Fatalf("%s: %v", backends[i].name, err)
		}
		if _, err := s.Ping(ctx); err != nil {
			b.Fatalf("%s: %v", backends[i].name, err)
		}
		t1 := time.Now()
		stepTrue(b, ctx, s)
		t2 := time.Now()
		ready[i] += t1.Sub(t0)
		step[i] += t2.Sub(t1)
		s.Close()
	}
	for i := range backends { // each warmed once, untimed: images unpacked, wrappers written
		measure(i)
		ready[i], step[i] = 0, 0
	}
	b.ResetTimer()
	for n := 0; n < b.N; n++ {
		for i := range backends {
			measure(i)
		}
	}
	b.StopTimer()
	for i, be := range backends {
		b.ReportMetric(float64(ready[i].Milliseconds())/float64(b.N), be.name+"-ready-ms/op")
		b.ReportMetric(float64(step[i].Microseconds())/float64(b.N), be.name+"-step-µs/op")
	}
	b.ReportMetric(float64(ready[1])/float64(ready[0]), "runsc/runc-ready")
	b.ReportMetric(float64(step[1])/float64(step[0]), "runsc/runc-step")
	b.ReportMetric(float64(ready[3])/float64(ready[2]), "podman/docker-ready")
	b.ReportMetric(float64(step[3])/float64(step[2]), "podman/docker-step")
	b.ReportMetric(float64(ready[4])/float64(ready[3]), "podman-runsc/podman-ready")
	b.ReportMetric(float64(step[4])/float64(step[3]), "podman-runsc/podman-step")
}
