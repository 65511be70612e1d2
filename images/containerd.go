package images

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"runtime"
	"time"

	containerd "github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/pkg/namespaces"
	"github.com/containerd/errdefs"
	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/docker/docker/client"
)

// Images reach containerd without a registry: the host image is written into its content
// store as an OCI archive made here, and any image the Docker engine holds (one Build made,
// say) is exported from the engine and imported. Both land in the namespace given, labelled
// as Paddock's, and are unpacked for the snapshotter named.

// DockerSaver is what loading from Docker asks of the engine.
type DockerSaver interface {
	ImageSave(ctx context.Context, images []string, opts ...client.ImageSaveOption) (io.ReadCloser, error)
}

var _ DockerSaver = (*client.Client)(nil)

// ContainerdHost makes the host image under ref (HostRef when "") in containerd's namespace
// unless it holds it, unpacked for snapshotter, and returns ref.
func ContainerdHost(ctx context.Context, c *containerd.Client, namespace, snapshotter, ref string, labels map[string]string) (string, error) {
	if ref == "" {
		ref = HostRef
	}
	ctx = namespaces.WithNamespace(ctx, namespace)
	if img, err := c.GetImage(ctx, ref); err == nil {
		return ref, unpack(ctx, img, snapshotter)
	} else if !errdefs.IsNotFound(err) {
		return "", fmt.Errorf("images: containerd: %s: %w", ref, err)
	}
	// The daemon's socket is on this machine, so its platform is the host's.
	archive, err := emptyOCIArchive(runtime.GOARCH, withKind(labels, "host"))
	if err != nil {
		return "", err
	}
	return ref, importArchive(ctx, c, bytes.NewReader(archive), ref, snapshotter, withKind(labels, "host"))
}

// ContainerdFromDocker exports ref from the Docker engine and imports it into containerd's
// namespace under the same reference, unpacked for snapshotter, replacing what containerd
// held under it.
func ContainerdFromDocker(ctx context.Context, e DockerSaver, c *containerd.Client, namespace, snapshotter, ref string, labels map[string]string) (string, error) {
	ctx = namespaces.WithNamespace(ctx, namespace)
	rc, err := e.ImageSave(ctx, []string{ref})
	if err != nil {
		return "", fmt.Errorf("images: export %s from Docker: %w", ref, err)
	}
	defer rc.Close()
	return ref, importArchive(ctx, c, rc, ref, snapshotter, withKind(labels, "docker"))
}

// RemoveContainerd removes an image from containerd's namespace; one it does not hold is no
// error.
func RemoveContainerd(ctx context.Context, c *containerd.Client, namespace, ref string) error {
	ctx = namespaces.WithNamespace(ctx, namespace)
	if err := c.ImageService().Delete(ctx, ref); err != nil && !errdefs.IsNotFound(err) {
		return fmt.Errorf("images: containerd: remove %s: %w", ref, err)
	}
	return nil
}

func importArchive(ctx context.Context, c *containerd.Client, r io.Reader, ref, snapshotter string, labels map[string]string) error {
	imgs, err := c.Import(ctx, r, containerd.WithIndexName(ref), containerd.WithImageLabels(labels),
		containerd.WithImageRefTranslator(func(string) string { return "" }))
	if err != nil {
		return fmt.Errorf("images: containerd: import %s: %w", ref, err)
	}
	// A Docker archive names its images too (docker.io/library/...): those names are the
	// import's alone, and go, so only ref holds the content.
	for _, i := range imgs {
		if i.Name != ref {
			_ = c.ImageService().Delete(ctx, i.Name)
		}
	}
	img, err := c.GetImage(ctx, ref)
	if err != nil {
		return fmt.Errorf("images: containerd: import %s: %w", ref, err)
	}
	return unpack(ctx, img, snapshotter)
}

func unpack(ctx context.Context, img containerd.Image, snapshotter string) error {
	if ok, err := img.IsUnpacked(ctx, snapshotter); err == nil && ok {
		return nil
	}
	if err := img.Unpack(ctx, snapshotter); err != nil {
		return fmt.Errorf("images: containerd: unpack %s for %s: %w", img.Name(), snapshotter, err)
	}
	return nil
}

// emptyOCIArchive is an OCI image layout, as a tar, of one image for linux/arch whose only
// layer is empty.
func emptyOCIArchive(arch string, labels map[string]string) ([]byte, error) {
	var layer bytes.Buffer
	if err := tar.NewWriter(&layer).Close(); err != nil {
		return nil, err
	}
	layerDesc := ocispec.Descriptor{MediaType: ocispec.MediaTypeImageLayer, Digest: digest.FromBytes(layer.Bytes()), Size: int64(layer.Len())}
	created := time.Unix(0, 0).UTC()
	cfg, err := json.Marshal(ocispec.Image{
		Created:  &created,
		Platform: ocispec.Platform{OS: "linux", Architecture: arch},
		Config:   ocispec.ImageConfig{Labels: labels},
		RootFS:   ocispec.RootFS{Type: "layers", DiffIDs: []digest.Digest{layerDesc.Digest}},
	})
	if err != nil {
		return nil, err
	}
	cfgDesc := ocispec.Descriptor{MediaType: ocispec.MediaTypeImageConfig, Digest: digest.FromBytes(cfg), Size: int64(len(cfg))}
	man, err := json.Marshal(struct {
		SchemaVersion int    `json:"schemaVersion"`
		MediaType     string `json:"mediaType"`
		ocispec.Manifest
	}{2, ocispec.MediaTypeImageManifest, ocispec.Manifest{Config: cfgDesc, Layers: []ocispec.Descriptor{layerDesc}}})
	if err != nil {
		return nil, err
	}
	manDesc := ocispec.Descriptor{MediaType: ocispec.MediaTypeImageManifest, Digest: digest.FromBytes(man), Size: int64(len(man)),
		Platform: &ocispec.Platform{OS: "linux", Architecture: arch}}
	idx, err := json.Marshal(struct {
		SchemaVersion int    `json:"schemaVersion"`
		MediaType     string `json:"mediaType"`
		ocispec.Index
	}{2, ocispec.MediaTypeImageIndex, ocispec.Index{Manifests: []ocispec.Descriptor{manDesc}}})
	if err != nil {
		return nil, err
	}
	var out bytes.Buffer
	tw := tar.NewWriter(&out)
	files := []struct {
		name string
		data []byte
	}{
		{ocispec.ImageLayoutFile, []byte(`{"imageLayoutVersion":"1.0.0"}`)},
		{"index.json", idx},
		{"blobs/sha256/" + layerDesc.Digest.Encoded(), layer.Bytes()},
		{"blobs/sha256/" + cfgDesc.Digest.Encoded(), cfg},
		{"blobs/sha256/" + manDesc.Digest.Encoded(), man},
	}
	for _, f := range files {
		if err := tw.WriteHeader(&tar.Header{Name: f.name, Mode: 0o644, Size: int64(len(f.data)), Typeflag: tar.TypeReg, ModTime: created}); err != nil {
			return nil, err
		}
		if _, err := tw.Write(f.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}
