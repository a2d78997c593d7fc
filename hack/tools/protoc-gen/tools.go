//go:build tools

// Package tools pins the protoc plugins that turn pkg/plugin/proto into Go:
// protoc-gen-go (messages) and protoc-gen-go-grpc (service stubs). Both are
// built by hack/protoc.sh through hack/gotool.sh.
package tools

import (
	_ "google.golang.org/grpc/cmd/protoc-gen-go-grpc"
	_ "google.golang.org/protobuf/cmd/protoc-gen-go"
)
