// Package lifeboatsuite re-exports kopia's storage conformance tests for
// tests outside kopia's module (see go.mod for why it is named so).
package lifeboatsuite

import (
	"context"
	"testing"

	"github.com/kopia/kopia/internal/blobtesting"
	"github.com/kopia/kopia/internal/providervalidation"
	"github.com/kopia/kopia/repo/blob"
)

// ConcurrentAccessOptions are VerifyConcurrentAccess's parameters.
type ConcurrentAccessOptions = blobtesting.ConcurrentAccessOptions

// VerifyStorage is kopia's test of a storage's semantics: missing blobs,
// concurrent puts, ranged gets and invalid ranges, lists with and without
// prefix, overwrites, deletes, retention, set/get of modification times.
func VerifyStorage(ctx context.Context, t *testing.T, st blob.Storage, opts blob.PutOptions) {
	t.Helper()
	blobtesting.VerifyStorage(ctx, t, st, opts)
}

// VerifyConcurrentAccess races getters, putters, deleters and listers on a
// pool of blobs and fails on any error other than a clean not-found.
func VerifyConcurrentAccess(t *testing.T, st blob.Storage, opts ConcurrentAccessOptions) {
	t.Helper()
	blobtesting.VerifyConcurrentAccess(t, st, opts)
}

// AssertConnectionInfoRoundTrips checks that the storage's ConnectionInfo,
// through kopia's registry, opens an equal storage.
func AssertConnectionInfoRoundTrips(ctx context.Context, t *testing.T, st blob.Storage) {
	t.Helper()
	blobtesting.AssertConnectionInfoRoundTrips(ctx, t, st)
}

// ValidateProvider is `kopia repository validate-provider` with the
// options kopia's own tests use: equivalent connections, conditional
// creates, list consistency, clock drift, concurrent workers.
func ValidateProvider(ctx context.Context, st blob.Storage) error {
	return providervalidation.ValidateProvider(ctx, st, blobtesting.TestValidationOptions)
}
