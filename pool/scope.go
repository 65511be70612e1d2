package pool

import (
	"context"
	"errors"
	"sync"

	"github.com/paddockhq/paddock/transport"
	"github.com/paddockhq/paddock/transport/wire"
)

var _ transport.Transport = (*Scoped)(nil)

// Scoped is a pool that lives as long as its first session: the first kernel it starts is
// the root session's (a command's session, whose children start after it), and killing that
// kernel closes the pool, removing the warm kernels left. A Start after that goes cold
// through the wrapped transport.
type Scoped struct {
	*Pool
	first sync.Once
}

// Scope returns p scoped to its first session.
func Scope(p *Pool) *Scoped { return &Scoped{Pool: p} }

// Start claims or starts a kernel as Pool.Start does; the first one closes the pool when
// it is killed.
func (s *Scoped) Start(ctx context.Context, spec transport.Spec) (transport.Kernel, error) {
	k, err := s.Pool.Start(ctx, spec)
	if errors.Is(err, ErrClosed) {
		return s.cfg.Transport.Start(ctx, spec)
	}
	root := false
	s.first.Do(func() { root = true })
	if !root {
		return k, err
	}
	if err != nil {
		s.Pool.Close()
		return nil, err
	}
	return &rootKernel{Kernel: k, pool: s.Pool}, nil
}

// Reattach reaches a kernel an earlier host's session left listening (Pool.Reattach). The
// first kernel the pool starts or reattaches is the root session's: a session taken up
// again is reattached before its children start.
func (s *Scoped) Reattach(ctx context.Context, spec transport.Spec) (transport.Kernel, error) {
	k, err := s.Pool.Reattach(ctx, spec)
	root := false
	s.first.Do(func() { root = true })
	if !root {
		return k, err
	}
	if err != nil {
		s.Pool.Close()
		return nil, err
	}
	return &rootKernel{Kernel: k, pool: s.Pool}, nil
}

// rootKernel is the first session's kernel: killing it closes the pool too.
type rootKernel struct {
	transport.Kernel
	pool *Pool
}

// Resume, ListenSpec and EgressDir are the kernel's own (a listening kernel's, a warm
// kernel's).
func (k *rootKernel) Resume() (wire.Resume, bool) { return resumeOf(k.Kernel) }
func (k *rootKernel) ListenSpec() transport.Spec  { return listenSpecOf(k.Kernel) }
func (k *rootKernel) EgressDir() string           { return egressDirOf(k.Kernel) }

func (k *rootKernel) Kill() error {
	err := k.Kernel.Kill()
	return errors.Join(err, k.pool.Close())
}
