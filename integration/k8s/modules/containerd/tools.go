//go:build tools

// Package tools pins the containerd 2.x commands the test cluster's CRI runtime is built from
// (Debian's containerd 1.6 loses exec stdin beyond about 32 KiB over CRI streaming).
package tools

import (
	_ "github.com/containerd/containerd/v2/cmd/containerd"
	_ "github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2"
)
