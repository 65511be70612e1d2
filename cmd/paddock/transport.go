package main

import (
	"context"
	"fmt"
	"os"
	"runtime"

	"github.com/spf13/pflag"

	"github.com/paddockhq/paddock/images"
	"github.com/paddockhq/paddock/orchestrator"
	"github.com/paddockhq/paddock/transport/environ"
	"github.com/paddockhq/paddock/transport/local"
)

// transportFlags choose and configure the transport a command's session runs on.
type transportFlags struct {
	name string
}

func (f *transportFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&f.name, "transport", "local", "where the kernel runs: local")
}

// configure fills in the transport part of a session's configuration for the workspace.
// notice, when set, is a line to show the user (why a default was not taken).
func (f *transportFlags) configure(ctx context.Context, cfg *orchestrator.Config) (notice string, err error) {
	switch f.name {
	case "local", "":
		kernel, err := images.Default.Find(ctx, runtime.GOARCH)
		if err != nil {
			return "", &codeError{code: exitNoKernel, err: err}
		}
		cfg.Transport = &local.Transport{Stderr: os.Stderr}
		cfg.Kernel = kernel
		cfg.Env = environ.Local(os.Environ())
		return "", nil
	}
	return "", &usageError{msg: fmt.Sprintf("unknown transport %q", f.name)}
}
