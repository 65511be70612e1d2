package images

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// The kernel is found in order: the variable naming it, beside paddock, built from source.
func TestKernelOrder(t *testing.T) {
	dir := t.TempDir()
	named := filepath.Join(dir, "named")
	beside := filepath.Join(dir, KernelName+"-linux-"+runtime.GOARCH)
	for _, p := range []string{named, beside} {
		os.WriteFile(p, []byte("#!/bin/sh\n"), 0o755)
	}
	env := map[string]string{"PADDOCK_KERNEL_" + strings.ToUpper(runtime.GOARCH): named}
	k := &Kernels{Env: func(n string) string { return env[n] }, Dir: dir, Source: "/nonexistent"}
	if p, err := k.Find(context.Background(), runtime.GOARCH); err != nil || p != named {
		t.Fatalf("named: %q %v", p, err)
	}
	k = &Kernels{Env: func(string) string { return "" }, Dir: dir, Source: "/nonexistent"}
	if p, err := k.Find(context.Background(), runtime.GOARCH); err != nil || p != beside {
		t.Fatalf("beside: %q %v", p, err)
	}
}

// Built from source into the cache, once per source hash.
func TestKernelBuiltFromSource(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the kernel")
	}
	cache := t.TempDir()
	k := &Kernels{Env: func(string) string { return "" }, Dir: t.TempDir(), Cache: cache}
	p, err := k.Find(context.Background(), runtime.GOARCH)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(p, cache) || !isExec(p) {
		t.Fatalf("kernel %s is not an executable in the cache", p)
	}
	again, err := (&Kernels{Env: func(string) string { return "" }, Dir: t.TempDir(), Cache: cache}).Find(context.Background(), runtime.GOARCH)
	if err != nil || again != p {
		t.Fatalf("a second finder built anew: %s %v", again, err)
	}
}

// With nothing to find and nothing to build from, the error says where it looked and how
// to fix it.
func TestNoKernelSaysWhatToDo(t *testing.T) {
	k := &Kernels{Env: func(string) string { return "" }, Dir: t.TempDir(), Source: t.TempDir()}
	_, err := k.Find(context.Background(), "riscv64")
	var nk *NoKernelError
	if !errors.As(err, &nk) || !errors.Is(err, ErrNoKernel) || nk.Code() != "no_kernel" {
		t.Fatalf("err = %v", err)
	}
	msg := err.Error()
	for _, want := range []string{"PADDOCK_KERNEL_RISCV64", "go build", "GOARCH=riscv64"} {
		if !strings.Contains(msg, want) {
			t.Errorf("the error does not mention %q: %s", want, msg)
		}
	}
}
