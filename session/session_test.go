package session

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"

	"github.com/paddockhq/paddock/config"
	"github.com/paddockhq/paddock/internal/peer"
	"github.com/paddockhq/paddock/orchestrator"
	"github.com/paddockhq/paddock/pool"
	"github.com/paddockhq/paddock/transport"
	"github.com/paddockhq/paddock/transport/docker"
)

// Every kind of transport has its provider, and a provider's kind is the name it is found
// by.
func TestProvidersRegistered(t *testing.T) {
	want := []string{"containerd", "docker", "kubernetes", "local", "ssh", "wrapped"}
	if got := Kinds(); !slices.Equal(got, want) {
		t.Fatalf("kinds %v, want %v", got, want)
	}
	for _, k := range want {
		p, ok := Lookup(k)
		if !ok || p.Kind() != k {
			t.Errorf("Lookup(%q) = %v, %v", k, p, ok)
		}
	}
	defer func() {
		if recover() == nil {
			t.Error("a kind registered twice was taken")
		}
	}()
	Register(localProvider{})
}

// An option given for a kind that does not apply it is refused, naming the option and the
// kinds it applies to; an option no provider lists applies everywhere; no option, no refusal.
func TestRefusedOptions(t *testing.T) {
	seen := map[string]bool{}
	for _, p := range Providers() {
		for _, o := range p.Options() {
			seen[o] = true
		}
	}
	if len(seen) == 0 {
		t.Fatal("no provider applies any option")
	}
	for o := range seen {
		for _, p := range Providers() {
			err := refused(p.Kind(), []string{o})
			want := !slices.Contains(p.Options(), o)
			if (err != nil) != want {
				t.Errorf("%s on %s: refused %v, want %v", o, p.Kind(), err, want)
			}
			var oe *OptionError
			if err != nil && (!strings.Contains(err.Error(), "--"+o+" (") || !errors.As(err, &oe)) {
				t.Errorf("%s on %s: %v", o, p.Kind(), err)
			}
		}
	}
	for _, p := range Providers() {
		if err := refused(p.Kind(), nil); err != nil {
			t.Errorf("nothing given on %s: %v", p.Kind(), err)
		}
		if err := refused(p.Kind(), []string{"json", "workspace", "env"}); err != nil {
			t.Errorf("options of every kind on %s: %v", p.Kind(), err)
		}
	}
}

