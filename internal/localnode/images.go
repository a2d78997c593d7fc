package localnode

import (
	"archive/tar"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
)

// ImageName reads the name an image archive (an OCI layout archive, as
// `make image` writes them) gives its image: the reference a pod names
// and the kubelet finds after ImportImage.
func ImageName(tarball string) (string, error) {
	f, err := os.Open(tarball)
	if err != nil {
		return "", err
	}
	defer func() { _ = f.Close() }()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return "", fmt.Errorf("%s has no index.json: not an OCI layout archive", tarball)
		}
		if err != nil {
			return "", fmt.Errorf("reading %s: %w", tarball, err)
		}
		if h.Name != "index.json" && h.Name != "./index.json" {
			continue
		}
		var index struct {
			Manifests []struct {
				Annotations map[string]string `json:"annotations"`
			} `json:"manifests"`
		}
		if err := json.NewDecoder(io.LimitReader(tr, 1<<20)).Decode(&index); err != nil {
			return "", fmt.Errorf("%s: index.json: %w", tarball, err)
		}
		for _, m := range index.Manifests {
			if name := m.Annotations["io.containerd.image.name"]; name != "" {
				return name, nil
			}
		}
		return "", fmt.Errorf("%s: index.json names no image (annotation io.containerd.image.name)", tarball)
	}
}
