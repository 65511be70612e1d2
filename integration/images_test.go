package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/client"
	"github.com/testcontainers/testcontainers-go"
	"github.com/testcontainers/testcontainers-go/wait"

	"github.com/paddockhq/paddock/images"
	"github.com/paddockhq/paddock/internal/peer"
	"github.com/paddockhq/paddock/transport"
	"github.com/paddockhq/paddock/transport/docker"
	"github.com/paddockhq/paddock/transport/pathmap"
	"github.com/paddockhq/paddock/transport/wire"
)

// The host image is empty, labelled, and made once: a second call finds it.
func TestHostImage(t *testing.T) {
	cli := engine(t)
	ctx := testContext(t)
	ref := hostImage(t, cli)
	first, err := cli.ImageInspect(ctx, ref)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := images.Host(ctx, cli, ref, testLabels); err != nil {
		t.Fatal(err)
	}
	again, err := cli.ImageInspect(ctx, ref)
	if err != nil {
		t.Fatal(err)
	}
	if again.ID != first.ID {
		t.Errorf("the host image was made again: %s then %s", first.ID, again.ID)
	}
	if first.Size != 0 {
		t.Errorf("the host image holds %d bytes, want none", first.Size)
	}
	if l := first.Config.Labels; l[images.LabelManaged] != "1" || l[images.LabelImage] != "host" || l["paddock.test"] != "integration" {
		t.Errorf("labels %v", l)
	}
}

