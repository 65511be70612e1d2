package images

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	cerrdefs "github.com/containerd/errdefs"

	"github.com/docker/docker/api/types/build"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/client"
	"github.com/moby/patternmatcher"
	"github.com/moby/patternmatcher/ignorefile"

	"github.com/paddockhq/paddock/internal/tarx"
)

// The images are made without a registry: imported from a tar stream, or built from a
// local context whose Dockerfile starts FROM scratch or from an image the engine holds.

// Labels Paddock puts on the images it makes.
const (
	LabelManaged = "paddock"       // "1"
	LabelImage   = "paddock.image" // what the image is: host, rootfs, build
)

// Engine is what this package asks of a Docker engine.
type Engine interface {
	ImageImport(ctx context.Context, source image.ImportSource, ref string, options image.ImportOptions) (io.ReadCloser, error)
	ImageBuild(ctx context.Context, buildContext io.Reader, options build.ImageBuildOptions) (build.ImageBuildResponse, error)
	ImageInspect(ctx context.Context, imageID string, inspectOpts ...client.ImageInspectOption) (image.InspectResponse, error)
	ImageRemove(ctx context.Context, imageID string, options image.RemoveOptions) ([]image.DeleteResponse, error)
	ImageLoad(ctx context.Context, input io.Reader, loadOpts ...client.ImageLoadOption) (image.LoadResponse, error)
}

var _ Engine = (*client.Client)(nil)

// Host makes the host image under ref (HostRef when "") unless the engine holds it: an empty
// image, imported from an empty tar, labelled as Paddock's. A sandbox runs it with
// HostMounts bound read-only, so it has the host's toolset with no registry and no build.
func Host(ctx context.Context, e Engine, ref string, labels map[string]string) (string, error) {
	if ref == "" {
		ref = HostRef
	}
	if _, err := e.ImageInspect(ctx, ref); err == nil {
		return ref, nil
	} else if !cerrdefs.IsNotFound(err) {
		return "", fmt.Errorf("images: inspect %s: %w", ref, err)
	}
	var empty bytes.Buffer
	tw := tar.NewWriter(&empty)
	if err := tw.Close(); err != nil {
		return "", err
	}
	return ref, importTar(ctx, e, &empty, ref, withKind(labels, "host"))
}

// FromRootfs makes an image under ref from a root filesystem directory (its files, links
// and modes; owners as they are on disk) and returns ref.
func FromRootfs(ctx context.Context, e Engine, dir, ref string, labels map[string]string) (string, error) {
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(writeTar(pw, dir, nil)) }()
	err := importTar(ctx, e, pr, ref, withKind(labels, "rootfs"))
	pr.CloseWithError(errors.New("import ended"))
	if err != nil {
		return "", err
	}
	return ref, nil
}

func importTar(ctx context.Context, e Engine, r io.Reader, ref string, labels map[string]string) error {
	changes := make([]string, 0, len(labels))
	for _, k := range sortedKeys(labels) {
		changes = append(changes, fmt.Sprintf("LABEL %s=%s", k, quoteLabel(labels[k])))
	}
	rc, err := e.ImageImport(ctx, image.ImportSource{Source: r, SourceName: "-"}, ref, image.ImportOptions{Changes: changes})
	if err != nil {
		return fmt.Errorf("images: import %s: %w", ref, err)
	}
	defer rc.Close()
	if err := readProgress(rc); err != nil {
		return fmt.Errorf("images: import %s: %w", ref, err)
	}
	return nil
}

// BuildOptions say what to build.
type BuildOptions struct {
	Context    string            // the build context: a host directory
	Dockerfile string            // the Dockerfile's path in the context; "" is "Dockerfile"
	Ref        string            // the image's reference
	Labels     map[string]string // added to Paddock's own
	BuildArgs  map[string]string
}

// Build builds an image from a context directory and its Dockerfile with the engine's
// builder, the context filtered by its .dockerignore, and returns the reference. Nothing is
// pulled: the Dockerfile's FROM must be scratch or an image the engine holds.
func Build(ctx context.Context, e Engine, o BuildOptions) (string, error) {
	if o.Ref == "" {
		return "", errors.New("images: build: no reference named")
	}
	df := o.Dockerfile
	if df == "" {
		df = "Dockerfile"
	}
	ignore, err := readIgnore(o.Context)
	if err != nil {
		return "", err
	}
	args := map[string]*string{}
	for k, v := range o.BuildArgs {
		args[k] = &v
	}
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(writeTar(pw, o.Context, ignore)) }()
	defer pr.Close()
	resp, err := e.ImageBuild(ctx, pr, build.ImageBuildOptions{
		Tags:        []string{o.Ref},
		Dockerfile:  filepath.ToSlash(df),
		Labels:      withKind(o.Labels, "build"),
		Remove:      true,
		ForceRemove: true,
		BuildArgs:   args,
		Version:     build.BuilderV1,
	})
	if err != nil {
		return "", fmt.Errorf("images: build %s: %w", o.Ref, err)
	}
	defer resp.Body.Close()
	if err := readProgress(resp.Body); err != nil {
		return "", fmt.Errorf("images: build %s: %w", o.Ref, err)
	}
	return o.Ref, nil
}

