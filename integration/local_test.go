package integration

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/paddockhq/paddock/transport/environ"
	"github.com/paddockhq/paddock/transport/local"
	"github.com/paddockhq/paddock/transport/wrapped"
)

// The conformance suite on the local transport: the sandbox is the host.
func TestConformanceLocal(t *testing.T) {
	kernel := kernelBinary(t)
	RunConformance(t, func(t *testing.T) Env {
		return Env{
			Transport:       &local.Transport{},
			Kernel:          kernel,
			KernelInSandbox: kernel,
			Workspace:       t.TempDir(),
			Environ:         func(host, _ []string) []string { return environ.Local(host) },
			Leftovers:       func(_ context.Context, _ string, pids []int) []string { return hostProcesses(pids) },
		}
	})
}

// hostProcesses returns those of pids that still run on the host (a zombie does not count).
func hostProcesses(pids []int) []string {
	var left []string
	for _, pid := range pids {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil {
			continue
		}
		s := string(b)
		if i := strings.LastIndexByte(s, ')'); i >= 0 && strings.HasPrefix(strings.TrimSpace(s[i+1:]), "Z") {
			continue
		}
		left = append(left, fmt.Sprintf("process %d", pid))
	}
	return left
}

// The conformance suite on the wrapped transport under a wrapper that needs no engine: env,
// which runs the kernel on the host with the wrapper's environment (the host's less its
// credentials).
func TestConformanceWrappedEnv(t *testing.T) {
	kernel := kernelBinary(t)
	RunConformance(t, func(t *testing.T) Env {
		return Env{
			Transport:       &wrapped.Transport{ArgvPrefix: []string{"env", "--"}},
			Kernel:          kernel,
			KernelInSandbox: kernel,
			Workspace:       t.TempDir(),
			Environ:         func(host, _ []string) []string { return environ.Local(host) },
			Leftovers:       func(_ context.Context, _ string, pids []int) []string { return hostProcesses(pids) },
		}
	})
}
