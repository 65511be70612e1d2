package integration

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"runtime"
	"testing"
	"time"

	"github.com/paddockhq/paddock/internal/peer"

	"github.com/docker/docker/client"

	"github.com/paddockhq/paddock/images"
	"github.com/paddockhq/paddock/transport/docker"
)

// Every container and image a test makes carries these labels besides Paddock's own.
var testLabels = map[string]string{"paddock.test": "integration"}

// needPeer skips a test whose peer is absent, or fails it when PADDOCK_REQUIRE_INTEGRATION
// is set.
func needPeer(t testing.TB, format string, args ...any) {
	t.Helper()
	peer.Missing(t, format, args...)
}

// engine returns a client of the Docker engine, or skips.
func engine(t testing.TB) *client.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cli, err := docker.Connect(ctx)
	if err != nil {
		needPeer(t, "no Docker engine: %v", err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

// kernelBinary returns the host path of a kernel for this machine, built if need be.
func kernelBinary(t testing.TB) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	k, err := images.Default.Find(ctx, runtime.GOARCH)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func randomName(prefix string) string {
	var b [6]byte
	rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}

// hostImage makes a host image of the test's own, removed at its end.
func hostImage(t testing.TB, cli *client.Client) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ref := randomName("paddock-host-test-") + ":1"
	t.Cleanup(func() { images.Remove(context.Background(), cli, ref) })
	if _, err := images.Host(ctx, cli, ref, testLabels); err != nil {
		t.Fatal(err)
	}
	return ref
}

// hostMounts are the host image's system mounts in the docker transport's terms.
func hostMounts() []docker.Mount {
	var out []docker.Mount
	for _, m := range images.HostMounts() {
		out = append(out, docker.Mount{Host: m.Host, Sandbox: m.Sandbox, ReadOnly: true})
	}
	return out
}

// sandboxEnv is what a container kernel gets of its own besides the named host variables.
var sandboxEnv = docker.DefaultEnv
