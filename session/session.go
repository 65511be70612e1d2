// Package session opens Paddock sessions from typed options, the same way for every front
// end (the CLI, the daemon, an MCP server): the settings give the policy and the limits, and
// the transport's provider makes where the kernel runs.
//
// # Adding a transport
//
// A transport is its own package under transport/ (the transport.Transport contract, its
// conformance test) and one provider file here that registers it from init: Kind, the
// options it applies, Open, Recover, Reap, Check. Nothing in cmd/ changes: the CLI's
// --transport, the daemon's requests and `paddock doctor` list the kinds registered. Outside
// its own package a new kind touches four files (and go.mod for a client library): its
// provider file here, the provider's test (session_test.go's table of kinds), its settings
// in config/config.go (kernelTransport.KIND.*), and README's transport table and section.
// The kubernetes transport was added so: session/kubernetes.go, session/session_test.go,
// config/config.go, README.md.
package session

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/paddockhq/paddock/config"
	"github.com/paddockhq/paddock/errdefs"
	"github.com/paddockhq/paddock/internal/place"
	"github.com/paddockhq/paddock/orchestrator"
	"github.com/paddockhq/paddock/policy"
	"github.com/paddockhq/paddock/pool"
	"github.com/paddockhq/paddock/transport"
	"github.com/paddockhq/paddock/transport/docker"
	"github.com/paddockhq/paddock/transport/pathmap"
	"github.com/paddockhq/paddock/workspace"
)

// Options are what a session is opened with.
type Options struct {
	// Workspace is the host directory the session works in; it must exist.
	Workspace string
	// Settings are the effective settings (config.Load), trusted and project alike.
	Settings *config.Loaded
	// Transport are the transport's options that have no settings key.
	Transport Transport
	// AuditFile is where the session records its verdicts; "": none.
	AuditFile string
	// Stderr receives the transports' own diagnostics; nil: os.Stderr.
	Stderr io.Writer
	// ListenIn, when set, is a private directory (0700) where a pool's warm kernels listen,
	// each in a directory of its own, so that a pooled session outlives its host as an
	// unpooled one does (a daemon's; see pool.Config.ListenIn). "": they do not listen.
	ListenIn string
	// Resume, when set, is the Prepared.Resume of the session's first opening, by a host that
	// died: the session is taken up where it worked (a synced workspace's copy on its box),
	// not made anew. Only a daemon that reattaches to the session's kernel sets it.
	Resume string
}

// Transport are a session's transport options beyond the settings, as a front end takes
// them (a command line, a request).
type Transport struct {
	CapAdd        []string // docker, containerd: capabilities the sandbox keeps
	NewPrivileges bool     // docker, containerd: leave the engine's no-new-privileges off
	NoTmpfs       bool     // docker, containerd: no private tmpfs at /tmp
	// Mounts, when set, are the directories both sides see, in place of the settings'
	// pathMap.
	Mounts []pathmap.Mount
	// Wrap, when set, is the wrapper command (wrapped), in place of the settings'.
	Wrap []string
	// AllowNet are targets allowed besides the settings' network.allow (--allow-net).
	AllowNet []string
	// EgressViaHost offers an ssh box's steps the host's proxy through the connection
	// (--egress-via-host: network.egress proxy for this session).
	EgressViaHost bool
	// Given names the options the user gave (a flag, a request's field or setting), by the
	// names providers' Options use: one a kind does not apply is refused, not ignored.
	Given []string
}

// Prepared is a session's configuration, made but not yet opened.
type Prepared struct {
	Config orchestrator.Config
	// Kind is the transport's kind, as its provider names it.
	Kind string
	// Notices are what to tell the user: why a default was not taken, variables left out.
	Notices []string
	// Resume is what a host that takes the session up after this one died opens it with
	// (Options.Resume); "" when the provider needs nothing.
	Resume string
	close  []func(context.Context) (*workspace.Report, error)
}

// Finish is run once the session has closed: it hands a copied workspace back (its
// report) and frees what the transport holds. It runs once; a second call returns nil.
func (p *Prepared) Finish(ctx context.Context) (*workspace.Report, error) {
	var rep *workspace.Report
	var errs []error
	for _, c := range p.close {
		r, err := c(ctx)
		if r != nil {
			rep = r
		}
		errs = append(errs, err)
	}
	p.close = nil
	return rep, errors.Join(errs...)
}

