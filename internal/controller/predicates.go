package controller

import (
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
)

// specChanged lets through the updates that change an object's spec, and
// every create, delete and generic event: what controller-runtime's
// GenerationChangedPredicate does where a CRD has a status subresource.
// Velero's CRDs, and so Lifeboat's, have none, and then the API server
// increments metadata.generation on a status write too: a controller
// filtering by generation would be woken by each status write of its own
// (a location validated again the moment its validation is recorded).
// Comparing the specs works with either shape.
var specChanged = predicate.Funcs{
	UpdateFunc: func(e event.UpdateEvent) bool {
		if e.ObjectOld == nil || e.ObjectNew == nil {
			return true
		}
		return !equality.Semantic.DeepEqual(spec(e.ObjectOld), spec(e.ObjectNew))
	},
}

// spec is obj's spec in its JSON form, or obj itself when it cannot be
// converted (so that it compares unequal to anything else).
func spec(obj runtime.Object) any {
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return obj
	}
	return u["spec"]
}
