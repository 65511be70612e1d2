package integration

import (
	"testing"

	"github.com/docker/docker/client"

	"github.com/paddockhq/paddock/internal/difftest"
	"github.com/paddockhq/paddock/orchestrator"
	"github.com/paddockhq/paddock/transport"
	"github.com/paddockhq/paddock/transport/docker"
)

// The differential test across engines and runtimes: each script gives the same steps, output
// and statuses through Podman as in a Docker container, and under gVisor (through containerd,
// Docker and Podman) as under runc, the sandbox a user would otherwise have. The scripts are
// cmd/paddock's differential list (there checked against bash on the host).
//
// Under Debian's runsc (20221219) they agree through the kernel's tracer: that gVisor refuses
// AT_NO_AUTOMOUNT in statx and newfstatat with EINVAL, which coreutils' ls and stat pass on
// every named path, and the kernel starts each command through a tracer that clears the
// flag (transport/kernel/automount.go; README: gVisor).

// differentialFixture writes the files the differential scripts run on into dir, which it
// empties first.
func differentialFixture(t testing.TB, dir string) {
	t.Helper()
	if err := difftest.Fixture(dir); err != nil {
		t.Fatal(err)
	}
}

// runDifferential runs every script in a session on ref and one on under, each on a fresh
// fixture, and reports where the results differ.
func runDifferential(t *testing.T, ref, under transport.Transport) {
	ctx := testContext(t)
	rs, rws := transportSession(t, ctx, ref, nil)
	us, uws := transportSession(t, ctx, under, nil)
	for _, script := range difftest.Scripts {
		run := func(s *orchestrator.Session, ws string) string {
			differentialFixture(t, ws)
			res, err := s.Bash(ctx, script)
			if err != nil {
				t.Fatalf("%q: %v", script, err)
			}
			return res.String()
		}
		if want, got := run(rs, rws), run(us, uws); got != want {
			t.Errorf("%q:\nunder test:\n%s\nreference:\n%s", script, got, want)
		}
	}
}

func TestDifferentialPodman(t *testing.T) {
	pcli, _ := podmanEngine(t)
	img := hostImage(t, pcli)
	runDifferential(t, dockerRunc(t, engine(t)), &docker.Transport{Client: pcli, Image: img, Mounts: hostMounts(), Stderr: testWriter{t}})
}

// dockerRunc is a docker transport of a host image of its own, under the engine's runc.
func dockerRunc(t *testing.T, cli *client.Client) transport.Transport {
	return &docker.Transport{Client: cli, Image: hostImage(t, cli), Mounts: hostMounts(), Stderr: testWriter{t}}
}

// The differential scripts under gVisor through containerd, against the same image under runc.
func TestDifferentialRunsc(t *testing.T) {
	runsc(t)
	c := containerdDaemon(t)
	img := containerdHostImage(t, c)
	runDifferential(t, containerdTransport(t, c, img, docker.Hardening{}), runscContainerd(t, c, img, docker.Hardening{}))
}

// The differential scripts under the runtime Docker registered as runsc, against its runc.
func TestDifferentialDockerRunsc(t *testing.T) {
	cli := dockerRunsc(t)
	img := hostImage(t, cli)
	runDifferential(t, dockerRunc(t, cli), &docker.Transport{Client: cli, Image: img, Mounts: hostMounts(), Runtime: "runsc", Stderr: testWriter{t}})
}