// Load loads an image archive (what `docker save` writes, or an OCI image layout as a tar)
// into the engine, and returns the references it loaded.
func Load(ctx context.Context, e Engine, archive io.Reader) ([]string, error) {
	resp, err := e.ImageLoad(ctx, archive, client.ImageLoadWithQuiet(true))
	if err != nil {
		return nil, fmt.Errorf("images: load: %w", err)
	}
	defer resp.Body.Close()
	var refs []string
	dec := json.NewDecoder(resp.Body)
	for {
		var m struct {
			Stream string `json:"stream"`
			Error  string `json:"error"`
		}
		if err := dec.Decode(&m); err == io.EOF {
			break
		} else if err != nil {
			return refs, fmt.Errorf("images: load: %w", err)
		}
		if m.Error != "" {
			return refs, fmt.Errorf("images: load: %s", m.Error)
		}
		for _, prefix := range []string{"Loaded image: ", "Loaded image ID: "} {
			if r, ok := strings.CutPrefix(strings.TrimSpace(m.Stream), prefix); ok {
				refs = append(refs, r)
			}
		}
	}
	if len(refs) == 0 {
		return nil, errors.New("images: load: the archive held no image")
	}
	return refs, nil
}

// Remove removes an image Paddock made.
func Remove(ctx context.Context, e Engine, ref string) error {
	_, err := e.ImageRemove(ctx, ref, image.RemoveOptions{Force: true, PruneChildren: true})
	if err != nil && !cerrdefs.IsNotFound(err) {
		return fmt.Errorf("images: remove %s: %w", ref, err)
	}
	return nil
}

func withKind(labels map[string]string, kind string) map[string]string {
	out := map[string]string{LabelManaged: "1", LabelImage: kind}
	for k, v := range labels {
		out[k] = v
	}
	return out
}

func sortedKeys(m map[string]string) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

func quoteLabel(v string) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// readProgress reads the engine's JSON progress stream to its end and returns the error it
// reports, if any.
func readProgress(r io.Reader) error {
	dec := json.NewDecoder(r)
	var last string
	for {
		var m struct {
			Stream      string `json:"stream"`
			Error       string `json:"error"`
			ErrorDetail *struct {
				Message string `json:"message"`
			} `json:"errorDetail"`
		}
		if err := dec.Decode(&m); err == io.EOF {
			return nil
		} else if err != nil {
			return err
		}
		if m.Error != "" {
			msg := m.Error
			if m.ErrorDetail != nil && m.ErrorDetail.Message != "" {
				msg = m.ErrorDetail.Message
			}
			if last != "" {
				msg += " (after: " + strings.TrimSpace(last) + ")"
			}
			return errors.New(msg)
		}
		if s := strings.TrimSpace(m.Stream); s != "" {
			last = s
		}
	}
}

// readIgnore returns the matcher of a context's .dockerignore, or nil when it has none.
func readIgnore(dir string) (*patternmatcher.PatternMatcher, error) {
	f, err := os.Open(filepath.Join(dir, ".dockerignore"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	pats, err := ignorefile.ReadAll(f)
	if err != nil {
		return nil, fmt.Errorf("images: .dockerignore: %w", err)
	}
	return patternmatcher.New(pats)
}

// writeTar writes the tree under dir as a tar stream, paths relative to dir, skipping what
// ignore matches (the Dockerfile and .dockerignore are always sent, as Docker does).
func writeTar(w io.Writer, dir string, ignore *patternmatcher.PatternMatcher) error {
	var skip func(string, bool) (bool, bool, error)
	if ignore != nil {
		skip = func(rel string, isDir bool) (bool, bool, error) {
			if rel == "Dockerfile" || rel == ".dockerignore" {
				return false, false, nil
			}
			m, err := ignore.MatchesOrParentMatches(rel)
			return m, isDir && !ignore.Exclusions(), err
		}
	}
	return tarx.WriteTree(w, dir, tarx.TreeOptions{Skip: skip})
}
