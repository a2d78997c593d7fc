package install

import (
	"encoding/json"
	"fmt"
	"io"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
)

// Manifest is obj as install sends and prints it: no status and no
// creationTimestamp, which a typed object always carries (as zero values)
// but an apply must not claim.
func Manifest(obj client.Object) (*unstructured.Unstructured, error) {
	if obj.GetObjectKind().GroupVersionKind().Kind == "" {
		return nil, fmt.Errorf("%T %s has no kind set", obj, obj.GetName())
	}
	data, err := json.Marshal(obj)
	if err != nil {
		return nil, fmt.Errorf("encoding %T %s: %w", obj, obj.GetName(), err)
	}
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(data); err != nil {
		return nil, fmt.Errorf("decoding %T %s: %w", obj, obj.GetName(), err)
	}
	unstructured.RemoveNestedField(u.Object, "status")
	unstructured.RemoveNestedField(u.Object, "metadata", "creationTimestamp")
	unstructured.RemoveNestedField(u.Object, "spec", "template", "metadata", "creationTimestamp")
	// Empty values a typed object cannot leave out: an apply would claim
	// them, and the aggregated ClusterRole's rules belong to the API
	// server's aggregation controller.
	if spec, ok := u.Object["spec"].(map[string]any); ok {
		// A Deployment's strategy, a DaemonSet's updateStrategy.
		for _, field := range []string{"strategy", "updateStrategy"} {
			if s, ok := spec[field].(map[string]any); ok && len(s) == 0 {
				delete(spec, field)
			}
		}
		if len(spec) == 0 {
			delete(u.Object, "spec")
		}
	}
	if rules, ok := u.Object["rules"]; ok && rules == nil {
		delete(u.Object, "rules")
	}
	return u, nil
}

// Manifests is Manifest of each object.
func Manifests(objs []client.Object) ([]*unstructured.Unstructured, error) {
	out := make([]*unstructured.Unstructured, 0, len(objs))
	for _, obj := range objs {
		u, err := Manifest(obj)
		if err != nil {
			return nil, err
		}
		out = append(out, u)
	}
	return out, nil
}

// WriteYAML writes objs as a multi-document YAML stream, each document
// starting with "---".
func WriteYAML(w io.Writer, objs []*unstructured.Unstructured) error {
	for _, u := range objs {
		data, err := yaml.Marshal(u.Object)
		if err != nil {
			return fmt.Errorf("encoding %s %s: %w", u.GetKind(), u.GetName(), err)
		}
		if _, err := fmt.Fprintf(w, "---\n%s", data); err != nil {
			return err
		}
	}
	return nil
}

// WriteJSON writes objs as one JSON List, as kubectl prints several objects.
func WriteJSON(w io.Writer, objs []*unstructured.Unstructured) error {
	items := make([]any, len(objs))
	for i, u := range objs {
		items[i] = u.Object
	}
	data, err := json.MarshalIndent(map[string]any{"apiVersion": "v1", "kind": "List", "items": items}, "", "    ")
	if err != nil {
		return fmt.Errorf("encoding the objects as JSON: %w", err)
	}
	_, err = w.Write(append(data, '\n'))
	return err
}
