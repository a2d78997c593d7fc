package backup

import (
	"encoding/json"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/lifeboat-io/lifeboat/api/v1"
)

func TestMetadataLeavesOutClusterOnlyRecords(t *testing.T) {
	b := &v1.Backup{ObjectMeta: metav1.ObjectMeta{Name: "bk", Annotations: map[string]string{"team": "ops"}}}
	for _, a := range v1.ClusterOnlyAnnotations {
		b.Annotations[a] = "x"
	}
	data, err := MarshalMetadata(b)
	if err != nil {
		t.Fatal(err)
	}
	var stored v1.Backup
	if err := json.Unmarshal(data, &stored); err != nil {
		t.Fatal(err)
	}
	if len(stored.Annotations) != 1 || stored.Annotations["team"] != "ops" {
		t.Fatalf("stored annotations %v, want the user's alone", stored.Annotations)
	}
	if len(b.Annotations) != 1+len(v1.ClusterOnlyAnnotations) {
		t.Fatal("the Backup itself lost annotations")
	}
}
