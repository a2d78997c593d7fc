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
	names, err := fs.Glob(files, "bases/*.yaml")
	if err != nil {
		return nil, err
	}
	sort.Strings(names)
	crds := make([]*apiextensionsv1.CustomResourceDefinition, 0, len(names))
	for _, name := range names {
		data, err := files.ReadFile(name)
		if err != nil {
			return nil, err
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.UnmarshalStrict(data, crd); err != nil {
			return nil, fmt.Errorf("decoding embedded CRD %s: %w", name, err)
		}
		crds = append(crds, crd)
	}
	return crds, nil
}
