package integration

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	cdclient "github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/pkg/namespaces"
	dockerclient "github.com/docker/docker/client"

	"github.com/paddockhq/paddock/client"
	"github.com/paddockhq/paddock/daemon/api"
	"github.com/paddockhq/paddock/orchestrator"
	"github.com/paddockhq/paddock/transport/containerd"
	"github.com/paddockhq/paddock/transport/docker"
	"github.com/paddockhq/paddock/transport/ssh/sshtest"
)

// A pooled session (kernelTransport.docker.pool) outlives a daemon killed outright as an
// unpooled one does, in Docker and in containerd: its kernel and its child's were warm
// kernels the pool started listening in the daemon's state before the session existed, and
// the next daemon reattaches to both in the same containers (each keeps what it wrote in its
// private /tmp), its job's output complete, each byte once — the frames the pool's own
// requests were answered with are numbered with the session's. The killed daemon's warm
// kernels that no session claimed are removed at the next start; closing the session leaves
// nothing in the state directory.
//
// law: job_no_silent_loss
func TestDaemonRestartPooled(t *testing.T) {
	cli := engine(t)
	cd, addr := containerdAt(t)
	bin := paddockBinary(t)
	env := append(os.Environ(), "XDG_CONFIG_HOME="+t.TempDir(), "PADDOCK_CONTAINERD_ADDRESS="+addr)
	dir, err := os.MkdirTemp("/tmp", "pd-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	sock := filepath.Join(dir, "run", "paddock.sock")
	state := filepath.Join(dir, "state")
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	containersOf := func(kind, session string) []string {
		var ids []string
		var err error
		switch kind {
		case "docker":
			ids, err = docker.SessionContainers(ctx, cli, session)
		case "containerd":
			ids, err = containerd.SessionContainers(ctx, cd, session)
		}
		if err != nil {
			t.Fatal(err)
		}
		slices.Sort(ids)
		return ids
	}
	// stored is what the state file of a session says of where its kernel listens.
	stored := func(id string) (listen, sandbox string) {
		b, err := os.ReadFile(filepath.Join(state, "sessions", id, "session.json"))
		if err != nil {
			t.Fatal(err)
		}
		var st struct{ Listen, Sandbox string }
		if err := json.Unmarshal(b, &st); err != nil {
			t.Fatal(err)
		}
		return st.Listen, st.Sandbox
	}

	first, firstDone := startServe(t, bin, sock, state, env)
	c, err := client.New("unix://" + sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ws := t.TempDir()
	g := newGate(t)
	const n = 100
	var want strings.Builder
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&want, "line%d\n", i)
	}
	type opened struct {
		kind, id, child, job, pool string
		claimed                    []string // the containers of the session and its child
	}
	var sessions []opened
	for _, kind := range []string{"docker", "containerd"} {
		s, err := c.Open(ctx, api.OpenRequest{Workspace: ws, Transport: kind, Mounts: g.mounts(ws), BlockingBudget: "300ms",
			Settings: map[string]string{"kernelTransport.docker.pool": "2"}})
		if err != nil {
			t.Fatalf("%s: %v", kind, err)
		}
		if s.Transport != kind {
			t.Errorf("a pooled %s session is reported as %q", kind, s.Transport)
		}
		kid, err := c.Spawn(ctx, s.ID, api.SpawnRequest{Name: "kid"})
		if err != nil {
			t.Fatalf("%s: %v", kind, err)
		}
		for id, mark := range map[string]string{s.ID: "root-" + kind, kid.ID: "kid-" + kind} {
			if r, err := c.Bash(ctx, id, api.BashRequest{Script: "echo " + mark + " > /tmp/mark"}); err != nil || r.End.Status != 0 {
				t.Fatalf("%s: %v %+v", kind, err, r)
			}
		}
		listen, sandbox := stored(s.ID)
		klisten, ksandbox := stored(kid.ID)
		if !strings.HasPrefix(listen, filepath.Join(state, "pool")+"/") || !strings.HasPrefix(sandbox, "pool-") ||
			filepath.Dir(klisten) != filepath.Dir(listen) || ksandbox != sandbox {
			t.Fatalf("%s: the session's kernel and its child's are not the pool's: %q %q, %q %q", kind, listen, sandbox, klisten, ksandbox)
		}
		script := g.program("print", "1", strconv.Itoa(n/2), "mark", "half-"+kind, "wait", "go",
			"print", strconv.Itoa(n/2+1), strconv.Itoa(n), "mark", "done-"+kind, "wait", "end")
		r, err := c.Bash(ctx, s.ID, api.BashRequest{Script: script})
		if err != nil || r.End.Kind != orchestrator.Detached {
			t.Fatalf("%s: %v %+v", kind, err, r)
		}
		// The pool refills behind the two claims: the kill comes with warm kernels no session
		// holds, as well as the two the sessions hold. Full (its two warm ones and the two
		// claimed), it starts no more: no container of the killed daemon is still being made
		// when the new one reaps, which the engine might finish after that.
		for len(containersOf(kind, sandbox)) < 4 {
			select {
			case <-ctx.Done():
				t.Fatalf("%s: the pool did not refill: %v", kind, containersOf(kind, sandbox))
			case <-time.After(50 * time.Millisecond):
			}
		}
		var claimed []string
		for _, id := range []string{s.ID, kid.ID} {
			l, _ := stored(id)
			for _, cid := range containersOf(kind, sandbox) {
				if listensIn(t, ctx, kind, cli, cd, cid) == l {
					claimed = append(claimed, cid)
				}
			}
		}
		slices.Sort(claimed)
		if len(claimed) != 2 {
			t.Fatalf("%s: the containers of the session and its child: %v", kind, claimed)
		}
		sessions = append(sessions, opened{kind, s.ID, kid.ID, r.End.Job, sandbox, claimed})
	}
	for _, o := range sessions {
		g.await(t, ctx, "half-"+o.kind)
	}
	first.Process.Signal(syscall.SIGKILL)
	<-firstDone
	g.open(t, "go")
	for _, o := range sessions {
		g.await(t, ctx, "done-"+o.kind)
	}

	startServe(t, bin, sock, state, env, "--drain")
	c.Close()
	for _, o := range sessions {
		// The killed daemon's warm kernels are gone; the two claimed ones are the same.
		if got := containersOf(o.kind, o.pool); !slices.Equal(got, o.claimed) {
			t.Errorf("%s: the old pool's containers after the restart: %v, want the claimed %v", o.kind, got, o.claimed)
		}
		for id, mark := range map[string]string{o.id: "root-" + o.kind, o.child: "kid-" + o.kind} {
			info, err := c.Session(ctx, id)
			if err != nil || info.State != api.Open || info.Transport != o.kind {
				t.Fatalf("%s: session %s after the restart: %v %s %s (%s)", o.kind, id, err, info.State, info.Transport, info.Reason)
			}
			r, err := c.Bash(ctx, id, api.BashRequest{Script: "cat /tmp/mark"})
			if err != nil || len(r.Steps) != 1 || r.Steps[0].Stdout.Text != mark+"\n" {
				t.Errorf("%s: session %s after the restart is not in its container: %v %+v", o.kind, id, err, r)
			}
		}
		// A child spawned after the restart claims a warm kernel of the session's new pool,
		// which listens where the next restart finds it.
		kid, err := c.Spawn(ctx, o.id, api.SpawnRequest{Name: "later"})
		if err != nil {
			t.Fatalf("%s: a child after the restart: %v", o.kind, err)
		}
		if r, err := c.Bash(ctx, kid.ID, api.BashRequest{Script: "echo later"}); err != nil || r.End.Status != 0 {
			t.Errorf("%s: a child after the restart: %v %+v", o.kind, err, r)
		}
		if l, sb := stored(kid.ID); sb == o.pool || !strings.HasPrefix(sb, "pool-") {
			t.Errorf("%s: a child after the restart is not the new pool's: %q %q", o.kind, l, sb)
		} else if _, err := os.Stat(filepath.Join(l, "kernel.sock")); err != nil {
			t.Errorf("%s: the directory a child after the restart listens in: %v", o.kind, err)
		}
		g.open(t, "end")
		job, err := c.Wait(ctx, o.id, o.job, "")
		if err != nil {
			t.Fatal(err)
		}
		res := job.Result
		if res.End.Kind != orchestrator.Finished || len(res.Steps) != 1 {
			t.Fatalf("%s: the job's end: %+v", o.kind, res)
		}
		if out := res.Steps[0].Stdout; out.Text != want.String() || out.DroppedBytes != 0 {
			t.Errorf("%s: the job's output: %q (%d dropped)", o.kind, out.Text, out.DroppedBytes)
		}
		if b, err := os.ReadFile(job.Artifact); err != nil || string(b) != want.String() {
			t.Errorf("%s: the job's artifact: %q %v", o.kind, b, err)
		}
		if _, err := c.CloseSession(ctx, o.id); err != nil {
			t.Errorf("close %s: %v", o.id, err)
		}
		if got := containersOf(o.kind, o.pool); len(got) != 0 {
			t.Errorf("%s: containers left after close: %v", o.kind, got)
		}
	}
	for _, sub := range []string{"sessions", "handbacks", "pool"} {
		if left, _ := os.ReadDir(filepath.Join(state, sub)); len(left) != 0 {
			t.Errorf("%s left in the state directory: %v", sub, left)
		}
	}
}

