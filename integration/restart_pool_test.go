package integration

import (
	"context"
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
		// holds, as well as the two the sessions hold.
		for len(containersOf(kind, sandbox)) < 3 {
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
