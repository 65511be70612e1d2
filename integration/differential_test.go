package integration

import (
	"strings"
	"testing"

	"github.com/docker/docker/client"

	"github.com/paddockhq/paddock/internal/difftest"
	"github.com/paddockhq/paddock/orchestrator"
	"github.com/paddockhq/paddock/transport"
	"github.com/paddockhq/paddock/transport/docker"
)

// The differential test across engines and runtimes: each script gives the same steps, output
// and statuses through Podman as in a Docker container, and under gVisor as under runc (through
// containerd, and through Docker), the sandbox a user would otherwise have. The scripts are
// cmd/paddock's differential list (there checked against bash on the host).
//
// Under gVisor a few scripts differ, and are held to differing in that one way (gvisorGaps):
// Debian's runsc (20221219) refuses AT_NO_AUTOMOUNT with EINVAL in both statx and newfstatat,
// and coreutils' ls and stat pass it on every named path. A filter cannot mend that: gVisor
// honours one installed in the sandbox (statx answers ENOSYS under one), but glibc's fallback
// then calls newfstatat with the same flag, which fails the same way; a filter can refuse a
// call, not drop one of its flags (README: gVisor).

// differentialFixture writes the files the differential scripts run on into dir, which it
// empties first.
func differentialFixture(t testing.TB, dir string) {
	t.Helper()
	if err := difftest.Fixture(dir); err != nil {
		t.Fatal(err)
	}
}

// runDifferential runs every script in a session on ref and one on under, each on a fresh
// fixture, and reports where the results differ. A script in gaps must differ, and its result
// under test hold the gap's text: a gap closed (a runtime mended) fails too, so the entry goes.
func runDifferential(t *testing.T, ref, under transport.Transport, gaps map[string]string) {
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
		want, got := run(rs, rws), run(us, uws)
		gap, known := gaps[script]
		switch {
		case known && got == want:
			t.Errorf("%q: the same as the reference now: the gap (%q) is closed, drop it", script, gap)
		case known && !strings.Contains(got, gap):
			t.Errorf("%q: differs, but not by the gap %q:\nunder test:\n%s\nreference:\n%s", script, gap, got, want)
		case !known && got != want:
			t.Errorf("%q:\nunder test:\n%s\nreference:\n%s", script, got, want)
		}
	}
}

// gvisorGaps are the differential scripts whose results differ under Debian's runsc: each runs
// ls on a named path, which fails with "Invalid argument" (EINVAL for AT_NO_AUTOMOUNT).
var gvisorGaps = map[string]string{
	`ls sub`:                                "ls: cannot access 'sub': Invalid argument",
	`ls nope 2>&1`:                          "ls: cannot access 'nope': Invalid argument",
	`ls nope 2> err.txt; cat err.txt`:       "ls: cannot access 'nope': Invalid argument",
	`ls nope a.txt &> all.txt; cat all.txt`: "ls: cannot access 'a.txt': Invalid argument",
	`echo both; ls nope`:                    "ls: cannot access 'nope': Invalid argument",
}

func TestDifferentialPodman(t *testing.T) {
	pcli, _ := podmanEngine(t)
	img := hostImage(t, pcli)
	runDifferential(t, dockerRunc(t, engine(t)), &docker.Transport{Client: pcli, Image: img, Mounts: hostMounts(), Stderr: testWriter{t}}, nil)
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
	runDifferential(t, containerdTransport(t, c, img, docker.Hardening{}), runscContainerd(t, c, img, docker.Hardening{}), gvisorGaps)
}

// The differential scripts under the runtime Docker registered as runsc, against its runc.
func TestDifferentialDockerRunsc(t *testing.T) {
	cli := dockerRunsc(t)
	img := hostImage(t, cli)
	runDifferential(t, dockerRunc(t, cli), &docker.Transport{Client: cli, Image: img, Mounts: hostMounts(), Runtime: "runsc", Stderr: testWriter{t}}, gvisorGaps)
}
