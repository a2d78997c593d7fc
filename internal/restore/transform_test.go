package restore

import (
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
	"github.com/lifeboat-io/lifeboat/pkg/volumehelper"
)

// The claimed-by annotation is the backup's bookkeeping: restored claims
// and volumes (and anything a plugin marked) come back without it, their
// other annotations kept.
func TestPrepareStripsClaimedBy(t *testing.T) {
	tr := &transformer{restore: &v1.Restore{}, backupName: "b"}
	for _, gr := range []schema.GroupResource{grPVCs, grPVs, {Group: "example.io", Resource: "widgets"}} {
		obj := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "v1", "kind": "X",
			"metadata": map[string]any{"name": "data", "annotations": map[string]any{
				volumehelper.ClaimedByAnnotation: "example.io/custom-a", "team": "storage",
			}},
		}}
		tr.prepare(obj, gr, resourceInfo{})
		ann := obj.GetAnnotations()
		if _, ok := ann[volumehelper.ClaimedByAnnotation]; ok {
			t.Errorf("%s: %s kept on restore", gr, volumehelper.ClaimedByAnnotation)
		}
		if ann["team"] != "storage" {
			t.Errorf("%s: other annotations lost: %v", gr, ann)
		}
	}
	only := &unstructured.Unstructured{Object: map[string]any{"metadata": map[string]any{"name": "x",
		"annotations": map[string]any{volumehelper.ClaimedByAnnotation: "p"}}}}
	tr.prepare(only, grPVCs, resourceInfo{})
	if only.GetAnnotations() != nil {
		t.Errorf("annotations %v, want none", only.GetAnnotations())
	}
}
