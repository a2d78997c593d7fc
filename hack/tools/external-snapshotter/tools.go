//go:build tools

// Package tools pins the CSI snapshot stack the CSI tests run
// (internal/testutil/csistack): the snapshot-controller and the
// csi-snapshotter sidecar, from the external-snapshotter module; the
// snapshot CRDs come from its client module at the same version.
package tools

import (
	_ "github.com/kubernetes-csi/external-snapshotter/v8/cmd/csi-snapshotter"
	_ "github.com/kubernetes-csi/external-snapshotter/v8/cmd/snapshot-controller"
)
