// Package v1 holds the velero.io/v1 API kinds that Lifeboat serves. Field
// names and json tags match Velero's so that objects, manifests and clients
// written for Velero work unchanged; Lifeboat's additions (status.conditions)
// are optional and never change the meaning of an existing field.
//
// +kubebuilder:object:generate=true
// +groupName=velero.io
package v1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	// SchemeGroupVersion is the group and version of every kind in this package.
	SchemeGroupVersion = schema.GroupVersion{Group: "velero.io", Version: "v1"}

	// SchemeBuilder registers the kinds with a runtime.Scheme.
	SchemeBuilder = &scheme.Builder{GroupVersion: SchemeGroupVersion} //nolint:staticcheck // SA1019: apimachinery's runtime.SchemeBuilder would drop controller-runtime from api/v1; a change of its own

	// AddToScheme adds the kinds of this package to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

// Resource turns a resource name of this group into a GroupResource.
func Resource(resource string) schema.GroupResource {
	return SchemeGroupVersion.WithResource(resource).GroupResource()
}
