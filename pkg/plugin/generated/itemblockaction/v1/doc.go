// Package v1 is the Go code of Velero's ItemBlockAction service (proto
// package "v1"): the items that must be backed up together with an item.
//
// Everything but this file is generated from
// pkg/plugin/proto/itemblockaction/v1 by hack/protoc.sh (make generate);
// package framework serves and calls it.
package v1
