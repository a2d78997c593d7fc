package pluginhost

import "github.com/lifeboat-io/lifeboat/pkg/plugin/api"

// retryAfterCrash says, for every method of every plugin kind, whether a
// call whose process died under it is made again on a new process.
//
// A crash tells the host nothing about how far the call got: the plugin may
// have created a snapshot, a volume or an operation and died before
// answering. A call that only reads, or whose repetition leaves the world as
// one call would (a delete, a cancel, an Init with the same config), is
// repeated, so that a plugin that crashed on an unrelated call does not fail
// it. A call that creates something is not: a second snapshot or volume
// would leak, and a second operation would run beside the first with
// nothing tracking the first. Its error is reported instead, naming the
// plugin and the call, and the operator (or the caller's own retry, which
// knows what the call was for) decides.
//
// BackupItemAction and RestoreItemAction v1 Execute are repeated: they
// return an item to store or create, and the deletion engine already asks
// the same of DeleteItemActions (see docs/architecture.md). v2 Execute may
// start an asynchronous operation, which is exactly what must not start
// twice.
//
// A method missing here (TestEveryMethodHasARetryRule catches that) is not
// repeated.
var retryAfterCrash = map[api.Kind]map[string]bool{
	api.KindObjectStore: {
		"Init":         true,
		"ObjectExists": true,
		"GetObject":    true,
		// The body has been partly read and cannot be sent again.
		"PutObject":          false,
		"ListCommonPrefixes": true,
		"ListObjects":        true,
		"DeleteObject":       true,
		"CreateSignedURL":    true,
	},
	api.KindVolumeSnapshotter: {
		"Init":                     true,
		"CreateSnapshot":           false,
		"CreateVolumeFromSnapshot": false,
		"GetVolumeInfo":            true,
		"DeleteSnapshot":           true,
		"GetVolumeID":              true,
		"SetVolumeID":              true,
	},
	api.KindBackupItemAction: {
		"AppliesTo": true,
		"Execute":   true,
	},
	api.KindBackupItemActionV2: {
		"AppliesTo": true,
		"Execute":   false,
		"Progress":  true,
		"Cancel":    true,
	},
	api.KindRestoreItemAction: {
		"AppliesTo": true,
		"Execute":   true,
	},
	api.KindRestoreItemActionV2: {
		"AppliesTo":               true,
		"Execute":                 false,
		"Progress":                true,
		"Cancel":                  true,
		"AreAdditionalItemsReady": true,
	},
	api.KindDeleteItemAction: {
		"AppliesTo": true,
		"Execute":   true,
	},
	api.KindItemBlockAction: {
		"AppliesTo":       true,
		"GetRelatedItems": true,
	},
}
