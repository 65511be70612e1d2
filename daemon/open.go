package daemon

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/paddockhq/paddock/config"
	"github.com/paddockhq/paddock/daemon/api"
	"github.com/paddockhq/paddock/internal/place"
	"github.com/paddockhq/paddock/session"
)

// OpenRequest is the daemon's opener when its Config names none: the session a request
// asks for, prepared by the library as the CLI prepares its own (session.PrepareRequest),
// its pool's warm kernels listening in the daemon's state so that it outlives the daemon.
// An option or a setting that cannot be carried out as written is a bad request.
func OpenRequest(ctx context.Context, req api.OpenRequest, at Where) (Opened, error) {
	var noOT time.Duration
	if req.NoOutputTimeout != "" { // read before anything is started for the session
		d, err := config.ParseDuration(req.NoOutputTimeout)
		if err != nil || d < 0 {
			return Opened{}, BadRequest(fmt.Sprintf("noOutputTimeout %q: a duration such as 10m", req.NoOutputTimeout))
		}
		noOT = d
	}
	r, err := session.PrepareRequest(ctx, req, at.ListenIn, at.Resume)
	if err != nil {
		return Opened{}, badOption(err)
	}
	return Opened{Config: r.Config, Transport: r.Kind, Finish: r.Finish, Warnings: r.Warnings, NoOutputTimeout: noOT, Resume: r.Resume}, nil
}

// RequestSettings answers /v1/settings when the daemon's Config names no other way: what a
// session opened with req would have of each setting, read as OpenRequest reads it.
func RequestSettings(_ context.Context, req api.OpenRequest) (api.Settings, error) {
	o, _, err := session.FromRequest(req)
	if err != nil {
		return api.Settings{}, badOption(err)
	}
	l, err := session.Load(o)
	if err != nil {
		return api.Settings{}, badOption(err)
	}
	return api.Settings{Settings: session.Effective(l), Warnings: l.Warnings}, nil
}

// RecoverSession is the daemon's recovery when its Config names none: the session's
// provider cleans up what it left.
func RecoverSession(ctx context.Context, s api.Session, l session.Left) string {
	return session.Recover(ctx, s.Transport, l)
}

// opened is the session a request asks for, as the Config's opener configures it, kept from
// the daemon's own places wherever they are: its state (each session's attach key and
// audit) and its socket, whoever reaches which answers every question.
func (s *Server) opened(ctx context.Context, req api.OpenRequest, at Where) (Opened, error) {
	o, err := s.cfg.Open(ctx, req, at)
	if err != nil {
		return o, err
	}
	own := &o.Config.Policy.Own
	own.Secret = append(own.Secret, place.Daemon(s.cfg.StateDir)...)
	if s.cfg.Socket != "" {
		own.Sockets = append(own.Sockets, s.cfg.Socket)
	}
	return o, nil
}

// badOption is err as a bad request when it is an option's.
func badOption(err error) error {
	var oe *session.OptionError
	if errors.As(err, &oe) {
		return BadRequest(err.Error())
	}
	return err
}
