package integration

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/client"

	"github.com/paddockhq/paddock/internal/peer"
	"github.com/paddockhq/paddock/transport"
	"github.com/paddockhq/paddock/transport/docker"
	"github.com/paddockhq/paddock/transport/environ"
	"github.com/paddockhq/paddock/transport/pathmap"
)

// Environment of the test binary when it plays a host process that opens a docker session
// and waits to be killed.
const (
	hostModeEnv    = "PADDOCK_TEST_DOCKER_HOST" // the session's id
	hostImageEnv   = "PADDOCK_TEST_DOCKER_IMAGE"
	hostKernelEnv  = "PADDOCK_TEST_DOCKER_KERNEL"
	hostWorkdirEnv = "PADDOCK_TEST_DOCKER_WORKDIR"
	hostOnceEnv    = "PADDOCK_TEST_DOCKER_ONCE" // a directory: the kernel listens there for this host only
)

func TestMain(m *testing.M) {
	if session := os.Getenv(hostModeEnv); session != "" {
		os.Exit(playHost(session))
	}
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// playHost starts a kernel in a container for session, answers its ping, prints "ready"
// and waits to be killed.
func playHost(session string) int {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cli, err := docker.Connect(ctx)
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	ws := os.Getenv(hostWorkdirEnv)
	pm, err := pathmap.New(pathmap.Mount{Sandbox: "/work", Host: ws})
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	env, _ := environ.Sandbox(nil, nil, sandboxEnv, pm)
	tr := &docker.Transport{Client: cli, Image: os.Getenv(hostImageEnv), Mounts: hostMounts(), NoReap: true}
	spec := transport.Spec{Session: session, Kernel: os.Getenv(hostKernelEnv), Env: env, Cwd: "/work", PathMap: pm}
	if dir := os.Getenv(hostOnceEnv); dir != "" {
		spec.Listen, spec.Key, spec.Once = filepath.Join(dir, "kernel"), randomName("key-"), true
	}
	k, err := tr.Start(ctx, spec)
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	if _, err := newClient(k).ping(ctx); err != nil {
		fmt.Println("error", err)
		return 1
	}
	fmt.Println("ready")
	select {}
}

// A host process killed mid-session (SIGKILL: no cleanup of its own) leaves its container;
// the next start of the docker transport removes it, and leaves a live session's container.
func TestReaperRemovesDeadHostsContainers(t *testing.T) {
	testReaper(t, engine(t), nil)
}

// testReaper is the reaper's test on the engine of cli; env is what the host process played
// needs to reach the same engine (DOCKER_HOST).
func testReaper(t *testing.T, cli *client.Client, env []string) {
	img := hostImage(t, cli)
	ctx := testContext(t)
	dead := deadHost(t, cli, img, env)

	// This process's own session: alive, so the reaper must leave it.
	s, _ := dockerSession(t, ctx, cli, img, docker.Hardening{}, nil)
	live, err := docker.SessionContainers(ctx, cli, s.ID())
	if err != nil || len(live) != 1 {
		t.Fatalf("the live session has containers %v, %v", live, err)
	}
	if ids, err := docker.SessionContainers(ctx, cli, dead); err != nil || len(ids) != 0 {
		n, rerr := docker.Reap(ctx, cli) // the start's reaper logs its errors nowhere a test sees
		t.Fatalf("after a new start the dead host's session still has containers %v, %v; a reap now removes %d, %v", ids, err, n, rerr)
	}
	// A second reap finds nothing more, and the live session still answers.
	if n, err := docker.Reap(ctx, cli); err != nil || n != 0 {
		t.Fatalf("a second reap removed %d, %v", n, err)
	}
	if _, err := s.Ping(ctx); err != nil {
		t.Fatalf("the live session after the reaper: %v", err)
	}
}

// Reapers that run at once (two hosts starting, a daemon's and a test's) agree: when each
// returns without error, every dead host's container is gone, whichever of them removed
// it (a reaper that finds another's removal in progress waits for its end).
func TestConcurrentReapers(t *testing.T) {
	t.Parallel()
	testConcurrentReapers(t, engine(t), nil)
}

func testConcurrentReapers(t *testing.T, cli *client.Client, env []string) {
	img := hostImage(t, cli)
	ctx := testContext(t)
	var dead []string
	for range 3 {
		dead = append(dead, deadHost(t, cli, img, env))
	}
	const reapers = 4
	errs := make(chan error, reapers)
	for range reapers {
		go func() {
			if _, err := docker.Reap(ctx, cli); err != nil {
				errs <- err
				return
			}
			for _, d := range dead {
				if ids, err := docker.SessionContainers(ctx, cli, d); err != nil || len(ids) != 0 {
					errs <- fmt.Errorf("a reaper returned while the dead session %s has containers %v, %v", d, ids, err)
					return
				}
			}
			errs <- nil
		}()
	}
	for range reapers {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
}

// deadHost plays a host process that opens a docker session on the engine of cli (env: what
// it needs to reach it, DOCKER_HOST) and is killed (SIGKILL: no cleanup of its own) once its
// kernel answers; it returns the session's id, whose container is left.
func deadHost(t *testing.T, cli *client.Client, img string, env []string) string {
	t.Helper()
	ctx := testContext(t)
	dead := randomName("reaper-dead-")
	t.Cleanup(func() { removeSession(cli, dead) })
	host := exec.Command(os.Args[0], "-test.run=^$")
	host.Env = append(append(os.Environ(), env...), hostModeEnv+"="+dead, hostImageEnv+"="+img, hostKernelEnv+"="+kernelBinary(t), hostWorkdirEnv+"="+t.TempDir())
	if line := peer.StartHost(t, host); line != "ready" {
		t.Fatalf("the host process said %q", line)
	}
	if ids, err := docker.SessionContainers(ctx, cli, dead); err != nil || len(ids) != 1 {
		t.Fatalf("the live host's session has containers %v, %v; want one", ids, err)
	}
	host.Process.Signal(syscall.SIGKILL)
	host.Wait()
	// Its container is left (running, or ended and not removed): nobody cleaned up.
	if ids, err := docker.SessionContainers(ctx, cli, dead); err != nil || len(ids) != 1 {
		t.Fatalf("after the host's death its session has containers %v, %v; want its leftover", ids, err)
	}
	return dead
}

// removeSession removes what a test's session may have left.
func removeSession(cli *client.Client, session string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	docker.RemoveSession(ctx, cli, session)
}

// A kernel that listens for its host only (transport.Spec.Once: what a session of the CLI
// or MCP server gets on docker, for its frames' speed) ends with its host as one on its
// standard streams does: killed, the host leaves a stopped container whose listening
// directory is still there, and the next reap removes it all the same.
func TestOnceKernelEndsWithItsHost(t *testing.T) {
	cli := engine(t)
	img := hostImage(t, cli)
	kernel := kernelBinary(t)
	ctx := testContext(t)
	dead := randomName("once-dead-")
	t.Cleanup(func() { removeSession(cli, dead) })

	host := exec.Command(os.Args[0], "-test.run=^$")
	host.Env = append(os.Environ(), hostModeEnv+"="+dead, hostImageEnv+"="+img, hostKernelEnv+"="+kernel,
		hostWorkdirEnv+"="+t.TempDir(), hostOnceEnv+"="+t.TempDir())
	if line := peer.StartHost(t, host); line != "ready" {
		t.Fatalf("the host process said %q", line)
	}
	ids, err := docker.SessionContainers(ctx, cli, dead)
	if err != nil || len(ids) != 1 {
		t.Fatalf("the live host's session has containers %v, %v; want one", ids, err)
	}
	info, err := cli.ContainerInspect(ctx, ids[0])
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(info.Config.Cmd, "-once") || info.Config.OpenStdin {
		t.Fatalf("the kernel does not listen once: %q (stdin open %v)", info.Config.Cmd, info.Config.OpenStdin)
	}
	waited, errc := cli.ContainerWait(ctx, ids[0], container.WaitConditionNotRunning)
	host.Process.Signal(syscall.SIGKILL)
	host.Wait()
	select { // the kernel ends with its host's connection: no bound to wait out
	case <-waited:
	case err := <-errc:
		t.Fatalf("waiting for the kernel's end: %v", err)
	}
	if n, err := docker.Reap(ctx, cli); err != nil || n < 1 {
		t.Fatalf("the reap removed %d, %v", n, err)
	}
	if ids, err := docker.SessionContainers(ctx, cli, dead); err != nil || len(ids) != 0 {
		t.Fatalf("after the reap the dead host's session still has containers %v, %v", ids, err)
	}
}

// A host in another pid namespace of this machine and boot (a daemon in a container of its
// own that shares the machine's hostname and identity): its live session's container is not
// for the reaper here to judge. Its pid (1 in its namespace) names another process here,
// started at another time, so the reap removed it from under its live host before hosts
// said which pid namespace their pid is of.
func TestReaperSparesAnotherPIDNamespace(t *testing.T) {
	cli := engine(t)
	img := hostImage(t, cli)
	unshare := peer.Program(t, "unshare", "util-linux")
	ctx := testContext(t)
	live := randomName("reaper-pidns-")
	t.Cleanup(func() { removeSession(cli, live) })
	host := exec.Command(unshare, "--pid", "--kill-child", "--mount-proc", os.Args[0], "-test.run=^$")
	host.Env = append(os.Environ(), hostModeEnv+"="+live, hostImageEnv+"="+img, hostKernelEnv+"="+kernelBinary(t), hostWorkdirEnv+"="+t.TempDir())
	if line := peer.StartHost(t, host); line != "ready" {
		t.Fatalf("the host process said %q", line)
	}
	ids, err := docker.SessionContainers(ctx, cli, live)
	if err != nil || len(ids) != 1 {
		t.Fatalf("the live host's session has containers %v, %v; want one", ids, err)
	}
	info, err := cli.ContainerInspect(ctx, ids[0])
	if err != nil {
		t.Fatal(err)
	}
	ours := docker.HostLabels()[docker.LabelPIDNS]
	if l := info.Config.Labels; l[docker.LabelPID] != "1" || l[docker.LabelPIDNS] == "" || l[docker.LabelPIDNS] == ours || l[docker.LabelMachine] != docker.HostLabels()[docker.LabelMachine] {
		t.Fatalf("the host in its own pid namespace labelled its container %v (this namespace: %s)", l, ours)
	}
	if _, err := docker.Reap(ctx, cli); err != nil {
		t.Fatal(err)
	}
	if ids, err := docker.SessionContainers(ctx, cli, live); err != nil || len(ids) != 1 {
		t.Fatalf("after a reap here the live host's session has containers %v, %v; want its own", ids, err)
	}
}
