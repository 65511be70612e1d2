package session

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"mvdan.cc/sh/v3/shell"

	"github.com/paddockhq/paddock/config"
	"github.com/paddockhq/paddock/daemon/api"
)

// FromRequest reads a daemon's request to open a session as a command line is read: its
// fields and its settings set the settings keys the options bind (api.OptionKeys), above
// every other source ("request"); the rest are the transport's options. A settings key no
// option binds cannot be set per session.
func FromRequest(req api.OpenRequest) (config.Options, Transport, error) {
	o := config.Options{Workspace: req.Workspace, Set: map[string]any{}, SetBy: "request"}
	var t Transport
	keys := api.OptionKeys()
	set := func(option string, val any) {
		o.Set[keys[option]] = val
		t.Given = append(t.Given, option)
	}
	for option, val := range map[string]string{"transport": req.Transport, "image": req.Image, "network": req.Network} {
		if val != "" {
			set(option, val)
		}
	}
	if len(req.Env) > 0 {
		set("env", req.Env)
	}
	for _, m := range req.Mounts {
		pm, err := ParseMount(m)
		if err != nil {
			return o, t, err
		}
		t.Mounts = append(t.Mounts, pm)
		t.Given = append(t.Given, "mount")
	}
	if len(req.AllowNet) > 0 {
		t.AllowNet = slices.Clone(req.AllowNet)
		t.Given = append(t.Given, "allow-net")
	}
	if req.Wrap != "" {
		argv, err := ParseWrap(req.Wrap)
		if err != nil {
			return o, t, err
		}
		t.Wrap = argv
		t.Given = append(t.Given, "wrap")
	}
	optionOf := map[string]string{}
	for option, k := range keys {
		optionOf[strings.ToLower(k)] = option
	}
	for k, val := range req.Settings {
		option, ok := optionOf[strings.ToLower(k)]
		if !ok {
			return o, t, &OptionError{Msg: fmt.Sprintf("settings key %q cannot be set per session", k)}
		}
		if val != "" {
			set(option, val)
		}
	}
	return o, t, nil
}

// ParseWrap reads a wrapper command as a shell would split it, expanding nothing.
func ParseWrap(s string) ([]string, error) {
	argv, err := shell.Fields(s, func(string) string { return "" })
	if err != nil {
		return nil, &OptionError{Msg: "--wrap: " + err.Error()}
	}
	return argv, nil
}

// Load reads the settings o names; one that cannot be read is an OptionError.
func Load(o config.Options) (*config.Loaded, error) {
	l, err := config.Load(o)
	if err != nil {
		return nil, &OptionError{Msg: err.Error(), Err: err}
	}
	return l, nil
}

// Requested is a session prepared from a daemon's request.
type Requested struct {
	*Prepared
	// Warnings are what to tell the client: settings ignored, notices.
	Warnings []string
}

// PrepareRequest prepares the session a daemon's request asks for: its settings are the
// request's workspace's, read with the request above them (FromRequest), its blocking budget
// the request's when set. The daemon keeps its sessions' audit in its own state, so none is
// set here. listenIn is where its pool's warm kernels listen (Options.ListenIn); resume, when
// set, takes up a session a host that died opened (Options.Resume).
func PrepareRequest(ctx context.Context, req api.OpenRequest, listenIn, resume string) (*Requested, error) {
	o, t, err := FromRequest(req)
	if err != nil {
		return nil, err
	}
	l, err := Load(o)
	if err != nil {
		return nil, err
	}
	if req.BlockingBudget != "" {
		l.Settings.Shell.BlockingBudget = req.BlockingBudget
	}
	p, err := Prepare(ctx, Options{Workspace: req.Workspace, Settings: l, Transport: t, ListenIn: listenIn, Resume: resume})
	if err != nil {
		return nil, err
	}
	r := &Requested{Prepared: p}
	for _, w := range l.Warnings {
		r.Warnings = append(r.Warnings, "warning: "+w)
	}
	r.Warnings = append(r.Warnings, p.Notices...)
	return r, nil
}

// Effective is every setting of l, by key as the settings files spell it, with its source.
func Effective(l *config.Loaded) []api.Setting {
	vals, _ := config.Values(l.Settings)
	out := make([]api.Setting, 0, len(vals))
	for _, k := range slices.Sorted(maps.Keys(vals)) {
		src := l.Sources[strings.ToLower(k)]
		if src == "" {
			src = "default"
		}
		out = append(out, api.Setting{Key: k, Value: vals[k], Source: src})
	}
	return out
}
