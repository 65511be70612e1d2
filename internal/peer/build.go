package peer

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// Build compiles the package pkg (a directory relative to dir, or an import path) into the
// program out as the test binary that calls it was compiled: with the race detector when the
// test runs with it. A program built so shares every compiled package with the tests, so a
// cold run compiles the module's dependencies once rather than once for the tests and once
// more for the programs they run; and a race in the program is reported as one in the tests.
func Build(dir, pkg, out string) error {
	return goBuild(dir, pkg, out, testFlags(), nil)
}

// BuildStaticLike compiles pkg as Build does, linked statically: a program for an empty
// image (FROM scratch) that still shares every compiled package with the tests (linking is
// not compiling). With cgo, as the race detector needs, the C library is linked in.
func BuildStaticLike(dir, pkg, out string) error {
	flags := testFlags()
	if os.Getenv("CGO_ENABLED") != "0" { // without cgo the linker's own output is static
		flags = append(flags, "-ldflags=-linkmode=external -extldflags=-static")
	}
	return goBuild(dir, pkg, out, flags, nil)
}

// testFlags are the build flags the calling test binary was compiled with that change what
// is compiled.
func testFlags() []string {
	if raceEnabled {
		return []string{"-race"}
	}
	return nil
}

// staticFlags are the kernel's build flags, images.StaticBuildFlags (TestStaticFlags keeps
// the two the same: this package, which every test imports, does not import images and the
// engines' clients with it).
var staticFlags = []string{"-trimpath", "-ldflags=-s -w"}

// BuildStatic compiles pkg into a static program (no cgo), one that runs in an empty
// container, with the kernel's flags, so that every static program of the tests shares one
// compiled standard library with the kernel.
func BuildStatic(dir, pkg, out string) error {
	return goBuild(dir, pkg, out, staticFlags, []string{"CGO_ENABLED=0"})
}

func goBuild(dir, pkg, out string, flags, env []string) error {
	goBin, err := goCommand()
	if err != nil {
		return err
	}
	args := append([]string{"build"}, flags...)
	args = append(args, "-o", out, pkg)
	cmd := exec.Command(goBin, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	var output bytes.Buffer
	cmd.Stdout, cmd.Stderr = &output, &output
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go %s: %v\n%s", strings.Join(args, " "), err, output.Bytes())
	}
	return nil
}

// goCommand is the go command the test runs under: on PATH, else in $GOROOT/bin.
func goCommand() (string, error) {
	p, err := exec.LookPath("go")
	if err != nil && os.Getenv("GOROOT") != "" {
		return filepath.Join(os.Getenv("GOROOT"), "bin", "go"), nil
	}
	if err != nil {
		return "", fmt.Errorf("no go command on PATH or in $GOROOT/bin: %v", err)
	}
	return p, nil
}