// listDir starts a kernel in a container of img with no system mounts (the image alone) and
// lists a directory through it.
func listDir(t *testing.T, cli *client.Client, img, dir string) map[string]string {
	t.Helper()
	ctx := testContext(t)
	pm, err := pathmap.New(pathmap.Mount{Sandbox: "/work", Host: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	tr := &docker.Transport{Client: cli, Image: img, Stderr: testWriter{t}, NoReap: true}
	k, err := tr.Start(ctx, transport.Spec{Session: randomName("images-"), Kernel: kernelBinary(t), Cwd: "/work", PathMap: pm})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { k.Kill() })
	f, _, err := newClient(k).request(ctx, wire.TypeReaddir, wire.Path{Path: dir})
	if err != nil {
		t.Fatal(err)
	}
	var d wire.Dir
	if err := json.Unmarshal(f.Body, &d); err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, e := range d.Entries {
		out[e.Name] = e.Type
	}
	return out
}

// An image from a root filesystem directory holds its files and links; an image built from
// a Dockerfile on it holds what the Dockerfile adds and not what .dockerignore leaves out.
func TestImageFromRootfsAndDockerfile(t *testing.T) {
	cli := engine(t)
	ctx := testContext(t)
	root := t.TempDir()
	for _, d := range []string{"etc", "usr/bin"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	os.WriteFile(filepath.Join(root, "etc", "greeting"), []byte("hello\n"), 0o644)
	os.Symlink("usr/bin", filepath.Join(root, "bin"))
	ref := randomName("paddock-rootfs-test-") + ":1"
	t.Cleanup(func() { images.Remove(context.Background(), cli, ref) })
	if _, err := images.FromRootfs(ctx, cli, root, ref, testLabels); err != nil {
		t.Fatal(err)
	}
	if got := listDir(t, cli, ref, "/etc"); got["greeting"] != wire.TypeFile {
		t.Errorf("/etc of the rootfs image: %v", got)
	}
	if got := listDir(t, cli, ref, "/"); got["bin"] != wire.TypeSymlink || got["usr"] != wire.TypeDir {
		t.Errorf("/ of the rootfs image: %v", got)
	}

	// Saved, removed and loaded back from its archive, it is the same image.
	before, err := cli.ImageInspect(ctx, ref)
	if err != nil {
		t.Fatal(err)
	}
	rc, err := cli.ImageSave(ctx, []string{ref})
	if err != nil {
		t.Fatal(err)
	}
	archive, err := io.ReadAll(rc)
	rc.Close()
	if err != nil {
		t.Fatal(err)
	}
	if err := images.Remove(ctx, cli, ref); err != nil {
		t.Fatal(err)
	}
	refs, err := images.Load(ctx, cli, bytes.NewReader(archive))
	if err != nil || !slices.Contains(refs, ref) {
		t.Fatalf("load: %v, %v; want %s", refs, err, ref)
	}
	if after, err := cli.ImageInspect(ctx, ref); err != nil || after.ID != before.ID {
		t.Fatalf("the loaded image is %v, %v; want %s", after.ID, err, before.ID)
	}
	if _, err := images.Load(ctx, cli, strings.NewReader("not an archive")); err == nil {
		t.Errorf("a load of a non-archive succeeded")
	}

	bctx := t.TempDir()
	os.WriteFile(filepath.Join(bctx, "Dockerfile"), []byte("FROM "+ref+"\nCOPY . /added/\n"), 0o644)
	os.WriteFile(filepath.Join(bctx, ".dockerignore"), []byte("secret.txt\n"), 0o644)
	os.WriteFile(filepath.Join(bctx, "kept.txt"), []byte("kept\n"), 0o644)
	os.WriteFile(filepath.Join(bctx, "secret.txt"), []byte("no\n"), 0o644)
	built := randomName("paddock-build-test-") + ":1"
	t.Cleanup(func() { images.Remove(context.Background(), cli, built) })
	if _, err := images.Build(ctx, cli, images.BuildOptions{Context: bctx, Ref: built, Labels: testLabels}); err != nil {
		t.Fatal(err)
	}
	got := listDir(t, cli, built, "/added")
	if got["kept.txt"] != wire.TypeFile || got["secret.txt"] != "" {
		t.Errorf("/added of the built image: %v", got)
	}
	in, err := cli.ImageInspect(ctx, built)
	if err != nil {
		t.Fatal(err)
	}
	if in.Config.Labels[images.LabelManaged] != "1" || in.Config.Labels["paddock.test"] != "integration" {
		t.Errorf("labels of the built image: %v", in.Config.Labels)
	}
	// A build that fails says why.
	os.WriteFile(filepath.Join(bctx, "Dockerfile"), []byte("FROM "+ref+"\nCOPY missing.txt /\n"), 0o644)
	if _, err := images.Build(ctx, cli, images.BuildOptions{Context: bctx, Ref: randomName("paddock-build-test-") + ":1", Labels: testLabels}); err == nil || !strings.Contains(err.Error(), "missing.txt") {
		t.Errorf("a failing build: %v", err)
	}
}

// repoRoot is the root of Paddock's source tree.
func repoRoot(t testing.TB) string {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("no source path")
	}
	return filepath.Dir(filepath.Dir(file))
}

// The top-level Dockerfile builds offline from binaries built with go build, sends the
// builder only those binaries, and gives an image whose paddock runs and finds its kernel.
func TestPaddockDockerfile(t *testing.T) {
	cli := engine(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	root := repoRoot(t)
	bctx := t.TempDir()
	for _, f := range []string{"Dockerfile", ".dockerignore"} {
		b, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(bctx, f), b, 0o644)
	}
	os.WriteFile(filepath.Join(bctx, "stray.txt"), []byte("not for the image"), 0o644)
	// The two static binaries the Dockerfile copies: the CLI compiled as this test binary
	// is (with -race when it is) but linked statically, so that it needs no package
	// compiled for it alone.
	os.MkdirAll(filepath.Join(bctx, "dist"), 0o755)
	if err := peer.BuildStaticLike(root, "./cmd/paddock", filepath.Join(bctx, "dist", "paddock")); err != nil {
		t.Fatal(err)
	}
	if err := peer.BuildStatic(root, "./cmd/paddock-kernel", filepath.Join(bctx, "dist", "paddock-kernel")); err != nil {
		t.Fatal(err)
	}
	ref := randomName("paddock-image-test-") + ":1"
	t.Cleanup(func() { images.Remove(context.Background(), cli, ref) })
	if _, err := images.Build(ctx, cli, images.BuildOptions{Context: bctx, Ref: ref, Labels: testLabels}); err != nil {
		t.Fatal(err)
	}
	out := runOnce(t, ctx, cli, ref, nil)
	if !strings.Contains(out, "paddock") || !strings.Contains(out, "run") {
		t.Errorf("paddock --help in the image said %q", out)
	}
	if out := runOnce(t, ctx, cli, ref, []string{"/usr/local/bin/paddock-kernel", "-version"}); strings.TrimSpace(out) == "" {
		t.Errorf("the kernel in the image printed no version")
	}
	// The image's kernel is found beside paddock: doctor says so.
	if out := runOnce(t, ctx, cli, ref, []string{"/usr/local/bin/paddock", "doctor"}); !strings.Contains(out, "/usr/local/bin/paddock-kernel") {
		t.Errorf("paddock doctor in the image:\n%s", out)
	}
	// Nothing but the binaries reached the builder.
	c, err := cli.ContainerCreate(ctx, &container.Config{Image: ref, Labels: map[string]string{docker.LabelManaged: "1", "paddock.test": "integration"}}, nil, nil, nil, "")
	if err != nil {
		t.Fatal(err)
	}
	defer cli.ContainerRemove(context.Background(), c.ID, container.RemoveOptions{Force: true})
	if _, err := cli.ContainerStatPath(ctx, c.ID, "/stray.txt"); err == nil {
		t.Errorf("a file .dockerignore leaves out is in the image")
	}
	var files []string
	for _, p := range []string{"/usr/local/bin/paddock", "/usr/local/bin/paddock-kernel"} {
		if st, err := cli.ContainerStatPath(ctx, c.ID, p); err == nil && st.Mode.IsRegular() {
			files = append(files, p)
		}
	}
	if !slices.Equal(files, []string{"/usr/local/bin/paddock", "/usr/local/bin/paddock-kernel"}) {
		t.Errorf("binaries in the image: %v", files)
	}
}

// runOnce runs a container of img (its command replaced by cmd when given) to its end and
// returns what it wrote.
func runOnce(t *testing.T, ctx context.Context, _ *client.Client, img string, cmd []string) string {
	t.Helper()
	opts := []testcontainers.ContainerCustomizer{testcontainers.WithWaitStrategy(wait.ForExit())}
	if cmd != nil {
		opts = append(opts, testcontainers.WithEntrypoint(cmd[0]), testcontainers.WithCmd(cmd[1:]...))
	}
	return output(t, ctx, runContainer(t, ctx, img, opts...))
}
