// Package peer is how a test that needs a real peer — an engine, a server, a program, a
// filesystem — says the peer is missing: the test is skipped with the reason, or fails when
// PADDOCK_REQUIRE_INTEGRATION=1 (as .ci/run sets it), so that CI never passes a test it
// did not run.
package peer

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// Required reports whether every peer must be present (PADDOCK_REQUIRE_INTEGRATION=1).
func Required() bool { return os.Getenv("PADDOCK_REQUIRE_INTEGRATION") == "1" }

// Missing skips t, or fails it when peers are required, saying what is missing.
func Missing(t testing.TB, format string, args ...any) {
	t.Helper()
	why := fmt.Sprintf(format, args...)
	if Required() {
		t.Fatalf("PADDOCK_REQUIRE_INTEGRATION=1 but %s", why)
	}
	t.Skip(why)
}

// Program returns the path of a program on PATH, or marks it missing (from the Debian
// package pkg).
func Program(t testing.TB, name, pkg string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		Missing(t, "no %s on PATH (Debian package %s)", name, pkg)
	}
	return p
}

// Go returns the go command the test runs under: on PATH, else in $GOROOT/bin. Its absence
// fails the test (a test of the module's own packages cannot be run without it).
func Go(t testing.TB) string {
	t.Helper()
	p, err := goCommand()
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// StartHost starts host, a host process (the test binary run in a mode of its own, most
// often), killed at the test's end, and returns the first line it prints once it is ready,
// trimmed ("" if it printed none).
func StartHost(t testing.TB, host *exec.Cmd) string {
	t.Helper()
	out, err := host.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := host.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { host.Process.Kill(); host.Wait() })
	line, _ := bufio.NewReader(out).ReadString('\n')
	return strings.TrimSpace(line)
}
