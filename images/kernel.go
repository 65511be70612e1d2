// Package images provides what a sandbox needs to run a kernel: the kernel binary for the
// sandbox's architecture, found or built, and the images it runs in.
package images

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"

	"github.com/paddockhq/paddock/errdefs"
	"github.com/paddockhq/paddock/internal/place"
)

// KernelName is the kernel binary's file name.
const KernelName = "paddock-kernel"

// ErrNoKernel is returned when no kernel can be found or built; its message says what to do.
var ErrNoKernel error = errdefs.New(errdefs.Unavailable, "no_kernel", "no kernel binary")

// NoKernelError says where Paddock looked for a kernel and how to provide one.
type NoKernelError struct {
	Arch   string
	Looked []string
	Build  error // why building from source did not work, if it was tried
}

func (e *NoKernelError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "no kernel binary for linux/%s; looked in %s", e.Arch, strings.Join(e.Looked, ", "))
	if e.Build != nil {
		fmt.Fprintf(&b, "; building it from source failed: %v", e.Build)
	}
	fmt.Fprintf(&b, ". Fix: build one with `CGO_ENABLED=0 GOOS=linux GOARCH=%s go build -o %s ./cmd/paddock-kernel` in Paddock's source tree and put it beside the paddock binary, or name it in PADDOCK_KERNEL", e.Arch, KernelName)
	return b.String()
}

func (e *NoKernelError) Is(target error) bool { return target == ErrNoKernel }

// Code is the stable code of the error.
func (e *NoKernelError) Code() string { return "no_kernel" }

// Class is the error's class.
func (e *NoKernelError) Class() errdefs.Class { return errdefs.Unavailable }

// Kernels finds kernel binaries. The zero value looks in the usual places.
type Kernels struct {
	// Env is looked up for PADDOCK_KERNEL (and PADDOCK_KERNEL_<ARCH>); nil: os.Getenv.
	Env func(string) string
	// Dir is where paddock's own binary lives; "": the executable's directory.
	Dir string
	// Cache is where kernels built from source go; "": the user cache directory.
	Cache string
	// Source is the root of Paddock's source tree; "": the tree this package was built from,
	// when it is still there.
	Source string

	mu    sync.Mutex
	found map[string]string // guarded by mu
}

// Default finds kernels in the usual places.
var Default = &Kernels{}

// Find returns the host path of a kernel for linux/arch, in this order: the file named by
// PADDOCK_KERNEL_<ARCH> or (for the host's own architecture) PADDOCK_KERNEL; a
// paddock-kernel-linux-<arch> or (host architecture) paddock-kernel beside the paddock
// binary; one built from Paddock's source with the Go toolchain into the cache.
func (k *Kernels) Find(ctx context.Context, arch string) (string, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if p, ok := k.found[arch]; ok {
		return p, nil
	}
	p, err := k.find(ctx, arch)
	if err != nil {
		return "", err
	}
	if k.found == nil {
		k.found = map[string]string{}
	}
	k.found[arch] = p
	return p, nil
}

func (k *Kernels) find(ctx context.Context, arch string) (string, error) {
	getenv := k.Env
	if getenv == nil {
		getenv = os.Getenv
	}
	e := &NoKernelError{Arch: arch}
	names := []string{"PADDOCK_KERNEL_" + strings.ToUpper(arch)}
	if arch == runtime.GOARCH && runtime.GOOS == "linux" {
		names = append(names, "PADDOCK_KERNEL")
	}
	for _, n := range names {
		if p := getenv(n); p != "" {
			if isExec(p) {
				return filepath.Abs(p)
			}
			return "", fmt.Errorf("%s=%s: not an executable file: %w", n, p, ErrNoKernel)
		}
		e.Looked = append(e.Looked, "$"+n)
	}
	dir := k.Dir
	if dir == "" {
		if exe, err := os.Executable(); err == nil {
			dir = filepath.Dir(exe)
		}
	}
	if dir != "" {
		files := []string{KernelName + "-linux-" + arch}
		if arch == runtime.GOARCH && runtime.GOOS == "linux" {
			files = append(files, KernelName)
		}
		for _, f := range files {
			p := filepath.Join(dir, f)
			if isExec(p) {
				return p, nil
			}
			e.Looked = append(e.Looked, p)
		}
	}
	p, err := k.build(ctx, arch)
	if err == nil {
		return p, nil
	}
	e.Build = err
	return "", e
}

// StaticBuildFlags are the go build flags of the kernel (with CGO_ENABLED=0): the tests
// build their static programs with them too (internal/peer.BuildStatic), so that all share
// one compiled standard library with the kernel.
var StaticBuildFlags = []string{"-trimpath", "-ldflags=-s -w"}

// build compiles the kernel from source into the cache, keyed by a hash of the sources, so an
// unchanged tree reuses the binary and a changed one gets a new one.
func (k *Kernels) build(ctx context.Context, arch string) (string, error) {
	src := k.Source
	if src == "" {
		src = sourceRoot()
	}
	if src == "" {
		return "", errors.New("the source tree of Paddock is not on this machine")
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		return "", errors.New("no Go toolchain on PATH")
	}
	sum, err := sourceHash(src)
	if err != nil {
		return "", err
	}
	cache := k.Cache
	if cache == "" {
		c, err := place.KernelCache()
		if err != nil {
			return "", err
		}
		cache = c
	}
	out := filepath.Join(cache, sum[:16], "linux-"+arch, KernelName)
	if isExec(out) {
		return out, nil
	}
	if err := os.MkdirAll(filepath.Dir(out), 0o700); err != nil {
		return "", err
	}
	tmp := out + ".tmp"
	args := append(append([]string{"build"}, StaticBuildFlags...), "-o", tmp, "./cmd/paddock-kernel")
	cmd := exec.CommandContext(ctx, goBin, args...)
	cmd.Dir = src
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+arch)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("go build: %v: %s", err, strings.TrimSpace(stderr.String()))
	}
	return out, os.Rename(tmp, out)
}

// sourceRoot is the root of the source tree this package was built from, when it is there.
func sourceRoot() string {
	_, file, _, ok := runtime.Caller(0)
	if !ok || !filepath.IsAbs(file) {
		return ""
	}
	root := filepath.Dir(filepath.Dir(file))
	if _, err := os.Stat(filepath.Join(root, "cmd", KernelName, "main.go")); err != nil {
		return ""
	}
	return root
}

// sourceHash hashes the Go sources the kernel is built from: go.mod, go.sum and the
// transport tree and the kernel's main.
func sourceHash(root string) (string, error) {
	h := sha256.New()
	for _, f := range []string{"go.mod", "go.sum"} {
		if err := hashFile(h, root, f); err != nil {
			return "", err
		}
	}
	for _, dir := range []string{"transport", filepath.Join("cmd", KernelName)} {
		err := filepath.WalkDir(filepath.Join(root, dir), func(p string, d os.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.Type().IsRegular() && strings.HasSuffix(p, ".go") && !strings.HasSuffix(p, "_test.go") {
				rel, _ := filepath.Rel(root, p)
				return hashFile(h, root, rel)
			}
			return nil
		})
		if err != nil {
			return "", err
		}
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

func hashFile(h io.Writer, root, rel string) error {
	f, err := os.Open(filepath.Join(root, rel))
	if err != nil {
		return err
	}
	defer f.Close()
	fmt.Fprintf(h, "%s\x00", filepath.ToSlash(rel))
	_, err = io.Copy(h, f)
	return err
}

func isExec(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0
}
