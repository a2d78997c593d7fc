#!/usr/bin/env bash
# Regenerates the Go code of the plugin protocol:
#   pkg/plugin/proto/**/*.proto -> pkg/plugin/generated/**/*.pb.go, *_grpc.pb.go
#
# protoc comes from Debian's protobuf-compiler package (3.21.x); the
# well-known types it imports (google/protobuf/{empty,duration,timestamp}.proto)
# come from libprotobuf-dev, which apt installs alongside it. The two Go
# plugins, protoc-gen-go and protoc-gen-go-grpc, are pinned by the tools module
# hack/tools/protoc-gen and built once per machine into a cache directory
# keyed by that module's go.mod and go.sum (the scheme of hack/gotool.sh, which
# builds one binary per module; this module holds two). The generated files
# name the versions they were made with, so another protoc or plugin version
# shows up as a diff of the committed code.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

want_protoc=3.21
install_cmd="apt-get install -y protobuf-compiler libprotobuf-dev"
wkt=/usr/include/google/protobuf/timestamp.proto

if ! command -v protoc >/dev/null 2>&1 || [[ ! -f $wkt ]]; then
  if [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null 2>&1; then
    echo "protoc or its well-known types missing; running: $install_cmd" >&2
    if ! DEBIAN_FRONTEND=noninteractive $install_cmd >&2; then
      apt-get update >&2
      DEBIAN_FRONTEND=noninteractive $install_cmd >&2
    fi
  else
    echo "protoc $want_protoc.x not found (or $wkt missing); install it with: sudo $install_cmd" >&2
    exit 1
  fi
fi
# "libprotoc 3.21.12" -> "3.21.12"
version=$(protoc --version | awk '{print $2}')
if [[ $version != "$want_protoc".* ]]; then
  echo "$(command -v protoc) is protoc $version; want $want_protoc.x (Debian's protobuf-compiler: $install_cmd)" >&2
  exit 1
fi

# Build the pinned plugins (once per machine and version pin).
mod="$root/hack/tools/protoc-gen"
key=$(cat "$mod/go.mod" "$mod/go.sum" | sha256sum | cut -c1-16)
cache=${LIFEBOAT_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/lifeboat}
bin="$cache/protoc-gen-$key"
if [[ ! -x "$bin/protoc-gen-go" || ! -x "$bin/protoc-gen-go-grpc" ]]; then
  mkdir -p "$cache"
  echo "building protoc-gen-go and protoc-gen-go-grpc (once per machine)" >&2
  # Build into a temporary directory and rename it: an interrupted build never
  # leaves a half-written binary that a later run takes for a cache hit.
  tmp=$(mktemp -d "$cache/.protoc-gen.XXXXXX")
  (cd "$mod" && go build -trimpath -o "$tmp/" \
    google.golang.org/protobuf/cmd/protoc-gen-go \
    google.golang.org/grpc/cmd/protoc-gen-go-grpc)
  rm -rf "$bin"
  mv "$tmp" "$bin"
fi

src=pkg/plugin/proto
out=pkg/plugin/generated
# Start from a clean slate so a removed .proto leaves no stale code behind.
mkdir -p "$out"
find "$out" \( -name '*.pb.go' -o -name '*_grpc.pb.go' \) -delete

# A stable file order; each file is named by its path under $src, which is
# also the path recorded in its descriptor (and what `import` refers to).
mapfile -t files < <(cd "$src" && find . -name '*.proto' | sed 's|^\./||' | LC_ALL=C sort)
protoc \
  --plugin=protoc-gen-go="$bin/protoc-gen-go" \
  --plugin=protoc-gen-go-grpc="$bin/protoc-gen-go-grpc" \
  --proto_path="$src" --proto_path=/usr/include \
  --go_out="$out" --go_opt=paths=source_relative \
  --go-grpc_out="$out" --go-grpc_opt=paths=source_relative \
  "${files[@]/#/$src/}"
gofmt -l "$out" | (! grep .) || { echo "generated code is not gofmt-clean" >&2; exit 1; }
