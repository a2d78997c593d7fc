module github.com/lifeboat-io/lifeboat/hack/tools/protoc-gen

go 1.26.0

require (
	google.golang.org/grpc/cmd/protoc-gen-go-grpc v1.6.2
	google.golang.org/protobuf v1.36.12
)
