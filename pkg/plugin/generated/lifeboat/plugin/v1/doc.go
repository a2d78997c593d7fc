// Package pluginv1 is the Go code of Lifeboat's one extension of the plugin
// protocol, BackupItemActionStream (proto package "lifeboat.plugin.v1"):
// the Execute calls of a backup's BackupItemActions over one long-lived
// stream per plugin process instead of one unary call per item. Velero
// never calls it; a plugin without it answers Unimplemented and the host
// falls back to Velero's unary calls.
//
// Everything but this file is generated from
// pkg/plugin/proto/lifeboat/plugin/v1 by hack/protoc.sh (make generate);
// package framework serves and calls it.
package pluginv1
