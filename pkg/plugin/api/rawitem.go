package api

import (
	"encoding/json"
	"sync"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utiljson "k8s.io/apimachinery/pkg/util/json"
)

// RawItem is an item held as its JSON and decoded only when its content is
// asked for. Plugin clients send a RawItem's JSON as it is, so a server
// that hands an item to an out-of-process action never decodes and
// re-encodes it on the way; once decoded (and perhaps changed) it is encoded
// from its content again.
type RawItem struct {
	raw  []byte
	once sync.Once
	obj  *unstructured.Unstructured
}

var _ runtime.Unstructured = (*RawItem)(nil)

// NewRawItem wraps the JSON of one object.
func NewRawItem(data []byte) *RawItem { return &RawItem{raw: data} }

// RawJSON returns the item's JSON: the bytes it was made from while its
// content was never handed out, else its content encoded.
func (r *RawItem) RawJSON() ([]byte, error) {
	if r.obj == nil {
		return r.raw, nil
	}
	return json.Marshal(r.obj.Object)
}

// decoded returns the item's content, decoding it on first use the way
// Kubernetes decodes unstructured objects (whole numbers as int64). JSON
// that does not decode yields an empty object: RawItems are made from
// bytes an API server or plugin produced.
func (r *RawItem) decoded() *unstructured.Unstructured {
	r.once.Do(func() {
		var obj map[string]any
		if err := utiljson.Unmarshal(r.raw, &obj); err != nil || obj == nil {
			obj = map[string]any{}
		}
		r.obj = &unstructured.Unstructured{Object: obj}
	})
	return r.obj
}

func (r *RawItem) GetObjectKind() schema.ObjectKind { return r.decoded().GetObjectKind() }

func (r *RawItem) DeepCopyObject() runtime.Object { return r.decoded().DeepCopyObject() }

func (r *RawItem) NewEmptyInstance() runtime.Unstructured { return r.decoded().NewEmptyInstance() }

func (r *RawItem) UnstructuredContent() map[string]any { return r.decoded().UnstructuredContent() }

func (r *RawItem) SetUnstructuredContent(content map[string]any) {
	r.decoded().SetUnstructuredContent(content)
}

func (r *RawItem) IsList() bool { return r.decoded().IsList() }

func (r *RawItem) EachListItem(fn func(runtime.Object) error) error {
	return r.decoded().EachListItem(fn)
}

func (r *RawItem) EachListItemWithAlloc(fn func(runtime.Object) error) error {
	return r.decoded().EachListItemWithAlloc(fn)
}

// Unstructured returns the decoded item, for callers that need the type.
func (r *RawItem) Unstructured() *unstructured.Unstructured { return r.decoded() }
