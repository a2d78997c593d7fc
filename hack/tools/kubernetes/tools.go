//go:build tools

// Package tools pins the Kubernetes binaries the tests, `make cluster` and
// the demo run: kube-apiserver for the API-server-only clusters, and the
// node's components for the real single-node cluster. One module for all of
// them, so they share one dependency graph and one build cache.
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-proxy"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubectl"
	_ "k8s.io/kubernetes/cmd/kubelet"
)