// listensIn is the directory a container's kernel listens in, as its labels say.
func listensIn(t *testing.T, ctx context.Context, kind string, cli *dockerclient.Client, cd *cdclient.Client, id string) string {
	t.Helper()
	switch kind {
	case "docker":
		c, err := cli.ContainerInspect(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		return c.Config.Labels[docker.LabelListen]
	default:
		nctx := namespaces.WithNamespace(ctx, containerd.Namespace)
		c, err := cd.LoadContainer(nctx, id)
		if err != nil {
			t.Fatal(err)
		}
		labels, err := c.Labels(nctx)
		if err != nil {
			t.Fatal(err)
		}
		return labels[docker.LabelListen]
	}
}

// A session on a box over ssh with its workspace synced there outlives a daemon killed
// outright: its kernel listened on the box, detached from the channel that started it, and
// the next daemon reattaches to it over a new connection and takes up the sync where it
// was (the copy on the box, what was sent) instead of sending the workspace again. A job
// in flight across the kill ends in the same kernel; the session's close hands back what
// changed on the box before and after the restart, and leaves no kernel, no directory on
// the box and no state.
//
// law: job_no_silent_loss
func TestDaemonRestartSynced(t *testing.T) {
	bin := paddockBinary(t)
	srv := sshtest.Start(t)
	srv.Home(t) // the daemons reach the box through this home's ssh config
	env := os.Environ()
	dir, err := os.MkdirTemp("/tmp", "pd-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	sock := filepath.Join(dir, "run", "paddock.sock")
	state := filepath.Join(dir, "state")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	first, firstDone := startServe(t, bin, sock, state, env)
	c, err := client.New("unix://" + sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ws := t.TempDir()
	os.WriteFile(filepath.Join(ws, "a.txt"), []byte("one\n"), 0o644)
	s, err := c.Open(ctx, api.OpenRequest{Workspace: ws, Transport: "ssh", BlockingBudget: "300ms", Settings: map[string]string{
		"kernelTransport.ssh.host": "box", "kernelTransport.ssh.kernelCache": filepath.Join(srv.Dir, "kernel-cache"),
		"kernelTransport.ssh.sync": "true"}})
	if err != nil {
		t.Fatal(err)
	}
	remote := ""
	for _, w := range s.Warnings {
		if _, r, ok := strings.Cut(w, "workspace sent to box:"); ok {
			remote, _, _ = strings.Cut(r, ";")
		}
	}
	if remote == "" {
		t.Fatalf("the session does not say where its workspace went: %q", s.Warnings)
	}
	before := func(id string) string {
		// The step's shell is the kernel's child ($PPID of a step of the grammar would be
		// expanded on the host, where it is unset).
		r, err := c.Bash(ctx, id, api.BashRequest{Script: "sh -c 'echo $PPID'"})
		if err != nil || len(r.Steps) != 1 || strings.TrimSpace(r.Steps[0].Stdout.Text) == "" {
			t.Fatalf("%v %+v", err, r)
		}
		return r.Steps[0].Stdout.Text
	}
	kernel := before(s.ID)
	if r, err := c.Bash(ctx, s.ID, api.BashRequest{Script: "echo two > a.txt"}); err != nil || r.End.Status != 0 {
		t.Fatalf("%v %+v", err, r)
	}
	job, err := c.Bash(ctx, s.ID, api.BashRequest{Script: "echo start; while [ ! -e go ]; do sleep 0.05; done; rm go; echo after > b.txt; echo end"})
	if err != nil || job.End.Kind != orchestrator.Detached {
		t.Fatalf("%v %+v", err, job)
	}
	first.Process.Signal(syscall.SIGKILL)
	<-firstDone

	startServe(t, bin, sock, state, env, "--drain")
	c.Close()
	info, err := c.Session(ctx, s.ID)
	if err != nil || info.State != api.Open || info.Transport != "ssh" {
		t.Fatalf("the synced session after the restart: %v %s (%s)", err, info.State, info.Reason)
	}
	if got := before(s.ID); got != kernel {
		t.Errorf("the session's kernel after the restart is %q, before it %q", got, kernel)
	}
	if err := os.WriteFile(filepath.Join(remote, "go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	j, err := c.Wait(ctx, s.ID, job.End.Job, "")
	if err != nil || !j.Done || j.Result.End.Kind != orchestrator.Finished {
		t.Fatalf("the job across the restart: %v %+v", err, j)
	}
	var out strings.Builder
	for _, st := range j.Result.Steps {
		out.WriteString(st.Stdout.Text)
	}
	if out.String() != "start\nend\n" {
		t.Errorf("the job's output: %q", out.String())
	}
	if _, err := os.Stat(filepath.Join(ws, "b.txt")); !os.IsNotExist(err) {
		t.Errorf("the box's file is in the workspace before the hand-back: %v", err)
	}
	closed, err := c.CloseSession(ctx, s.ID)
	if err != nil || closed.Handback == nil || len(closed.Handback.Taken) != 2 || closed.HandbackError != "" {
		t.Fatalf("the close after the restart: %v %+v %q", err, closed.Handback, closed.HandbackError)
	}
	for name, want := range map[string]string{"a.txt": "two\n", "b.txt": "after\n"} {
		if b, err := os.ReadFile(filepath.Join(ws, name)); err != nil || string(b) != want {
			t.Errorf("%s after the hand-back: %q %v", name, b, err)
		}
	}
	boxHome, _, _ := strings.Cut(remote, "/.cache/paddock/work/")
	if _, err := os.Stat(remote); !os.IsNotExist(err) {
		t.Errorf("the workspace's copy is left on the box: %v", err)
	}
	// The kernel's directory on the box is named for the one it had in the daemon's state
	// (other sessions' kernels, other tests', may listen beside it).
	sum := sha256.Sum256([]byte(filepath.Join(state, "sessions", s.ID, "kernel")))
	if _, err := os.Stat(filepath.Join(boxHome, ".cache", "paddock", "listen", hex.EncodeToString(sum[:12]))); !os.IsNotExist(err) {
		t.Errorf("the kernel's directory is left on the box: %v", err)
	}
	if names, _ := os.ReadDir(filepath.Join(state, "sessions")); len(names) != 0 {
		t.Errorf("left in the state directory: %v", names)
	}
}

// A synced ssh session that cannot be taken up (the local state of its copy went while no
// daemon ran) is listed as ended, and its kernel on the box is ended with it, and what its
// job ran: nothing of an agent's runs on a box with no host to answer for it.
func TestDaemonRestartSyncedLost(t *testing.T) {
	bin := paddockBinary(t)
	srv := sshtest.Start(t)
	home := srv.Home(t)
	env := os.Environ()
	dir, err := os.MkdirTemp("/tmp", "pd-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	sock := filepath.Join(dir, "run", "paddock.sock")
	state := filepath.Join(dir, "state")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	first, firstDone := startServe(t, bin, sock, state, env)
	c, err := client.New("unix://" + sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ws := t.TempDir()
	s, err := c.Open(ctx, api.OpenRequest{Workspace: ws, Transport: "ssh", BlockingBudget: "300ms", Settings: map[string]string{
		"kernelTransport.ssh.host": "box", "kernelTransport.ssh.kernelCache": filepath.Join(srv.Dir, "kernel-cache"),
		"kernelTransport.ssh.sync": "true"}})
	if err != nil {
		t.Fatal(err)
	}
	pidFile := filepath.Join(t.TempDir(), "pid")
	job, err := c.Bash(ctx, s.ID, api.BashRequest{Script: fmt.Sprintf("sh -c 'echo $$ > %s; exec sleep 600'", pidFile)})
	if err != nil || job.End.Kind != orchestrator.Detached {
		t.Fatalf("%v %+v", err, job)
	}
	var pid int
	for pid == 0 {
		b, _ := os.ReadFile(pidFile)
		fmt.Sscan(string(b), &pid)
		select {
		case <-ctx.Done():
			t.Fatal("the job did not start")
		case <-time.After(10 * time.Millisecond):
		}
	}
	first.Process.Signal(syscall.SIGKILL)
	<-firstDone
	syncs := filepath.Join(home, ".cache", "paddock", "sync")
	if names, err := os.ReadDir(syncs); err != nil || len(names) != 1 {
		t.Fatalf("the synced copies' local state: %v %v", names, err)
	}
	os.RemoveAll(syncs)

	startServe(t, bin, sock, state, env, "--drain")
	c.Close()
	info, err := c.Session(ctx, s.ID)
	if err != nil || info.State != api.Ended || !strings.Contains(info.Reason, "its kernel on box was ended") {
		t.Fatalf("the session after the restart: %v %s (%s)", err, info.State, info.Reason)
	}
	for syscall.Kill(pid, 0) == nil {
		select {
		case <-ctx.Done():
			t.Fatalf("the job's process %d still runs", pid)
		case <-time.After(20 * time.Millisecond):
		}
	}
}
