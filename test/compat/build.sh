#!/usr/bin/env bash
# Builds the compatibility plugin (a plugin binary made with Velero's own SDK,
# see main.go) and prints the binary's path. The binary is cached in a
# directory keyed by this module's go.mod, go.sum and sources, the way
# hack/gotool.sh caches pinned tools: a change to any of them rebuilds it,
# anything else reuses it. The first build downloads Velero's dependency
# graph (minutes); later ones take seconds or nothing.
# Usage: test/compat/build.sh
set -euo pipefail
mod=$(cd "$(dirname "$0")" && pwd)
key=$(cd "$mod" && cat go.mod go.sum $(ls *.go | sort) | sha256sum | cut -c1-16)
cache=${LIFEBOAT_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/lifeboat}
bin="$cache/compat-plugin-$key/velero-sdk-plugin"
if [[ ! -x "$bin" ]]; then
  mkdir -p "$(dirname "$bin")"
  echo "building the Velero-SDK compatibility plugin (once per change)" >&2
  # GOWORK=off: this is its own module; never build it against Lifeboat's.
  (cd "$mod" && GOWORK=off go build -trimpath -o "$bin.tmp.$$" .)
  mv "$bin.tmp.$$" "$bin"
fi
echo "$bin"
