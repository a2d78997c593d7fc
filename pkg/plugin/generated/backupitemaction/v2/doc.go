// Package v2 is the Go code of Velero's BackupItemAction v2 service (proto
// package "v2"): Execute with asynchronous operations, Progress, Cancel.
//
// Everything but this file is generated from
// pkg/plugin/proto/backupitemaction/v2 by hack/protoc.sh (make generate);
// package framework serves and calls it.
package v2