func loaded(t *testing.T, set map[string]any) *config.Loaded {
	t.Helper()
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	l, err := config.Load(config.Options{Workspace: t.TempDir(), Set: set, SetBy: "test"})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// A kind no provider has, an option the kind does not apply and a setting that cannot be
// read are the caller's to fix (OptionError), and nothing is left prepared.
func TestPrepareRefuses(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		name  string
		set   map[string]any
		given []string
		want  string
	}{
		{"unknown kind", map[string]any{"kernelTransport.kind": "vm"}, nil, `unknown transport "vm" (containerd, docker, kubernetes, local, ssh, wrapped)`},
		{"memory on local", map[string]any{"kernelTransport.kind": "local"}, []string{"memory"}, "the local transport does not apply --memory (containerd, docker, kubernetes only)"},
		{"pool on local", map[string]any{"kernelTransport.kind": "local"}, []string{"pool"}, "the local transport does not apply --pool (containerd, docker, kubernetes only)"},
		{"wrapped without a wrapper", map[string]any{"kernelTransport.kind": "wrapped"}, nil, "needs the wrapper command"},
		{"ssh without a box", map[string]any{"kernelTransport.kind": "ssh"}, nil, "needs the box"},
		{"bad auto set", map[string]any{"kernelTransport.kind": "local", "shell.autoEffects": "read,teleport"}, nil, "shell.autoEffects"},
		{"bad job timeout", map[string]any{"kernelTransport.kind": "local", "shell.jobTimeout": "soon"}, nil, "shell.jobTimeout"},
		{"bad memory", map[string]any{"kernelTransport.kind": "docker", "kernelTransport.docker.memory": "lots"}, nil, `memory "lots"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.name == "bad memory" {
				requireDocker(t)
			}
			l := loaded(t, c.set)
			p, err := Prepare(ctx, Options{Workspace: t.TempDir(), Settings: l, Transport: Transport{Given: c.given}})
			var oe *OptionError
			if err == nil || !errors.As(err, &oe) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Prepare = %v, %v; want an OptionError saying %q", p, err, c.want)
			}
		})
	}
}

// A local session is prepared with the local kind, its settings' limits and policy, and
// nothing to finish.
func TestPrepareLocal(t *testing.T) {
	l := loaded(t, map[string]any{"kernelTransport.kind": "local", "output.bytes": "123", "shell.jobTimeout": "90s"})
	ws := t.TempDir()
	p, err := Prepare(context.Background(), Options{Workspace: ws, Settings: l})
	if err != nil {
		t.Fatal(err)
	}
	if p.Kind != "local" || p.Config.Workspace != ws || p.Config.Limit.Bytes != 123 || p.Config.JobTimeout.Seconds() != 90 || p.Config.Policy.Auto == nil {
		t.Errorf("prepared %+v", p)
	}
	if p.Config.Ephemeral || p.Config.PathMap != nil {
		t.Errorf("a local session is neither ephemeral nor mapped: %+v", p.Config)
	}
	if rep, err := p.Finish(context.Background()); rep != nil || err != nil {
		t.Errorf("Finish = %v, %v", rep, err)
	}
}

// A pooled docker session is reported as docker: the kind is the provider's, whatever
// wraps its transport.
func TestPooledKind(t *testing.T) {
	requireDocker(t)
	l := loaded(t, map[string]any{"kernelTransport.kind": "docker", "kernelTransport.docker.pool": "1"})
	ctx := context.Background()
	s, p, err := Open(ctx, Options{Workspace: t.TempDir(), Settings: l})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Finish(ctx)
	defer s.Close()
	if p.Kind != "docker" {
		t.Errorf("a pooled docker session's kind is %q", p.Kind)
	}
	res, err := s.Run(ctx, orchestrator.Call{Script: "echo pooled"})
	if err != nil || !strings.Contains(res.String(), "pooled") {
		t.Errorf("run in a pooled sandbox: %v, %v", res, err)
	}
}

func requireDocker(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	cli, err := docker.Connect(ctx)
	if err != nil {
		peer.Missing(t, "no Docker engine: %v", err)
		return
	}
	cli.Close()
}

// A pooled session prepared and never opened (an open that fails later, a bad request)
// leaves no warm sandbox behind once it is finished.
func TestPoolGoesWithFinish(t *testing.T) {
	requireDocker(t)
	ctx := context.Background()
	l := loaded(t, map[string]any{"kernelTransport.kind": "docker", "kernelTransport.docker.pool": "2"})
	p, err := Prepare(ctx, Options{Workspace: t.TempDir(), Settings: l})
	if err != nil {
		t.Fatal(err)
	}
	sc, ok := p.Config.Transport.(*pool.Scoped)
	if !ok {
		t.Fatalf("a pooled session's transport is %T", p.Config.Transport)
	}
	cli, err := docker.Connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	warm := func() int {
		list, err := cli.ContainerList(ctx, container.ListOptions{All: true, Filters: filters.NewArgs(filters.Arg("label", pool.Label+"="+sc.Pool.ID()))})
		if err != nil {
			t.Fatal(err)
		}
		return len(list)
	}
	// The pool fills in the background: wait until it holds a warm kernel, as the session's
	// own would have claimed it (the spec withPool warmed).
	wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	spec := transport.Spec{Kernel: p.Config.Kernel, Cwd: p.Config.Workspace, PathMap: p.Config.PathMap}
	if err := sc.Pool.WaitReady(wctx, spec, 1); err != nil {
		t.Fatalf("the pool warmed no sandbox: %v", err)
	}
	if warm() == 0 {
		t.Fatal("the pool holds a warm kernel but the engine has no container of it")
	}
	if _, err := p.Finish(ctx); err != nil {
		t.Fatal(err)
	}
	if n := warm(); n != 0 {
		t.Errorf("%d warm sandboxes left after Finish", n)
	}
}

// The machine's checks: a line for each engine a provider checks, the reflink test of the
// directory named and the kernel binary, each with a detail, and a fix when not ok.
func TestChecks(t *testing.T) {
	got := map[string]Check{}
	for _, c := range Checks(context.Background(), t.TempDir()) {
		if c.Detail == "" || (!c.OK && c.Fix == "" && c.Name != "docker") {
			t.Errorf("check %+v: no detail, or not ok with no fix", c)
		}
		got[c.Name] = c
	}
	// The egress line names every kind once, by how its sandboxes reach the network.
	for _, k := range Kinds() {
		if n := strings.Count(got["egress"].Detail, k+":") + strings.Count(got["egress"].Detail, k+","); n != 1 {
			t.Errorf("egress names %s %d times: %q", k, n, got["egress"].Detail)
		}
	}
	for _, name := range []string{"docker", "containerd", "egress", "reflink", "kernel"} {
		if _, ok := got[name]; !ok {
			t.Errorf("no %s check in %v", name, got)
		}
	}
	if !got["kernel"].OK {
		t.Errorf("kernel: %+v", got["kernel"])
	}
	if c := checkReflink(filepath.Join(t.TempDir(), "missing")); c.OK || c.Fix == "" {
		t.Errorf("reflink in a missing directory: %+v", c)
	}
}
