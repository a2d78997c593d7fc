// Package generated is the Go code of Velero's plugin protocol (proto
// package "generated"): the messages and gRPC services of the v1 plugin
// kinds (ObjectStore, VolumeSnapshotter, BackupItemAction,
// RestoreItemAction, DeleteItemAction), PluginLister, and the shared
// messages (Stack, ResourceIdentifier, ...). The v2 actions, ItemBlockAction
// and Lifeboat's own BackupItemActionStream live in subpackages.
//
// Everything but this file is generated from pkg/plugin/proto by
// hack/protoc.sh (make generate) with pinned protoc plugins; edit the
// .proto files, never the .pb.go files. Plugin authors do not use this
// package: package framework carries their plugins over it, and turns the
// host's side of each service into a Go interface of package api.
package generated
