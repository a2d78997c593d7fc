// Package crd embeds the generated velero.io/v1 CustomResourceDefinitions so
// that `lifeboat install` and the tests apply exactly what `make generate` wrote.
package crd

import (
	"embed"
	"fmt"
	"io/fs"
	"sort"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

//go:embed bases/*.yaml
var files embed.FS

// All returns every CRD, sorted by name.
func All() ([]*apiextensionsv1.CustomResourceDefinition, error) {
	return FromFS(files, "bases/*.yaml")
}

// FromFS decodes, strictly, the CRDs of the files in fsys that pattern
// matches, in the order of their names.
func FromFS(fsys fs.FS, pattern string) ([]*apiextensionsv1.CustomResourceDefinition, error) {
	names, err := fs.Glob(fsys, pattern)
	if err != nil {
		return nil, err
	}
	sort.Strings(names)
	crds := make([]*apiextensionsv1.CustomResourceDefinition, 0, len(names))
	for _, name := range names {
		data, err := fs.ReadFile(fsys, name)
		if err != nil {
			return nil, err
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.UnmarshalStrict(data, crd); err != nil {
			return nil, fmt.Errorf("decoding CRD %s: %w", name, err)
		}
		crds = append(crds, crd)
	}
	return crds, nil
}
