package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"io/fs"
	"os"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// OCI's predefined label keys (image-spec annotations.md).
const (
	labelTitle       = "org.opencontainers.image.title"
	labelDescription = "org.opencontainers.image.description"
	labelVersion     = "org.opencontainers.image.version"
	labelRevision    = "org.opencontainers.image.revision"
	labelSource      = "org.opencontainers.image.source"
	labelLicenses    = "org.opencontainers.image.licenses"
	labelCreated     = "org.opencontainers.image.created"

	sourceURL = "https://github.com/lifeboat-io/lifeboat"
)

// assembleIndex builds spec's image for each platform (programs[i] holds
// the compiled programs of platforms[i]) and an OCI image index of them.
// Nothing in the result depends on when or where it is built: files and
// history carry the commit's time, owners are numeric, entries are in the
// spec's order, and gzip writes no timestamp, so one commit gives one
// digest.
func assembleIndex(spec imageSpec, platforms []v1.Platform, programs []map[string]string, src commit) (v1.ImageIndex, error) {
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	for i, plat := range platforms {
		img, err := assembleImage(spec, plat, programs[i], src)
		if err != nil {
			return nil, fmt.Errorf("image %s for %s: %w", spec.Name, platformString(plat), err)
		}
		p := plat
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{Add: plainImage{img}, Descriptor: v1.Descriptor{Platform: &p}})
	}
	return idx, nil
}

// plainImage is an image whose entry in an index has no artifactType:
// go-containerregistry would put the config's media type there, a field
// OCI keeps for artifacts, which these images are not.
type plainImage struct{ v1.Image }

func (plainImage) ArtifactType() (string, error) { return "", nil }

func assembleImage(spec imageSpec, plat v1.Platform, programs map[string]string, src commit) (v1.Image, error) {
	img := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	created := v1.Time{Time: src.Time}
	for i, entries := range spec.Layers {
		layer, err := buildLayer(entries, programs, src.Time)
		if err != nil {
			return nil, fmt.Errorf("layer %d: %w", i, err)
		}
		img, err = mutate.Append(img, mutate.Addendum{
			Layer:     layer,
			MediaType: types.OCILayer,
			History:   v1.History{Created: created, CreatedBy: "hack/tools/image", Comment: describeLayer(entries)},
		})
		if err != nil {
			return nil, err
		}
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture, cf.Variant = plat.OS, plat.Architecture, plat.Variant
	cf.Created = created
	cf.Config.Entrypoint = spec.Entrypoint
	cf.Config.User = spec.User
	cf.Config.Env = spec.Env
	cf.Config.Labels = map[string]string{
		labelTitle:       spec.Name,
		labelDescription: spec.Description,
		labelVersion:     spec.Version,
		labelRevision:    src.Revision,
		labelSource:      sourceURL,
		labelLicenses:    "Apache-2.0",
		labelCreated:     src.Time.Format(time.RFC3339),
	}
	return mutate.ConfigFile(img, cf)
}

// buildLayer writes entries as a tar, gzip-compressed.
func buildLayer(entries []entry, programs map[string]string, mtime time.Time) (v1.Layer, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		hdr := &tar.Header{
			Name:    e.Path,
			Mode:    tarMode(e.Mode),
			Uid:     e.UID,
			Gid:     e.GID,
			ModTime: mtime,
			Format:  tar.FormatPAX,
		}
		if e.Mode.IsDir() {
			hdr.Typeflag = tar.TypeDir
			hdr.Name += "/"
			if err := tw.WriteHeader(hdr); err != nil {
				return nil, err
			}
			continue
		}
		data, err := content(e, programs)
		if err != nil {
			return nil, fmt.Errorf("/%s: %w", e.Path, err)
		}
		hdr.Typeflag = tar.TypeReg
		hdr.Size = int64(len(data))
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, err
		}
		if _, err := tw.Write(data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	b := buf.Bytes()
	return tarball.LayerFromOpener(
		func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil },
		tarball.WithMediaType(types.OCILayer),
		tarball.WithCompressionLevel(gzip.DefaultCompression),
		tarball.WithCompressedCaching)
}

func content(e entry, programs map[string]string) ([]byte, error) {
	switch {
	case e.Program != "":
		p, ok := programs[e.Program]
		if !ok {
			return nil, fmt.Errorf("program %s was not built", e.Program)
		}
		return os.ReadFile(p)
	case e.HostFile != "":
		b, err := os.ReadFile(e.HostFile)
		if err != nil {
			return nil, fmt.Errorf("%w (the CA certificates: apt-get install --no-install-recommends ca-certificates, or -ca-bundle FILE; busybox: apt-get install busybox-static, or -busybox FILE)", err)
		}
		return b, nil
	default:
		return []byte(e.Data), nil
	}
}

// tarMode is fs.FileMode's permission and sticky bits as tar's mode.
func tarMode(m fs.FileMode) int64 {
	mode := int64(m.Perm())
	if m&fs.ModeSticky != 0 {
		mode |= 0o1000
	}
	return mode
}

func describeLayer(entries []entry) string {
	if len(entries) == 0 {
		return ""
	}
	names := "/" + entries[0].Path
	for _, e := range entries[1:] {
		names += " /" + e.Path
	}
	return names
}
