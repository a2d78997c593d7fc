package restore

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/lifeboat-io/lifeboat/internal/cluster"
	"github.com/lifeboat-io/lifeboat/internal/jsonmap"
	"github.com/lifeboat-io/lifeboat/internal/listpage"
)

// metadataOnly asks the API server to answer a create with the created
// object's metadata alone (as the metadata client asks for reads), and
// accepts the whole object from a server that does not transform it.
const metadataOnly = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json"

// createForUID creates obj and returns the UID the API server gave it. A
// restore needs nothing else of a created object but a pod's (its hooks
// and volume restores), and decoding every response whole into a map, as
// the dynamic client does, was about a third of a restore's CPU (profile
// in bench/README.md). Errors are the API server's, as the dynamic
// client returns them (apierrors.IsAlreadyExists works on them).
func (r *run) createForUID(ctx context.Context, info resourceInfo, ns string, obj *unstructured.Unstructured) (types.UID, error) {
	// jsonmap writes json.Marshal's bytes, at a third of its CPU.
	body, err := jsonmap.Encode(obj.Object)
	if err != nil {
		return "", fmt.Errorf("encoding the item: %w", err)
	}
	req := r.cs.CoreV1().RESTClient().Post().AbsPath(cluster.ResourcePath(info.GVR, namespaceIf(info.Namespaced, ns))).
		SetHeader("Content-Type", "application/json").
		SetHeader("Accept", metadataOnly).
		Body(body)
	if r.dry != nil {
		req = req.Param("dryRun", metav1.DryRunAll)
	}
	res := req.Do(ctx)
	raw, err := res.Raw()
	if err != nil {
		// Raw's error is made from the status code alone ("the server
		// rejected our request..."); Error reads the API server's Status
		// for its message and reason.
		return "", res.Error()
	}
	created, err := listpage.Object(raw)
	if err != nil {
		return "", fmt.Errorf("decoding the API server's answer to the create: %w", err)
	}
	return types.UID(created.UID), nil
}

// namespaceIf is ns for a namespaced type and "" for a cluster-scoped one.
func namespaceIf(namespaced bool, ns string) string {
	if namespaced {
		return ns
	}
	return ""
}
