// kopia's blob storage conformance tests (internal/blobtesting,
// internal/providervalidation) live in kopia's internal tree, which only
// packages under github.com/kopia/kopia may import. This module sits under
// that path to hand them, unchanged, to Lifeboat's tests of its own
// storage; the main module requires it with a local replace. Nothing in
// Lifeboat's binaries imports it.
module github.com/kopia/kopia/lifeboatsuite

go 1.26.0

require github.com/kopia/kopia v0.16.0

replace github.com/kopia/kopia => github.com/project-velero/kopia v0.0.0-20251230033609-d946b1e75197
