package integration

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"

	"github.com/paddockhq/paddock/client"
	"github.com/paddockhq/paddock/daemon/api"
	"github.com/paddockhq/paddock/internal/await"
	"github.com/paddockhq/paddock/transport/docker"
)

// A daemon killed outright while a docker session opens (its container made, labelled and
// started, its kernel not answering yet) leaves that container running: the next daemon on
// the state directory removes the session it never finished opening, and its reaper the
// container. The kernel here is a script that waits for a file the test never makes, so the
// opening waits as long as the test needs.
func TestOpeningSessionReaped(t *testing.T) {
	cli := engine(t)
	bin := paddockBinary(t)
	sock, state := serveDirs(t)
	ws := t.TempDir()
	kernel, err := os.ReadFile(filepath.Join(filepath.Dir(bin), "paddock-kernel"))
	if err != nil {
		t.Fatal(err)
	}
	real := filepath.Join(ws, "paddock-kernel")
	if err := os.WriteFile(real, kernel, 0o755); err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(t.TempDir(), "kernel.sh")
	body := fmt.Sprintf("#!/bin/sh\n: > %[1]s/started\nwhile [ ! -e %[1]s/go ]; do sleep 0.02; done\nexec %[2]s \"$@\"\n", ws, real)
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	env := append(os.Environ(), "XDG_CONFIG_HOME="+t.TempDir(), "PADDOCK_KERNEL="+script)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	// The containers of sessions of this state directory, found by the directory their
	// kernel listens in (a label set when the container is made).
	ofState := func(ctx context.Context) []string {
		list, err := cli.ContainerList(ctx, container.ListOptions{All: true, Filters: filters.NewArgs(filters.Arg("label", docker.LabelManaged+"=1"))})
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, c := range list {
			if strings.HasPrefix(c.Labels[docker.LabelListen], state+string(filepath.Separator)) {
				ids = append(ids, c.ID)
			}
		}
		return ids
	}
	t.Cleanup(func() {
		for _, id := range ofState(context.Background()) {
			cli.ContainerRemove(context.Background(), id, container.RemoveOptions{Force: true})
		}
	})

	first, firstDone := startServe(t, bin, sock, state, env)
	c, err := client.New("unix://" + sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	opened := make(chan error, 1)
	go func() {
		_, err := c.Open(ctx, api.OpenRequest{Workspace: ws, Transport: "docker"})
		opened <- err
	}()
	// The kernel's script makes the file started (a change in the workspace, seen through
	// inotify); the opening must not end first.
	wctx, wcancel := context.WithTimeout(ctx, 2*time.Minute)
	early, watched := make(chan error, 1), make(chan struct{})
	go func() {
		defer close(watched)
		select {
		case err := <-opened:
			early <- err
			wcancel()
		case <-wctx.Done():
		}
	}()
	err = await.File(wctx, filepath.Join(ws, "started"))
	wcancel()
	<-watched
	select {
	case err := <-early:
		t.Fatalf("the session opened, or failed to, before its kernel started: %v", err)
	default:
	}
	if err != nil {
		t.Fatalf("the session's container did not start: %v", err)
	}
	if ids := ofState(ctx); len(ids) != 1 {
		t.Fatalf("the opening session's containers: %v", ids)
	}
	first.Process.Signal(syscall.SIGKILL)
	<-firstDone
	if err := <-opened; err == nil {
		t.Fatal("the session opened with its daemon killed")
	}
	if ids := ofState(ctx); len(ids) != 1 {
		t.Fatalf("the killed daemon's opening session left containers %v; want its one", ids)
	}

	startServe(t, bin, sock, state, env, "--drain")
	if ids := ofState(ctx); len(ids) != 0 {
		t.Errorf("after a new daemon started, the opening session's container is left: %v", ids)
	}
	if ss, err := c.Sessions(ctx); err != nil || len(ss) != 0 {
		t.Errorf("the new daemon lists %+v %v", ss, err)
	}
	if left, _ := os.ReadDir(filepath.Join(state, "sessions")); len(left) != 0 {
		t.Errorf("left in the state directory: %v", left)
	}
}
