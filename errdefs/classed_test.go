package errdefs_test

import (
	"github.com/paddockhq/paddock/client"
	"github.com/paddockhq/paddock/daemon"
	"github.com/paddockhq/paddock/errdefs"
	"github.com/paddockhq/paddock/images"
	"github.com/paddockhq/paddock/orchestrator"
	"github.com/paddockhq/paddock/script"
	"github.com/paddockhq/paddock/session"
	"github.com/paddockhq/paddock/transport/docker"
	"github.com/paddockhq/paddock/transport/ssh"
	"github.com/paddockhq/paddock/transport/wrapped"
	"github.com/paddockhq/paddock/workspace"
)

// Every error type a front end shows says its class and code: the build fails if one
// stops.
var _ = []errdefs.Classed{
	(*orchestrator.NotFoundError)(nil), (*orchestrator.GoneError)(nil), (*orchestrator.WorkdirError)(nil),
	(*orchestrator.FSError)(nil), (*orchestrator.SpawnLimitError)(nil), (*orchestrator.StalledError)(nil),
	(*orchestrator.HandlerError)(nil), (*images.NoKernelError)(nil), (*daemon.LockedError)(nil),
	(*daemon.DirError)(nil), (*session.OptionError)(nil), (*script.ParseError)(nil), (*client.Error)(nil),
	(*docker.OutsideError)(nil), (*ssh.OutsideError)(nil), (*wrapped.OutsideError)(nil), (*workspace.Error)(nil),
	orchestrator.ErrClosed.(errdefs.Classed), images.ErrNoKernel.(errdefs.Classed),
}
