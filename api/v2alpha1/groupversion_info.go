// Package v2alpha1 holds the velero.io/v2alpha1 kinds: Velero's records of
// its data mover's transfers (DataUpload, DataDownload). Lifeboat has no
// data mover and never creates them; their CRDs are installed so that
// Velero's tools and objects work against a Lifeboat install, with
// Velero's schemas (config/crd's comparison test holds them to it).
//
// +kubebuilder:object:generate=true
// +groupName=velero.io
package v2alpha1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	// SchemeGroupVersion is the group and version of every kind in this package.
	SchemeGroupVersion = schema.GroupVersion{Group: "velero.io", Version: "v2alpha1"}

	// SchemeBuilder registers the kinds with a runtime.Scheme.
	SchemeBuilder = &scheme.Builder{GroupVersion: SchemeGroupVersion} //nolint:staticcheck // SA1019: as in api/v1

	// AddToScheme adds the kinds of this package to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)
