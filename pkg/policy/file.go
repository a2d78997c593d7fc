package policy

import (
	"bytes"
	"fmt"

	"go.yaml.in/yaml/v3"
	corev1 "k8s.io/api/core/v1"
	sigsyaml "sigs.k8s.io/yaml"
)

// ParseFile parses what users have at hand: the policy itself, or the
// ConfigMap manifest they apply (or got from kubectl get -o yaml), which is
// read through FromConfigMap. Problems are returned as a *ValidationError,
// as Parse returns them.
func ParseFile(data []byte) (*Policies, error) {
	if len(data) > MaxFileBytes {
		return nil, &ValidationError{Problems: []*FieldError{{
			Message: fmt.Sprintf("the file is %d bytes; a resource policy or its ConfigMap manifest takes at most %d MiB", len(data), MaxFileBytes>>20),
		}}}
	}
	// A file that is not YAML at all is reported by Parse, with the same
	// message a backup would show.
	var doc yaml.Node
	if yaml.NewDecoder(bytes.NewReader(data)).Decode(&doc) != nil || !isConfigMap(&doc) {
		return Parse(data)
	}
	// The manifest decoder below expands aliases without bounds, as the
	// policy parser would: the same walk bounds them first.
	p := &parser{}
	if !p.checkSize(&doc) {
		return nil, &ValidationError{Problems: []*FieldError{p.problems[0].FieldError}}
	}
	cm := &corev1.ConfigMap{}
	if err := sigsyaml.Unmarshal(data, cm); err != nil {
		return nil, fmt.Errorf("not a valid ConfigMap manifest: %w", err)
	}
	return FromConfigMap(cm)
}

// isConfigMap reports whether doc is a mapping with "kind: ConfigMap".
func isConfigMap(doc *yaml.Node) bool {
	root := doc
	if root.Kind == yaml.DocumentNode && len(root.Content) > 0 {
		root = root.Content[0]
	}
	if root.Kind != yaml.MappingNode {
		return false
	}
	for i := 0; i+1 < len(root.Content); i += 2 {
		if root.Content[i].Value == "kind" {
			return root.Content[i+1].Kind == yaml.ScalarNode && root.Content[i+1].Value == "ConfigMap"
		}
	}
	return false
}
