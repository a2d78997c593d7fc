#!/usr/bin/env bash
# Builds versitygw, the S3 server the storage tests run against, into a cache
# directory keyed by its version, and prints the binary's path. A cache hit
# costs nothing; a cold build takes ~1.5 minutes on 2 cores (module downloads
# included), so the cache lives outside the repository and is shared by every
# clone on the machine.
set -euo pipefail

VERSITYGW_VERSION=v1.8.0
cache=${LIFEBOAT_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/lifeboat}
dir="$cache/versitygw-$VERSITYGW_VERSION"

if [[ -x "$dir/versitygw" ]]; then
  echo "$dir/versitygw"
  exit 0
fi
mkdir -p "$dir"
# Build into a temporary name and rename: an interrupted build never leaves a
# half-written binary that a later run takes for a cache hit.
tmp=$(mktemp -d "$dir/.build.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

echo "building versitygw $VERSITYGW_VERSION into $dir (once per machine)" >&2
# `go install pkg@version` builds versitygw with its own go.mod, so the
# project's module graph neither constrains nor records its dependencies.
# GOFLAGS and GOWORK are replaced because a caller's -mod=vendor, -modfile or
# workspace would make that command fail.
(cd "$tmp" && GOWORK=off GOFLAGS=-trimpath GOBIN="$tmp" \
  go install "github.com/versity/versitygw/cmd/versitygw@$VERSITYGW_VERSION")
mv "$tmp/versitygw" "$dir/versitygw"
echo "$dir/versitygw"