// chooseTimeout bounds trying the Docker engine when no kind is set.
const chooseTimeout = 3 * time.Second

// Prepare makes a session's configuration from o: the policy and the limits from the
// settings, the transport from its provider (kernelTransport.kind; "": docker when an
// engine answers, else local, with a notice saying why).
func Prepare(ctx context.Context, o Options) (*Prepared, error) {
	if o.Settings == nil {
		return nil, &OptionError{Msg: "session: no settings"}
	}
	if o.Stderr == nil {
		o.Stderr = os.Stderr
	}
	s := &o.Settings.Settings
	if err := s.Output.Validate(); err != nil {
		return nil, &OptionError{Msg: err.Error()}
	}
	pol, err := Policy(o.Settings)
	if err != nil {
		return nil, err
	}
	pol.AuditFile = o.AuditFile
	timeout, err := JobTimeout(o.Settings)
	if err != nil {
		return nil, err
	}
	p := &Prepared{Config: orchestrator.Config{Workspace: o.Workspace, Limit: s.Output.Limit, Policy: pol,
		JobTimeout: timeout, ArtifactBytes: s.Output.ArtifactBytes}}
	if b := s.Shell.BlockingBudget; b != "" {
		d, err := config.ParseDuration(b)
		if err != nil {
			return nil, &OptionError{Msg: "shell.blockingBudget: " + err.Error()}
		}
		p.Config.Budget = d
	}
	r := &Request{Options: o, Environ: os.Environ()}
	kind, chosen := s.KernelTransport.Kind, ""
	if kind == "" {
		cctx, cancel := context.WithTimeout(ctx, chooseTimeout)
		c, err := docker.Connect(cctx)
		cancel()
		if err != nil {
			kind = "local"
			chosen = fmt.Sprintf("no Docker engine reachable (%v): the kernel runs locally, unconfined; `paddock doctor` says what to fix", oneLine(err))
			p.Notices = append(p.Notices, chosen)
		} else {
			kind, r.docker = "docker", c
		}
	}
	prov, ok := Lookup(kind)
	if !ok {
		closeClient(r)
		return nil, &OptionError{Msg: fmt.Sprintf("unknown transport %q (%s)", kind, strings.Join(Kinds(), ", "))}
	}
	if err := refused(kind, o.Transport.Given); err != nil {
		closeClient(r)
		if chosen != "" { // the kind was not asked for: say why it is this one
			err.(*OptionError).Msg += "\n" + chosen
		}
		return nil, err
	}
	op, err := prov.Open(ctx, r)
	if err != nil {
		closeClient(r)
		return nil, err
	}
	p.Kind, p.Resume = prov.Kind(), op.Resume
	p.Notices = append(p.Notices, op.Notices...)
	c := &p.Config
	c.Transport, c.Kernel, c.Env, c.PathMap, c.Ephemeral = op.Transport, op.Kernel, op.Env, op.PathMap, op.Ephemeral
	c.ListenOnce = op.ListenOnce
	if op.Workspace != "" {
		c.Workspace = op.Workspace
	}
	if op.Close != nil {
		p.close = append(p.close, op.Close)
	}
	mode := s.Network.Egress
	if o.Transport.EgressViaHost {
		mode = EgressProxy
	}
	eg, notice, err := egressFor(kind, mode, op.Egress, op.EgressListen, append(slices.Clone(s.Network.Allow), o.Transport.AllowNet...), s.Network.Deny)
	if err != nil {
		p.Finish(ctx)
		return nil, err
	}
	if notice != "" {
		p.Notices = append(p.Notices, notice)
	}
	c.Egress = eg
	if n := s.KernelTransport.Docker.Pool; n > 0 {
		if !op.Pools {
			p.Notices = append(p.Notices, fmt.Sprintf("the %s transport keeps no warm sandboxes: it starts its kernels as asked", kind))
		} else {
			pl, err := withPool(c, n, o.ListenIn, c.Egress != nil && c.Egress.Sandboxed())
			if pl != nil {
				// Closed first at Finish: a session that never started (or failed to open)
				// leaves no warm sandbox behind. The root kernel's end closes it too.
				p.close = append([]func(context.Context) (*workspace.Report, error){
					func(context.Context) (*workspace.Report, error) { return nil, pl.Close() }}, p.close...)
			}
			if err != nil {
				p.Finish(ctx)
				return nil, err
			}
		}
	}
	return p, nil
}

