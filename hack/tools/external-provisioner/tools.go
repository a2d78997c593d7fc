//go:build tools

// Package tools pins the csi-provisioner sidecar the CSI tests run
// (internal/testutil/csistack).
package tools

import (
	_ "github.com/kubernetes-csi/external-provisioner/v6/cmd/csi-provisioner"
)
