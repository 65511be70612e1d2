package integration

import (
	"context"
	"io"
	"maps"
	"os"
	"testing"

	"github.com/moby/moby/api/types/container"
	"github.com/testcontainers/testcontainers-go"
	tclog "github.com/testcontainers/testcontainers-go/log"

	"github.com/paddockhq/paddock/transport/docker"
)

// The tests' own containers (a box a wrapper command reaches, an image's one run) are
// started through testcontainers-go, from images built here (nothing is pulled). Its reaper
// container is not used: no image can be pulled for it here, and each test removes its
// containers at its end. They carry Paddock's labels as the transports' own do, so that
// Paddock's reaper and `paddock doctor` see them as Paddock's, and the test label.

func init() {
	if os.Getenv("TESTCONTAINERS_RYUK_DISABLED") == "" {
		os.Setenv("TESTCONTAINERS_RYUK_DISABLED", "true")
	}
}

// runContainer starts a container of img, removed at the test's end; its network is none
// unless opts say otherwise.
func runContainer(t testing.TB, ctx context.Context, img string, opts ...testcontainers.ContainerCustomizer) *testcontainers.DockerContainer {
	t.Helper()
	labels := map[string]string{docker.LabelManaged: "1"}
	maps.Copy(labels, testLabels)
	opts = append([]testcontainers.ContainerCustomizer{
		testcontainers.WithLogger(tclog.TestLogger(t)), // shown with a failure, not on every run
		testcontainers.WithLabels(labels),
		testcontainers.WithHostConfigModifier(func(hc *container.HostConfig) { hc.NetworkMode = "none" }),
	}, opts...)
	c, err := testcontainers.Run(ctx, img, opts...)
	testcontainers.CleanupContainer(t, c)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// output is what a container wrote, stdout and stderr.
func output(t testing.TB, ctx context.Context, c *testcontainers.DockerContainer) string {
	t.Helper()
	logs, err := c.Logs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer logs.Close()
	b, err := io.ReadAll(logs)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
