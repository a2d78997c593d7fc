//go:build tools

// Package tools pins the kube-apiserver that the tests and `make cluster` run.
package tools

import _ "k8s.io/kubernetes/cmd/kube-apiserver"
