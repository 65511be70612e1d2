package images

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"io"
	"testing"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// The host image for containerd is a valid OCI layout: every blob is named by its digest, the
// index names the manifest for the platform, the manifest the config and one empty layer,
// and the config carries the labels.
func TestEmptyOCIArchive(t *testing.T) {
	b, err := emptyOCIArchive("arm64", map[string]string{LabelManaged: "1"})
	if err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{}
	tr := tar.NewReader(bytes.NewReader(b))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		data, _ := io.ReadAll(tr)
		files[h.Name] = data
	}
	blob := func(d ocispec.Descriptor) []byte {
		t.Helper()
		data, ok := files["blobs/sha256/"+d.Digest.Encoded()]
		if !ok || digest.FromBytes(data) != d.Digest || int64(len(data)) != d.Size {
			t.Fatalf("blob %s missing or not what its descriptor says", d.Digest)
		}
		return data
	}
	if string(files[ocispec.ImageLayoutFile]) != `{"imageLayoutVersion":"1.0.0"}` {
		t.Fatalf("oci-layout: %q", files[ocispec.ImageLayoutFile])
	}
	var idx ocispec.Index
	if err := json.Unmarshal(files["index.json"], &idx); err != nil || len(idx.Manifests) != 1 {
		t.Fatalf("index: %s, %v", files["index.json"], err)
	}
	if p := idx.Manifests[0].Platform; p == nil || p.OS != "linux" || p.Architecture != "arm64" {
		t.Fatalf("the manifest's platform: %+v", p)
	}
	var man ocispec.Manifest
	if err := json.Unmarshal(blob(idx.Manifests[0]), &man); err != nil || len(man.Layers) != 1 {
		t.Fatalf("manifest: %v", err)
	}
	var cfg ocispec.Image
	if err := json.Unmarshal(blob(man.Config), &cfg); err != nil {
		t.Fatal(err)
	}
	layer := blob(man.Layers[0])
	if len(cfg.RootFS.DiffIDs) != 1 || cfg.RootFS.DiffIDs[0] != digest.FromBytes(layer) || cfg.Config.Labels[LabelManaged] != "1" {
		t.Fatalf("config: %+v", cfg)
	}
	if h, err := tar.NewReader(bytes.NewReader(layer)).Next(); err != io.EOF {
		t.Fatalf("the layer holds %v, %v; want nothing", h, err)
	}
}
