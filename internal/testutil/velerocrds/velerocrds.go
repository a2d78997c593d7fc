// Package velerocrds holds Velero's own CustomResourceDefinitions, for tests
// that must hold Lifeboat to Velero's API as Velero defines it rather than
// as Lifeboat reads it: the schema comparison in config/crd, and the tests
// that run the server, its status writes and `lifeboat install` against an
// API server with Velero's CRDs installed.
//
// The files under v1.18.3/ are Velero v1.18.3's config/crd/v1/bases and
// config/crd/v2alpha1/bases, copied unchanged from the Velero module (Apache
// License 2.0, as Velero ships them; test data, never installed by
// Lifeboat). Lifeboat's main module cannot depend on Velero, so the copy
// is checked by test/compat, which does: TestVeleroCRDCopyIsVelerosOwn
// fails when a file differs from the module's.
package velerocrds

import (
	"embed"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	"github.com/lifeboat-io/lifeboat/config/crd"
)

// Version is the Velero release the files come from; test/compat's go.mod
// requires the same one.
const Version = "v1.18.3"

//go:embed v1.18.3/*.yaml
var files embed.FS

// All returns Velero's CRDs, sorted by file name.
func All() ([]*apiextensionsv1.CustomResourceDefinition, error) {
	return crd.FromFS(files, Version+"/*.yaml")
}
