//go:build tools

// Package tools pins Velero's AWS object store plugin,
// velero-plugin-for-aws, at the release test/incluster runs Velero's own
// server with (its backups land in an S3 bucket through this plugin, as a
// Velero user's do). It is built from the module proxy's copy of the
// release with the plugin's own dependency versions, as its image is.
package tools

import _ "github.com/vmware-tanzu/velero-plugin-for-aws/velero-plugin-for-aws"