// Open prepares a session and opens it. Close the session, then Finish what was prepared.
func Open(ctx context.Context, o Options) (*orchestrator.Session, *Prepared, error) {
	p, err := Prepare(ctx, o)
	if err != nil {
		return nil, nil, err
	}
	s, err := orchestrator.Open(ctx, p.Config)
	if err != nil {
		p.Finish(ctx)
		return nil, nil, err
	}
	return s, p, nil
}

func closeClient(r *Request) {
	if c, ok := r.docker.(interface{ Close() error }); ok {
		c.Close()
	}
}

// withPool puts the session's transport behind a pool of size warm sandboxes, warmed at once
// for the session's own sandbox and scoped to it: its children claim the rest, and the pool
// is removed when the session's kernel ends.
func withPool(cfg *orchestrator.Config, size int, listenIn string, egress bool) (*pool.Pool, error) {
	cwd, err := filepath.Abs(cfg.Workspace)
	if err != nil {
		return nil, err
	}
	if cfg.PathMap != nil {
		if cwd, err = cfg.PathMap.ToSandbox(cwd); err != nil {
			return nil, err
		}
	}
	p := pool.New(pool.Config{Transport: cfg.Transport, Size: size, Env: docker.DefaultEnv, ListenIn: listenIn, Egress: egress})
	if err := p.Warm(transport.Spec{Kernel: cfg.Kernel, Cwd: cwd, PathMap: cfg.PathMap}); err != nil {
		return p, err
	}
	cfg.Transport = pool.Scope(p)
	return p, nil
}

// Policy is the policy the settings give a session (its audit file aside).
func Policy(l *config.Loaded) (orchestrator.Policy, error) {
	auto, err := policy.ParseAutoSet(l.Settings.Shell.AutoEffects)
	if err != nil {
		return orchestrator.Policy{}, &OptionError{Msg: "shell.autoEffects: " + err.Error()}
	}
	p := orchestrator.Policy{Auto: &auto, Settings: l.Files}
	for i, r := range l.Settings.Shell.Rules {
		a, err := policy.ParseRuleAction(r.Action)
		if err != nil {
			return orchestrator.Policy{}, &OptionError{Msg: fmt.Sprintf("shell.rules[%d]: %v", i, err)}
		}
		p.Rules = append(p.Rules, policy.ShellRule{Action: a, Prefix: strings.Fields(r.Command), Source: l.Sources["shell.rules"]})
	}
	return p, nil
}

// JobTimeout reads shell.jobTimeout: a duration such as 30m, or a bare number of seconds; ""
// or "-1": none.
func JobTimeout(l *config.Loaded) (time.Duration, error) {
	v := l.Settings.Shell.JobTimeout
	if v == "" {
		return 0, nil
	}
	d, err := config.ParseDuration(v)
	if err != nil {
		return 0, &OptionError{Msg: "shell.jobTimeout: " + err.Error()}
	}
	return max(d, 0), nil
}

// AuditFile is where a host's own sessions record their verdicts, one JSON line each:
// audit.jsonl in place.StateDir(). "" when the directory cannot be made.
func AuditFile() string {
	dir := place.StateDir()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return ""
	}
	return place.AuditFile(dir)
}

// OptionError is an option (or a setting) that cannot be carried out as written: a command
// line's usage error, an API's bad request.
type OptionError struct {
	Msg string
	Err error // the cause, when there is one
}

func (e *OptionError) Error() string { return e.Msg }
func (e *OptionError) Unwrap() error { return e.Err }

// Code is the error's stable code.
func (e *OptionError) Code() string { return "usage" }

// Class is the error's class.
func (e *OptionError) Class() errdefs.Class { return errdefs.InvalidArgument }

// oneLine is an error's first line.
func oneLine(err error) string {
	s, _, _ := strings.Cut(err.Error(), "\n")
	return s
}
