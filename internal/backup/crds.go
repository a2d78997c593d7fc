package backup

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/lifeboat-io/lifeboat/internal/archive"
)

var crdResource = schema.GroupResource{Group: "apiextensions.k8s.io", Resource: "customresourcedefinitions"}

// writeCRDs adds the CustomResourceDefinition of every custom resource type
// the backup holds items of, as Velero does: custom resources cannot be
// restored into a cluster that lacks their definition. Types that no CRD
// defines (built-in or aggregated APIs) are skipped; CRDs already written by
// a listing of the CRD type itself are not written twice.
func (r *run) writeCRDs(ctx context.Context, aw *archive.Writer, crdType resourceType, typesWithItems []schema.GroupResource, written map[string]bool) error {
	sort.Slice(typesWithItems, func(i, j int) bool { return typesWithItems[i].String() < typesWithItems[j].String() })
	for _, gr := range typesWithItems {
		if gr.Group == "" || gr == crdResource {
			continue
		}
		name := gr.Resource + "." + gr.Group
		if written[name] {
			continue
		}
		body, err := r.e.lister.client.Get().AbsPath(crdType.listPath(""), name).
			SetHeader("Accept", "application/json").Do(ctx).Raw()
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			r.results.Error("", fmt.Sprintf("getting the CustomResourceDefinition of %s: %v", gr, err))
			continue
		}
		var head itemHead
		if err := json.Unmarshal(body, &head); err != nil {
			return fmt.Errorf("decoding CustomResourceDefinition %s: %w", name, err)
		}
		item := rawItem{Name: name, Labels: head.Metadata.Labels, JSON: withTypeMeta(body, head.APIVersion, head.Kind, typePrefix(crdType))}
		if err := r.writeItem(ctx, aw, crdType, item, nil, 0); err != nil {
			return err
		}
		written[name] = true
	}
	return nil
}
